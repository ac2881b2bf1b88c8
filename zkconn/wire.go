package zkconn

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// A wire watches the bytes between one *zk.Conn and the servers, on every
// connection it dials, to learn what go-zookeeper does not export and to
// enforce one rule it does not keep:
//
//   - One *zk.Conn carries one ZooKeeper session. After an expiry,
//     go-zookeeper asks for a new session on the same *zk.Conn and sends the
//     requests still queued for the old one on it. A wire refuses a connect
//     request for a new session once the *zk.Conn has had one, so a request
//     made for one session never runs on another: the Session replaces the
//     whole *zk.Conn instead.
//   - The session timeout the server granted (it clamps what the client asks
//     to its own bounds) is read from the connect response.
//   - heard is a time by which the server had surely heard from the session:
//     the time a request was written whose reply (or any later one) has been
//     read. The server expires a session no sooner than the session timeout
//     after it last heard from it, so until heard + timeout the session is
//     alive (ZooKeeper answers a session's requests in order, so a reply
//     answers the oldest request still unanswered, or a later one).
type wire struct {
	dial zk.Dialer

	base    time.Time    // heard is kept as an offset from base, on the monotonic clock
	session atomic.Int64 // the session id granted, 0 until one is
	timeout atomic.Int64 // the session timeout granted, in ns; 0 until known
	heard   atomic.Int64 // ns since base; see above
	rtt     atomic.Int64 // recent round trips, in ns: the longest, decaying
}

func newWire(dial zk.Dialer) *wire { return &wire{dial: dial, base: time.Now()} }

// RoundTrip returns how long replies have taken lately: the longest recent
// one, forgotten by an eighth with every faster reply.
func (w *wire) RoundTrip() time.Duration { return time.Duration(w.rtt.Load()) }

// errNewSession is what a wire returns to go-zookeeper when it asks for a
// second session on one *zk.Conn.
var errNewSession = errors.New("zkconn: a new session needs a new connection")

// dialer returns the zk.Dialer that taps every connection.
func (w *wire) dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := w.dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &tap{Conn: c, w: w}, nil
	}
}

// Timeout returns the session timeout granted, or 0 if none is known yet.
func (w *wire) Timeout() time.Duration { return time.Duration(w.timeout.Load()) }

// aliveUntil returns the time until which the server cannot have expired the
// session, or the zero time if it is not known.
func (w *wire) aliveUntil() time.Time {
	h, t := w.heard.Load(), w.timeout.Load()
	if h == 0 || t == 0 {
		return time.Time{}
	}
	return w.base.Add(time.Duration(h + t))
}

// tap is one connection of a wire. go-zookeeper writes each frame (a 4-byte
// length, then the body) in one Write, from one goroutine at a time, and
// reads from one goroutine.
type tap struct {
	net.Conn
	w *wire

	mu      sync.Mutex
	pending []int64 // write times (ns since base) of requests not yet answered, oldest first
	wrote   bool    // the connect request has gone out
	rbuf    []byte  // a partial frame read
	greeted bool    // the connect response has been read
}

func (t *tap) Write(b []byte) (int, error) {
	now := int64(time.Since(t.w.base))
	t.mu.Lock()
	first := !t.wrote
	t.wrote = true
	if first && len(b) >= 28 {
		// connect request: length, protocol version, last zxid, timeout, session id
		if id := int64(binary.BigEndian.Uint64(b[20:28])); id == 0 && t.w.session.Load() != 0 {
			t.mu.Unlock()
			t.Conn.Close()
			return 0, errNewSession
		}
	}
	t.pending = append(t.pending, now) // each Write is one request
	t.mu.Unlock()
	return t.Conn.Write(b)
}

func (t *tap) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		t.mu.Lock()
		t.rbuf = append(t.rbuf, b[:n]...)
		for len(t.rbuf) >= 4 {
			end := 4 + int(binary.BigEndian.Uint32(t.rbuf))
			if len(t.rbuf) < end {
				break
			}
			t.frame(t.rbuf[4:end])
			t.rbuf = append(t.rbuf[:0], t.rbuf[end:]...)
		}
		t.mu.Unlock()
	}
	return n, err
}

// xidNotification marks a watch event, which answers no request.
const xidNotification = -1

// frame takes one frame the server sent. The caller holds t.mu.
func (t *tap) frame(f []byte) {
	if !t.greeted {
		t.greeted = true
		// connect response: protocol version, timeout (ms), session id
		if len(f) < 16 {
			return
		}
		id := int64(binary.BigEndian.Uint64(f[8:16]))
		if id == 0 {
			return // expired: no session
		}
		t.w.session.CompareAndSwap(0, id)
		t.w.timeout.Store(int64(time.Duration(int32(binary.BigEndian.Uint32(f[4:8]))) * time.Millisecond))
	} else if len(f) < 4 || int32(binary.BigEndian.Uint32(f[:4])) == xidNotification {
		return
	}
	if len(t.pending) == 0 {
		return
	}
	sent := t.pending[0]
	t.pending = t.pending[1:]
	rtt := int64(time.Since(t.w.base)) - sent
	if old := t.w.rtt.Load(); rtt < old {
		rtt = old - (old-rtt)/8
	}
	t.w.rtt.Store(rtt) // one reader goroutine: no lost update
	for {
		h := t.w.heard.Load()
		if sent <= h || t.w.heard.CompareAndSwap(h, sent) {
			return
		}
	}
}
