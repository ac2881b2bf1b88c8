package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestWatch: a Watch fires once, on a write or a deletion of its node, to C
// or to the function Notify gave it (at once if it fired before); after
// Stop nothing is delivered; every Watch leaves the session's set once it
// fired or stopped; closing the session fires what is left with
// EventNotWatching.
func TestWatch(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	other := current(t, dial(t, []string{shared.Addr()})).Conn()
	ctx := context.Background()
	root := testRoot(t)
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	keepParent(t, h, root) // the nodes below come and go; the last is made by a plain create
	node := func() string {
		t.Helper()
		p, err := h.CreateProtected(ctx, root, "n-", nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	watch := func(p string) *Watch {
		t.Helper()
		_, _, w, err := h.GetW(ctx, p)
		if err != nil {
			t.Fatalf("GetW(%s) = %v", p, err)
		}
		return w
	}
	// synced returns once every event the server sent h's session before
	// now has been dispatched: events come before the replies that follow.
	synced := func() {
		t.Helper()
		if _, _, err := h.Conn().Exists(root); err != nil {
			t.Fatal(err)
		}
	}
	received := func(w *Watch) (zk.Event, bool) {
		select {
		case ev := <-w.C():
			return ev, true
		default:
			return zk.Event{}, false
		}
	}
	notified := func() (func(zk.Event), <-chan zk.Event) {
		ch := make(chan zk.Event, 2)
		return func(ev zk.Event) { ch <- ev }, ch
	}

	// To C: a write, then (watched again) a deletion; one event each.
	p := node()
	w := watch(p)
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	synced()
	if ev, ok := received(w); !ok || ev.Type != zk.EventNodeDataChanged || ev.Path != p {
		t.Fatalf("after a write: %+v, %v; want EventNodeDataChanged on %s", ev, ok, p)
	}
	w = watch(p)
	if err := other.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	synced()
	if ev, ok := received(w); !ok || ev.Type != zk.EventNodeDeleted {
		t.Fatalf("after a deletion: %+v, %v; want EventNodeDeleted", ev, ok)
	}

	// Notify after the event: f runs at once, on this goroutine.
	p = node()
	w = watch(p)
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	synced()
	f, got := notified()
	w.Notify(f)
	if len(got) != 1 {
		t.Fatalf("Notify after the event made %d calls before it returned; want 1", len(got))
	}
	if ev := <-got; ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("Notify after the event: %v; want EventNodeDataChanged", ev.Type)
	}

	// Notify before the event: f gets it, C does not.
	w = watch(p)
	f, got = notified()
	w.Notify(f)
	if err := other.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	synced()
	if len(got) != 1 {
		t.Fatalf("Notify before the event: %d calls; want 1", len(got))
	}
	if ev := <-got; ev.Type != zk.EventNodeDeleted {
		t.Fatalf("Notify before the event: %v; want EventNodeDeleted", ev.Type)
	}
	if ev, ok := received(w); ok {
		t.Fatalf("C received %v from a notified Watch", ev.Type)
	}

	// Stopped: nothing anywhere.
	p = node()
	w = watch(p)
	f, got = notified()
	w.Notify(f)
	w.Stop()
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	synced()
	if len(got) != 0 {
		t.Fatalf("a stopped Watch called its function: %v", (<-got).Type)
	}

	// A failed GetW leaves no Watch.
	if _, _, w, err := h.GetW(ctx, root+"/none"); err == nil || w != nil {
		t.Fatalf("GetW(no node) = %v, %v; want an error and no Watch", w, err)
	}

	// Two Watches on one node: one event fires both, and the set is empty.
	a, b := watch(p), watch(p)
	if err := other.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	synced()
	for _, w := range []*Watch{a, b} {
		if ev, ok := received(w); !ok || ev.Type != zk.EventNodeDeleted {
			t.Fatalf("one of two Watches: %+v, %v; want EventNodeDeleted", ev, ok)
		}
	}
	if n := watchCount(h); n != 0 {
		t.Fatalf("%d Watches left in the set; want 0", n)
	}

	// Closing the Session ends what is left (on a node that outlives it).
	p, err := other.Create(root+"/persistent-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	w = watch(p)
	s.Close()
	select {
	case ev := <-w.C():
		if ev.Type != zk.EventNotWatching {
			t.Fatalf("on Close: %v; want EventNotWatching", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("on Close: no event within 10s")
	}
}

// watchCount returns how many Watches h's connection holds.
func watchCount(h Handle) int {
	set := &h.gen.c.watches
	set.mu.Lock()
	defer set.mu.Unlock()
	n := 0
	for _, ws := range set.m {
		n += len(ws)
	}
	return n
}

// TestExistsWOut: an ExistsWatch's Out closes once the request has been
// written, without waiting for its reply, which may never come (the
// connection up, the reply lost); it closes at once for a request never
// sent.
func TestExistsWOut(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	h := current(t, dial(t, []string{p.Addr()}))
	path := testRoot(t) + "/signal"

	there, x, err := h.ExistsW(context.Background(), path)
	if err != nil || there || x.C == nil {
		t.Fatalf("ExistsW = %v, %v, %v; want a watch on no node", there, x.C, err)
	}
	<-x.Out
	x.Unwatch()

	f := p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, zktest.Drop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *ExistsWatch, 1)
	go func() {
		_, x, err := h.ExistsW(ctx, path)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ExistsW with its reply lost = %v; want %v", err, context.Canceled)
		}
		done <- x
	}()
	zktest.AwaitStruck(t, f) // written; its reply is gone
	cancel()
	x = <-done
	<-x.Out
	x.Unwatch()

	_, x, err = h.ExistsW(ctx, path) // ctx done: nothing sent
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ExistsW(canceled) = %v; want %v", err, context.Canceled)
	}
	<-x.Out
	x.Unwatch()
}

// TestExistsWatchRecord: the wire records an ExistsW caller until it calls
// Unwatch, and the watch until it fires; it drops a watch from setWatches
// only while it may be set and nobody wants it; it records nothing for a
// request never sent, and keeps nothing once both are over.
func TestExistsWatchRecord(t *testing.T) {
	h := current(t, dial(t, []string{shared.Addr()}))
	ctx := context.Background()
	root := testRoot(t)
	node, err := h.CreateProtected(ctx, root, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := node + ".s"
	w := h.gen.c.wire
	record := func() (rec existsWatches, dropped, ok bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if x := w.exists[sig]; x != nil {
			return *x, !w.carriedLocked(sig, w.dialed.Load()+1), true // on the next connection
		}
		return existsWatches{}, false, false
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, x, err := h.ExistsW(canceled, sig)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ExistsW(canceled) = %v", err)
	}
	x.Unwatch()
	if rec, _, ok := record(); ok {
		t.Fatalf("a request never sent left %+v", rec)
	}

	_, a, err := h.ExistsW(ctx, sig)
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := h.ExistsW(ctx, sig) // a second caller, on the same watch
	if err != nil {
		t.Fatal(err)
	}
	a.Unwatch()
	a.Unwatch() // once only
	if rec, dropped, _ := record(); rec.callers != 1 || rec.out != 0 || !rec.armed || rec.plain || dropped {
		t.Fatalf("one caller left: %+v, dropped %v; want 1 caller, armed, kept", rec, dropped)
	}
	b.Unwatch()
	if rec, dropped, _ := record(); rec.callers != 0 || rec.out != 0 || !rec.armed || rec.plain || !dropped {
		t.Fatalf("no caller left: %+v, dropped %v; want armed, dropped", rec, dropped)
	}
	if err := h.Signal(ctx, node, sig); err != nil {
		t.Fatal(err)
	}
	<-a.C // the event came, after the Session's callback saw it
	if rec, _, ok := record(); ok {
		t.Fatalf("the watch fired and nobody wants it, but the wire keeps %+v", rec)
	}
	<-settledOf(h.Delete(node))
}
