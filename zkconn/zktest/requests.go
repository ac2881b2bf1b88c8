package zktest

import "encoding/binary"

// opPing is ZooKeeper's opcode for a ping, which clients send on a timer.
const opPing = 11

// Requests returns how many requests the proxy has forwarded to the target,
// on every connection so far: the frames that follow a connection's connect
// request, pings left out (a client sends those on a timer, busy or not).
// Tests use it to pin down how many requests an operation costs.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// A requestCounter reads the frames a client sends (a 4-byte big-endian
// length, then the frame: for requests, a 4-byte xid and a 4-byte opcode)
// and counts the requests into the proxy's total.
type requestCounter struct {
	p         *Proxy
	buf       []byte
	connected bool // the connect request has gone by
}

// read takes the next bytes the client sent.
func (r *requestCounter) read(b []byte) {
	r.buf = append(r.buf, b...)
	for len(r.buf) >= 4 {
		end := 4 + int(binary.BigEndian.Uint32(r.buf))
		if len(r.buf) < end {
			return
		}
		if frame := r.buf[4:end]; r.connected && len(frame) >= 8 && int32(binary.BigEndian.Uint32(frame[4:8])) != opPing {
			r.p.requests.Add(1)
		}
		r.connected = true
		r.buf = append(r.buf[:0], r.buf[end:]...)
	}
}
