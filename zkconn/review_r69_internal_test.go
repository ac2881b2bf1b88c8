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

// TestGetWSharesWatch: Watches at one path share go-zookeeper's getData
// watch there while its event has not come, and fire together on it; once
// it has come, the next GetW sets a watch again. Across a reconnect the
// shared watch is the one go-zookeeper's setWatches carries: a Watch added
// on the next connection (read without a watch) fires on the next write,
// and one added before the connection dropped fires on a write made while
// it was down.
func TestGetWSharesWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gs := gatedSession(t)
	h := current(t, gs.Session)
	other := current(t, dial(t, []string{shared.Addr()})).Conn()
	root := testRoot(t)
	plainRoot(t, other, root, nil)
	kept := keepWatching(t, ctx, h, root)
	node := root + "/n"
	if _, err := other.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	watch := func() *Watch {
		t.Helper()
		_, _, w, err := h.GetW(ctx, node)
		if err != nil {
			t.Fatalf("GetW(%s) = %v", node, err)
		}
		return w
	}
	held := func(want int) {
		t.Helper()
		if n := zktest.ClientWatches(t, h.Conn(), func(p string) bool { return p == node }); n != want {
			t.Fatalf("go-zookeeper holds %d getData watches on %s; want %d", n, node, want)
		}
	}
	write := func(ws ...*Watch) {
		t.Helper()
		if _, err := other.Set(node, nil, -1); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if ev := <-w.C(); ev.Type != zk.EventNodeDataChanged {
				t.Fatalf("event %v; want the write", ev)
			}
		}
	}

	w1, w2 := watch(), watch()
	w3 := watch()
	w3.Stop() // a waiter that gave up
	held(1)
	write(w1, w2)
	held(0)
	w4 := watch() // set again
	held(1)
	gs.reconnect(t, h, kept)
	awaitSetWatchesSent(t) // go-zookeeper has read its reply: the server holds w4's watch here
	w5 := watch()          // shares w4's, which setWatches carried
	held(1)
	write(w4, w5)
	w6 := watch()
	gs.last().Conn.Close()
	if _, err := other.Set(node, nil, -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-w6.C(); ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("event %v; want the write made while the connection was down", ev)
	}
	w7 := watch()
	held(1)
	write(w7)
}
