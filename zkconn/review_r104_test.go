package zkconn

import (
	"encoding/binary"
	"io"
	"slices"
	"testing"
)

// TestReviewR104ArmMadeOnLengthThenBodyRefused: go-zookeeper reads a
// frame in two Reads, its 4-byte length and then its body. The tap makes
// the reply's pending record (wire.watched) on the length Read, which
// deafNow lets through while heard is fresh; the reader then stalls past
// two thirds of the timeout, and deafNow refuses the body. go-zookeeper
// never handles the reply (its request fails, no watcher), yet the wire
// records a data watch held on connection 1.
func TestReviewR104ArmMadeOnLengthThenBodyRefused(t *testing.T) {
	greeting := make([]byte, 36)
	binary.BigEndian.PutUint32(greeting[4:8], 300) // ms
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	reply := make([]byte, 16+4+68)
	binary.BigEndian.PutUint32(reply[:4], 1)
	binary.BigEndian.PutUint64(reply[4:12], 5)
	c := &r102Conn{chunkConn{chunks: [][]byte{frameOf(greeting), frameOf(reply)}, err: io.EOF}}
	w := newWire(nil)
	tp := &tap{Conn: c, w: w, n: 1}
	h := handTap{t, tp}
	h.connect()
	h.write(1, opGetData, append(juteString("/a"), 1))
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err != nil {
		t.Fatal(err) // heard fresh: the length goes on
	}
	r102Stall(w)
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(tp, body); err == nil {
		t.Fatal("the reply's body was handed on after the stall")
	}
	w.mu.Lock()
	n, ok := w.carried.on[watchKey{"/a", dataWatch}]
	w.mu.Unlock()
	if ok {
		t.Errorf("the body of the reply to getData was refused (go-zookeeper never handled it, holds no watch), yet the wire records a data watch at /a held on connection %d", n)
	}
	w.connected(2, 5)
	w.mu.Lock()
	stale := w.carried.stale
	w.mu.Unlock()
	if stale != 0 {
		t.Errorf("on the next connection, %d watch(es) stale that go-zookeeper does not hold", stale)
	}
}

// TestReviewR104ExistsArmOnLengthThenBodyRefused: as above, for an exists
// answered NoNode.
func TestReviewR104ExistsArmOnLengthThenBodyRefused(t *testing.T) {
	greeting := make([]byte, 36)
	binary.BigEndian.PutUint32(greeting[4:8], 300) // ms
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	reply := make([]byte, 16)
	binary.BigEndian.PutUint32(reply[:4], 1)
	binary.BigEndian.PutUint64(reply[4:12], 5)
	noNode := int32(zkNoNode)
	binary.BigEndian.PutUint32(reply[12:16], uint32(noNode))
	c := &r102Conn{chunkConn{chunks: [][]byte{frameOf(greeting), slices.Clone(frameOf(reply))}, err: io.EOF}}
	w := newWire(nil)
	tp := &tap{Conn: c, w: w, n: 1}
	h := handTap{t, tp}
	h.connect()
	w.join("/b")
	w.sending("/b")
	h.write(1, opExists, append(juteString("/b"), 1))
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err != nil {
		t.Fatal(err)
	}
	r102Stall(w)
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(tp, body); err == nil {
		t.Fatal("the reply's body was handed on after the stall")
	}
	w.sent("/b")
	if n, ok := w.share(watchKey{"/b", existWatch}); ok {
		t.Errorf("share reports an exists watch at /b held on connection %d; go-zookeeper never handled the reply that would set it", n)
	}
	w.leave("/b")
	w.mu.Lock()
	x := w.exists["/b"]
	w.mu.Unlock()
	if x != nil {
		t.Errorf("the exists record of /b outlives its callers: %+v", *x)
	}
}
