package zkconn

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR69WireStateFlat: a Session that does many lock cycles on
// distinct paths (a protected create with its listing, a Watch on the
// node, an exists watch on a signal that is sent, a guaranteed delete
// with a signal), and reconnects now and then, keeps nothing per path or
// per connection once they are over: wire.exists, writes, pending, taps,
// the Watches set, go-zookeeper's watch table.
func TestReviewR69WireStateFlat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gs := gatedSession(t)
	h := current(t, gs.Session)
	w := h.gen.c.wire
	root := testRoot(t)
	other, nodeO := signalNode(t, ctx)
	kept := keepWatching(t, ctx, h, nodeO)
	state := func() string {
		w.mu.Lock()
		e, wr, p, tp := len(w.exists), len(w.writes), len(w.pending), len(w.taps)
		w.mu.Unlock()
		h.gen.c.watches.mu.Lock()
		ws := len(h.gen.c.watches.m)
		h.gen.c.watches.mu.Unlock()
		return fmt.Sprintf("exists %d, writes %d, pending %d, taps %d, Watches %d, go-zookeeper's under the root %d",
			e, wr, p, tp, ws, zktest.ClientWatches(t, h.Conn(), func(p string) bool { return strings.HasPrefix(p, root) }))
	}
	cycle := func(i int) {
		parent := fmt.Sprintf("%s/job%d", root, i)
		node, _, err := h.CreateProtectedListing(ctx, parent, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, own, err := h.GetW(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		sig := node + ".handoff"
		x := mustExistsW(t, ctx, h, sig)
		if err := other.Signal(ctx, nodeO, sig); err != nil {
			t.Fatal(err)
		}
		if ev := <-x.C; ev.Type != zk.EventNodeCreated {
			t.Fatalf("event %v", ev)
		}
		x.Unwatch()
		<-settledOf(h.Delete(node, node+".next"))
		if ev := <-own.C(); ev.Type != zk.EventNodeDeleted {
			t.Fatalf("own event %v", ev)
		}
	}
	// A first cycle and a reconnect, before the baseline: the maps are
	// made, go-zookeeper's goroutines of a reconnect started.
	cycle(-1)
	gs.reconnect(t, h, kept)
	base := state()
	i := 0
	for _, n := range []int{20, 40} {
		for range n {
			cycle(i)
			i++
		}
		gs.reconnect(t, h, kept)
		if got := state(); got != base {
			t.Errorf("after %d cycles and a reconnect: %s; want as before: %s", i, got, base)
		}
	}
}
