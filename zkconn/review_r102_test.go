package zkconn

import (
	"encoding/binary"
	"io"
	"slices"
	"testing"
	"time"
)

// r102Conn is a chunkConn that takes writes.
type r102Conn struct{ chunkConn }

func (c *r102Conn) Write(b []byte) (int, error) { return len(b), nil }

// r102Stall ages heard past two thirds of w's timeout, as a reader stalled
// that long finds it.
func r102Stall(w *wire) {
	w.heard.Store(int64(time.Since(w.base)) - int64(time.Second)) // timeout: 300ms
}

// TestReviewR102ArmMadeForARefusedReply: a read brings a notification and
// the reply to a getData that sets a watch; go-zookeeper takes the
// notification, then its reader stalls past two thirds of the timeout.
// On the next Read, the tap makes the reply's pending arm (wire.watched:
// "go-zookeeper holds this watch") before deafNow refuses the reply. So
// go-zookeeper never reads the reply (its request fails, no watcher is
// added), yet the wire records a data watch go-zookeeper holds: a phantom
// that stays stale on every later connection (no setWatches carries it),
// keeping the floor in force for the Session's life. (Before dc63b2f the
// kept reply was handed on, stale.)
func TestReviewR102ArmMadeForARefusedReply(t *testing.T) {
	greeting := make([]byte, 36)
	binary.BigEndian.PutUint32(greeting[4:8], 300) // ms
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	notif := make([]byte, 16)
	binary.BigEndian.PutUint32(notif[:4], uint32(0xffffffff)) // xid -1
	reply := make([]byte, 16+4+68)
	binary.BigEndian.PutUint32(reply[:4], 1)
	binary.BigEndian.PutUint64(reply[4:12], 5)
	c := &r102Conn{chunkConn{chunks: [][]byte{frameOf(greeting), slices.Concat(frameOf(notif), frameOf(reply))}, err: io.EOF}}
	w := newWire(nil)
	tp := &tap{Conn: c, w: w, n: 1}
	h := handTap{t, tp}
	h.connect()
	h.write(1, opGetData, append(juteString("/a"), 1))
	h.read() // the notification, while heard is fresh
	r102Stall(w)
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err == nil {
		t.Fatal("the reply was handed on after the stall")
	}
	w.mu.Lock()
	n, ok := w.carried.on[watchKey{"/a", dataWatch}]
	w.mu.Unlock()
	if ok {
		t.Errorf("the reply to getData was refused (go-zookeeper never read it, holds no watch), yet the wire records a data watch at /a held on connection %d", n)
	}
	// The next connection: the phantom is stale, and no setWatches of
	// go-zookeeper's (which holds nothing) will carry it.
	w.connected(2, 5)
	w.mu.Lock()
	stale := w.carried.stale
	w.mu.Unlock()
	if stale != 0 {
		t.Errorf("on the next connection, %d watch(es) stale that go-zookeeper does not hold: the floor stays in force", stale)
	}
}

// TestReviewR102ExistsArmForARefusedReply: as above, for an exists that
// sets a watch and is answered NoNode: the tap arms the exists record (go-
// zookeeper holds an exists watch at /b, absent on connection 1) before it
// refuses the reply. go-zookeeper holds no watch; share reports one held on
// the current connection, and the record outlives its callers (armed).
func TestReviewR102ExistsArmForARefusedReply(t *testing.T) {
	greeting := make([]byte, 36)
	binary.BigEndian.PutUint32(greeting[4:8], 300) // ms
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	notif := make([]byte, 16)
	binary.BigEndian.PutUint32(notif[:4], uint32(0xffffffff))
	reply := make([]byte, 16)
	binary.BigEndian.PutUint32(reply[:4], 1)
	binary.BigEndian.PutUint64(reply[4:12], 5)
	noNode := int32(zkNoNode)
	binary.BigEndian.PutUint32(reply[12:16], uint32(noNode))
	c := &r102Conn{chunkConn{chunks: [][]byte{frameOf(greeting), slices.Concat(frameOf(notif), frameOf(reply))}, err: io.EOF}}
	w := newWire(nil)
	tp := &tap{Conn: c, w: w, n: 1}
	h := handTap{t, tp}
	h.connect()
	w.join("/b")
	w.sending("/b")
	h.write(1, opExists, append(juteString("/b"), 1))
	h.read()
	r102Stall(w)
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err == nil {
		t.Fatal("the reply was handed on after the stall")
	}
	// ExistsW's request failed (connection closed); its caller gives up.
	w.sent("/b")
	if n, ok := w.share(watchKey{"/b", existWatch}); ok {
		t.Errorf("share reports an exists watch at /b held on connection %d; go-zookeeper never read the reply that would set it", n)
	}
	w.leave("/b")
	w.mu.Lock()
	x := w.exists["/b"]
	w.mu.Unlock()
	if x != nil {
		t.Errorf("the exists record of /b outlives its callers: %+v", *x)
	}
}
