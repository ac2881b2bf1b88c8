package zkconn

import (
	"encoding/binary"
	"io"
	"testing"
	"time"
)

// TestReviewR105KeptThoughFreshReplyWaits: a read brings two notifications
// (or the first alone, the second coming with what follows); go-zookeeper
// takes the first, then its reader stalls (an event callback, say) past
// two thirds of the timeout while the session stays healthy: its sender
// pings, and the reply waits on the connection. Kept from the first read,
// the second notification was refused without a look at what waits, and
// a healthy connection closed, where read with the ping's reply it went
// on: the tap takes in what waits before it judges kept bytes.
func TestReviewR105KeptThoughFreshReplyWaits(t *testing.T) {
	ev := make([]byte, 16+4+2)
	binary.BigEndian.PutUint32(ev[:4], 0xffffffff) // xid -1
	binary.BigEndian.PutUint32(ev[16:20], 3)       // NodeDataChanged
	ev = append(ev[:20], juteString("/a")...)
	ping := make([]byte, 16)
	binary.BigEndian.PutUint32(ping[:4], 0xfffffffe) // xid -2
	for name, chunks := range map[string][][]byte{
		"kept":          {append(frameOf(ev), frameOf(ev)...), frameOf(ping)},
		"with-the-ping": {frameOf(ev), append(frameOf(ev), frameOf(ping)...)},
	} {
		t.Run(name, func(t *testing.T) {
			tp, w, h := r102Tap(t, 300*time.Millisecond, chunks...)
			h.read() // the first notification
			r102Stall(w)
			h.write(-2, 11, nil) // the ping go-zookeeper's sender writes meanwhile
			var hdr [4]byte
			if _, err := io.ReadFull(tp, hdr[:]); err != nil {
				t.Errorf("the second notification was refused (%v), though the reply to a ping written just now waits on the connection: a healthy session's connection closed", err)
			}
		})
	}
}
