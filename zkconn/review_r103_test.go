package zkconn

import (
	"encoding/binary"
	"io"
	"testing"
	"time"
)

// r103BigReply returns the reply (xid 1) to a getData of a node holding
// size bytes: its body is past two tapReadSize, so the tap reads its tail
// on the large-frame path.
func r103BigReply(size int) []byte {
	reply := make([]byte, 16+4+size+68)
	binary.BigEndian.PutUint32(reply[:4], 1)
	binary.BigEndian.PutUint64(reply[4:12], 5)
	binary.BigEndian.PutUint32(reply[16:20], uint32(size))
	return reply
}

// TestReviewR103LargeReplyArmNeverMade: a getData that sets a watch is
// answered with a large node (10000 bytes). The tap reads the reply's
// tail on the large-frame path, where scan queues its arm (wire.watched)
// with at < given, and returns without making it. go-zookeeper takes the
// whole reply (it now holds the data watch), then asks for the next
// frame's length: since 073cf74 the queued arm is made only after fill
// returns bytes and deafNow passes, so when the connection then ends
// (here EOF; likewise a drop, or deafNow) the arm is never made: the wire
// does not record a watch go-zookeeper holds.
func TestReviewR103LargeReplyArmNeverMade(t *testing.T) {
	tp, w, h := r102Tap(t, 30*time.Second, frameOf(r103BigReply(10000)))
	h.write(1, opGetData, append(juteString("/a"), 1))
	if f := h.read(); len(f) != 16+4+10000+68 {
		t.Fatalf("reply of %d bytes", len(f))
	}
	// go-zookeeper has handled the reply: it holds a data watch at /a.
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err == nil {
		t.Fatal("a frame after the reply")
	}
	w.mu.Lock()
	_, ok := w.carried.on[watchKey{"/a", dataWatch}]
	pending := len(tp.arms)
	w.mu.Unlock()
	if !ok {
		t.Errorf("go-zookeeper read the whole reply to getData (it holds a data watch at /a), yet the wire records none; %d arm(s) left pending on the dead tap", pending)
	}
}

// TestReviewR103LargeReplyArmAfterStall: as above, but the connection
// stays up and go-zookeeper's reader stalls after the reply, past two
// thirds of the timeout: deafNow refuses the next frame, and the arm of
// the reply go-zookeeper already handled is dropped with it.
func TestReviewR103LargeReplyArmAfterStall(t *testing.T) {
	notif := make([]byte, 16)
	binary.BigEndian.PutUint32(notif[:4], uint32(0xffffffff))
	tp, w, h := r102Tap(t, 300*time.Millisecond, frameOf(r103BigReply(10000)), frameOf(notif))
	h.write(1, opGetData, append(juteString("/a"), 1))
	h.read() // go-zookeeper handles it: it holds a data watch at /a
	r102Stall(w)
	var hdr [4]byte
	if _, err := io.ReadFull(tp, hdr[:]); err == nil {
		t.Fatal("the notification was handed on after the stall")
	}
	w.mu.Lock()
	_, ok := w.carried.on[watchKey{"/a", dataWatch}]
	w.mu.Unlock()
	if !ok {
		t.Errorf("go-zookeeper handled the reply to getData (before the stall) and holds a data watch at /a, yet the wire records none")
	}
	// The next connection: go-zookeeper's setWatches carries /a, and its
	// answer (reset) finds no record to set.
	w.connected(2, 5)
	w.reset([]watchKey{{"/a", dataWatch}}, 2)
	if n, ok := w.share(watchKey{"/a", dataWatch}); !ok {
		t.Errorf("after setWatches set /a again on connection 2, share reports it not held (n=%d)", n)
	}
}

// TestReviewR103LargeReplyArmLate: go-zookeeper has read the whole large
// reply (GetW returns with its watch next), and the connection stays up
// and quiet; the wire recorded no data watch at /a until the server sent
// something more (up to a third of the timeout: the next ping's reply).
// The record is made before Read hands on the reply's last bytes.
func TestReviewR103LargeReplyArmLate(t *testing.T) {
	_, w, h := r102Tap(t, 30*time.Second, frameOf(r103BigReply(10000)))
	h.write(1, opGetData, append(juteString("/a"), 1))
	h.read()
	if _, ok := w.share(watchKey{"/a", dataWatch}); !ok {
		t.Errorf("go-zookeeper read the whole reply to getData (it holds a data watch at /a next); the wire records none")
	}
}
