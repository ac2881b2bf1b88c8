package zktest

import "encoding/binary"

// Requests returns how many requests the proxy has forwarded to the target,
// on every connection so far: the frames that follow a connection's connect
// request, pings left out (a client sends those on a timer, busy or not).
// Requests that a fault cut or black-holed never reach the target and are not
// counted; those whose replies it loses or drops are. Tests use it to pin
// down how many requests an operation costs.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// ZooKeeper's wire format, as the proxy reads it: each side sends frames, a
// 4-byte big-endian length and then a body of that many bytes. The first
// frame each way is the connect request and its response. After it, a
// request's body starts with its xid and opcode (4 bytes each) and a reply's
// with the xid of the request it answers, a zxid (8 bytes) and an error code
// (4 bytes). A request on a path carries the path first, as a 4-byte length
// and its bytes; a multi carries its ops, each behind a header of type
// (4 bytes), done (1 byte) and error (4 bytes), and ends with a header whose
// type is -1.

// maxFrame is the longest frame a framer believes in. ZooKeeper refuses
// frames over jute.maxbuffer, 1MB unless configured; the 4 bytes a
// four-letter word or its (text) reply starts with read as at least
// 0x20202020, more than 500MB.
const maxFrame = 64 << 20

// A framer splits what one side of a connection sends into frames.
type framer struct {
	buf    []byte // the start of a frame
	frames int    // how many frames have gone by
	raw    bool   // not ZooKeeper's protocol: passed on as read
}

// A frameKind says what next hands on.
type frameKind int

const (
	rawBytes     frameKind = iota // bytes of a stream that is not framed
	connectFrame                  // the connect request or response
	messageFrame                  // a request or reply
)

// next takes the next bytes read and calls f with each frame they complete,
// length included, in order; once the stream turns out not to be framed
// (a four-letter word, say) it calls f with the bytes as they come. f must
// not keep frame.
func (fr *framer) next(b []byte, f func(frame []byte, kind frameKind)) {
	if fr.raw {
		f(b, rawBytes)
		return
	}
	fr.buf = append(fr.buf, b...)
	start := 0
	for len(fr.buf)-start >= 4 {
		n := binary.BigEndian.Uint32(fr.buf[start:])
		if n > maxFrame {
			fr.raw = true
			f(fr.buf[start:], rawBytes)
			fr.buf = nil
			return
		}
		end := start + 4 + int(n)
		if len(fr.buf) < end {
			break
		}
		kind := messageFrame
		if fr.frames == 0 {
			kind = connectFrame
		}
		fr.frames++
		f(fr.buf[start:end], kind)
		start = end
	}
	fr.buf = append(fr.buf[:0], fr.buf[start:]...)
}

// A request is what the proxy needs to know of a request frame.
type request struct {
	xid   int32
	op    Op
	paths []opPath // the path it acts on; for a multi, those of its ops
}

// An opPath is an op and the path it acts on.
type opPath struct {
	op   Op
	path string
}

// xidUnknown is the xid of a frame too short to have one.
const xidUnknown = -1 // also a notification's: it answers no request

// xidPing is the xid of a ping and of its reply.
const xidPing = -2

// parseRequest reads a request frame (length included). A path it cannot
// read, in a frame cut short or an op it does not know, is left out.
func parseRequest(frame []byte) request {
	d := decoder{b: frame[4:]}
	r := request{xid: d.int32(), op: Op(d.int32())}
	if d.bad {
		return request{xid: xidUnknown, op: -1}
	}
	switch r.op {
	case OpMulti, OpMultiRead:
		for {
			op := Op(d.int32())
			d.take(5) // done, error
			if d.bad || op == -1 {
				return r
			}
			path := string(d.buffer())
			if !d.skipOp(op) {
				return r // cannot find the next op
			}
			r.paths = append(r.paths, opPath{op, path})
		}
	case OpCreate, OpDelete, OpExists, OpGetData, OpSetData, OpGetACL, OpSetACL,
		OpGetChildren, OpSync, OpGetChildren2, OpCheck, OpCreate2, OpCheckWatches,
		OpRemoveWatches, OpCreateContainer, OpDeleteContainer, OpCreateTTL,
		OpGetEphemerals, OpGetAllChildrenNumber, OpAddWatch:
		if path := d.buffer(); !d.bad {
			r.paths = []opPath{{r.op, string(path)}}
		}
	}
	return r
}

// replyXid returns the xid of a reply frame (length included): the request it
// answers, or a negative number for what answers none (pings, notifications).
func replyXid(frame []byte) int32 {
	d := decoder{b: frame[4:]}
	if xid := d.int32(); !d.bad {
		return xid
	}
	return xidUnknown
}

// A decoder reads jute, ZooKeeper's encoding. Once it runs short it sets bad
// and reads zeros.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32() int32 {
	if b := d.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

// buffer reads a byte buffer or a string: a length (-1 for none), then the
// bytes.
func (d *decoder) buffer() []byte {
	n := d.int32()
	if n == -1 {
		return nil
	}
	return d.take(int(n))
}

// skipOp skips what follows the path of an op inside a multi (as ZooKeeper's
// MultiOperationRecord reads them) and reports whether it could.
func (d *decoder) skipOp(op Op) bool {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		d.buffer() // data
		for n := d.int32(); n > 0 && !d.bad; n-- {
			d.take(4) // ACL: perms, scheme, id
			d.buffer()
			d.buffer()
		}
		d.take(4) // flags
		if op == OpCreateTTL {
			d.take(8)
		}
	case OpDelete, OpCheck:
		d.take(4) // version
	case OpSetData:
		d.buffer()
		d.take(4)
	case OpGetChildren, OpGetData:
		d.take(1) // watch
	default:
		return false
	}
	return !d.bad
}
