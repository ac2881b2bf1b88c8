package zkconn

import (
	"encoding/binary"
	"io"
	"testing"
	"time"
)

// r102Conn is a chunkConn that takes writes.
type r102Conn struct{ chunkConn }

func (c *r102Conn) Write(b []byte) (int, error) { return len(b), nil }

// r102Tap returns a tap on connection 1 of a new wire whose connection
// gives a connect response granting timeout, then each of frames as one
// read, then io.EOF; the connect is done.
func r102Tap(t *testing.T, timeout time.Duration, frames ...[]byte) (*tap, *wire, handTap) {
	greeting := make([]byte, 36) // protocol version, timeout, session id, password
	binary.BigEndian.PutUint32(greeting[4:8], uint32(timeout.Milliseconds()))
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	c := &r102Conn{chunkConn{chunks: append([][]byte{frameOf(greeting)}, frames...), err: io.EOF}}
	w := newWire(nil)
	tp := &tap{Conn: c, w: w, n: 1}
	h := handTap{t, tp}
	h.connect()
	return tp, w, h
}

// r102Stall ages heard past two thirds of w's timeout (300ms in these
// tests), as a reader stalled that long finds it.
func r102Stall(w *wire) {
	w.heard.Store(int64(time.Since(w.base)) - int64(time.Second))
}

// r102Reply returns the reply (xid 1) of a getData, or of an exists
// answered NoNode.
func r102Reply(exists bool) []byte {
	if exists {
		reply := make([]byte, 16)
		binary.BigEndian.PutUint32(reply[:4], 1)
		binary.BigEndian.PutUint64(reply[4:12], 5)
		noNode := int32(zkNoNode)
		binary.BigEndian.PutUint32(reply[12:16], uint32(noNode))
		return reply
	}
	reply := make([]byte, 16+4+68)
	binary.BigEndian.PutUint32(reply[:4], 1)
	binary.BigEndian.PutUint64(reply[4:12], 5)
	return reply
}

// TestReviewR102NoRecordForARefusedReply: the reply to a getData or an
// exists that sets a watch reaches the tap while heard is fresh; then
// go-zookeeper's reader stalls past two thirds of the timeout, and deafNow
// refuses the reply (or the rest of it). go-zookeeper never handles it:
// its request fails, and it holds no watch. The wire must record none:
// a data watch recorded would stay stale on every later connection (no
// setWatches carries it), keeping the floor in force for the Session's
// life; an exists record armed would outlive its callers, and share would
// report a watch held. The stall falls where a reply's record was made
// too early: after the reply was read with a notification before it, kept
// while go-zookeeper took the notification (round 102); between the
// reply's length and its body, go-zookeeper's two reads of a frame (round
// 104).
func TestReviewR102NoRecordForARefusedReply(t *testing.T) {
	for _, exists := range []bool{false, true} {
		for _, afterLength := range []bool{false, true} {
			name := map[bool]string{false: "getData", true: "exists"}[exists] +
				map[bool]string{false: "/kept-behind-a-notification", true: "/body-after-its-length"}[afterLength]
			t.Run(name, func(t *testing.T) {
				var frames [][]byte
				if afterLength {
					frames = [][]byte{frameOf(r102Reply(exists))}
				} else {
					notif := make([]byte, 16)
					binary.BigEndian.PutUint32(notif[:4], uint32(0xffffffff)) // xid -1
					frames = [][]byte{append(frameOf(notif), frameOf(r102Reply(exists))...)}
				}
				tp, w, h := r102Tap(t, 300*time.Millisecond, frames...)
				if exists {
					w.join("/b")
					w.sending("/b")
					h.write(1, opExists, append(juteString("/b"), 1))
				} else {
					h.write(1, opGetData, append(juteString("/a"), 1))
				}
				var hdr [4]byte
				if !afterLength {
					h.read() // the notification, while heard is fresh
				} else if _, err := io.ReadFull(tp, hdr[:]); err != nil {
					t.Fatal(err) // the reply's length, while heard is fresh
				}
				r102Stall(w)
				var err error
				if afterLength {
					_, err = io.ReadFull(tp, make([]byte, binary.BigEndian.Uint32(hdr[:])))
				} else {
					_, err = io.ReadFull(tp, hdr[:])
				}
				if err == nil {
					t.Fatal("the reply was handed on after the stall")
				}
				if exists {
					r102NoExistsRecord(t, w, "/b")
				} else {
					r102NoDataRecord(t, w, "/a")
				}
			})
		}
	}
}

// r102NoDataRecord fails the test if w records a data watch at path, or
// counts one stale on the next connection.
func r102NoDataRecord(t *testing.T, w *wire, path string) {
	t.Helper()
	w.mu.Lock()
	n, ok := w.carried.on[watchKey{path, dataWatch}]
	w.mu.Unlock()
	if ok {
		t.Errorf("the reply to getData was refused (go-zookeeper never handled it, holds no watch), yet the wire records a data watch at %s held on connection %d", path, n)
	}
	w.connected(2, 5)
	w.mu.Lock()
	stale := w.carried.stale
	w.mu.Unlock()
	if stale != 0 {
		t.Errorf("on the next connection, %d watch(es) stale that go-zookeeper does not hold: the floor stays in force", stale)
	}
}

// r102NoExistsRecord fails the test if, once the exists's caller has given
// up (its request failed), w shares an exists watch at path or keeps its
// record.
func r102NoExistsRecord(t *testing.T, w *wire, path string) {
	t.Helper()
	w.sent(path)
	if n, ok := w.share(watchKey{path, existWatch}); ok {
		t.Errorf("share reports an exists watch at %s held on connection %d; go-zookeeper never handled the reply that would set it", path, n)
	}
	w.leave(path)
	w.mu.Lock()
	x := w.exists[path]
	w.mu.Unlock()
	if x != nil {
		t.Errorf("the exists record of %s outlives its callers: %+v", path, *x)
	}
}

// r106Conn is an r102Conn that counts the reads of it.
type r106Conn struct {
	r102Conn
	reads int
}

func (c *r106Conn) Read(b []byte) (int, error) {
	c.reads++
	return c.r102Conn.Read(b)
}

// TestReviewR106StaleKeptRefusedAtOnce: a read brings two notifications;
// go-zookeeper takes the first, its reader stalls past two thirds of the
// timeout, and its sender writes a ping on waking. The kept notification
// is refused without a read of the connection: a read would wait for the
// deaf timer, which that ping puts off by a third of the timeout, and a
// process stopped under a partition would keep its session, and its holds,
// past the server's expiry (round 106, on round 105's try).
func TestReviewR106StaleKeptRefusedAtOnce(t *testing.T) {
	ev := make([]byte, 16+4+2)
	binary.BigEndian.PutUint32(ev[:4], 0xffffffff) // xid -1
	binary.BigEndian.PutUint32(ev[16:20], 3)       // NodeDataChanged
	ev = append(ev[:20], juteString("/a")...)
	tp, w, h := r102Tap(t, 300*time.Millisecond, append(frameOf(ev), frameOf(ev)...))
	c := &r106Conn{r102Conn: *tp.Conn.(*r102Conn)} // the rest of its chunks
	tp.Conn = c
	h.read() // the first notification
	r102Stall(w)
	h.write(-2, 11, nil) // the ping written on waking
	before := c.reads
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err == nil {
		t.Fatal("the stale kept notification was handed on")
	}
	if c.reads != before {
		t.Errorf("Read read the connection %d time(s) before it refused the stale kept notification; want none", c.reads-before)
	}
}
