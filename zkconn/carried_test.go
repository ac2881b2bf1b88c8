package zkconn

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestCarriedFloorHeldUntilEveryPart: go-zookeeper sends the watches it
// carries to a new connection in parts of 128 KB, each once the one before
// it is answered. On connection 2 the first part is answered and the second
// lost; every node is written, and a later reply (X) moves go-zookeeper's
// last zxid past the write before connection 2 drops. The watches of the
// first part fire on connection 2; those of the second must fire too, on
// connection 3, whose setWatches go-zookeeper makes relative to X's zxid:
// the floor, set at connection 2's connect, stays until the server holds
// every watch (see carried.go). A floor dropped once any part is answered
// would miss them. At the end, with every watch fired, no floor is left.
func TestCarriedFloorHeldUntilEveryPart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	// 600 watches of about 260 bytes each: more than one part.
	const nodes = 600
	paths, watches := watchMany(t, ctx, h, other, root, nodes, 190)

	// Connection 2 takes the first part and loses the second.
	var parts atomic.Int32
	lost := make(chan struct{})
	d.setHook(func(n int, b []byte) int {
		if n != 2 || r70Op(b) != opSetWatches {
			return r70Pass
		}
		if parts.Add(1) == 1 {
			return r70Pass
		}
		close(lost)
		return r70Swallow
	})
	d.conn(1).Conn.Close()
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatalf("connection 2 sent %d setWatches parts; want 2 or more", parts.Load())
	}
	var ops []any
	for _, p := range paths {
		ops = append(ops, &zk.SetDataRequest{Path: p, Data: []byte("written"), Version: -1})
	}
	if _, err := other.Multi(ops...); err != nil {
		t.Fatal(err)
	}
	// X, written after the lost part: its reply is out of turn, and the
	// tap closes connection 2 once go-zookeeper has it.
	if _, _, err := h.Conn().Exists(root); err != nil {
		t.Fatalf("X = %v", err)
	}

	// Connection 3: its setWatches answered, and their events read.
	d.setHook(nil)
	settled(t, ctx, h, root)
	d.mu.Lock()
	got := len(d.conns)
	d.mu.Unlock()
	if got != 3 {
		t.Fatalf("%d connections; want 3", got)
	}
	missed := 0
	for _, w := range watches {
		select {
		case <-w.C():
		default:
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d watches never fired, though every node was written while connection 2 was up without them", missed, nodes)
	}
	w := h.gen.c.wire
	w.mu.Lock()
	c := w.carried
	w.mu.Unlock()
	if c.stale != 0 || len(c.on) != 0 {
		t.Errorf("with every watch fired: %d stale, %d known; want none (no floor in force)", c.stale, len(c.on))
	}
}
