package dsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// followLine is a Mutex's queue on a server of the test's own: H holds, P
// (revocable) waits behind it, and W is to wait third, through proxy p, so
// that it follows P and watches P's handoff signal (sig).
type followLine struct {
	srv       *zktest.Server
	obs       *zk.Conn
	p         *zktest.Proxy
	h, pm     *Mutex
	sH, sW    *zkconn.Session
	hW        zkconn.Handle // W's session's handle
	pDone     chan error
	path, sig string
}

func newFollowLine(t *testing.T, ctx context.Context, path string) *followLine {
	l := &followLine{srv: zktest.Start(t), path: path, pDone: make(chan error, 1)}
	l.obs, l.p = zktest.Observer(t, l.srv.Addr()), zktest.NewProxy(t, l.srv.Addr())
	dial := func(addr string) *zkconn.Session {
		s, err := zkconn.Dial(ctx, []string{addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	l.sH, l.sW = dial(l.srv.Addr()), dial(l.p.Addr())
	l.h, l.pm = NewMutex(l.sH, path), NewMutex(dial(l.srv.Addr()), path, Revocable())
	if _, err := l.h.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := l.pm.LockContext(ctx); l.pDone <- err }()
	zktest.AwaitChildren(t, l.obs, path, 2)
	var err error
	if l.hW, err = l.sW.Current(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// pNode returns P's node (and sets sig), once W's is in line too.
func (l *followLine) pNode(t *testing.T) string {
	kids := zktest.AwaitChildren(t, l.obs, l.path, 3)
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	l.sig = l.path + "/" + kids[1] + handoffSuffix
	return l.path + "/" + kids[1]
}

// awaitWatch blocks until W's session watches path.
func (l *followLine) awaitWatch(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	if err := l.srv.AwaitWatches(ctx, func(m map[string][]int64) bool { return slices.Contains(m[path], l.hW.ID()) }); err != nil {
		t.Fatalf("W does not watch %s: %v", path, err)
	}
}

// release ends H's hold, then P's, once P holds.
func (l *followLine) release(t *testing.T) {
	l.h.Unlock()
	if err := <-l.pDone; err != nil {
		t.Fatalf("P: %v", err)
	}
	l.pm.Unlock()
}

// TestWaiterKeepsNoWatchPerWrite: W waits behind P, itself a waiter (so W
// watches P's handoff signal too), and P's node is written to again and
// again (revocation requests). W follows P again after each write, setting
// a watch on P's signal each time and taking the last one back. Those taken
// back must not stay in W's entry: it kept two zkconn.ExistsWatch per write
// for as long as it waited, memory that grew with every revocation request.
func TestWaiterKeepsNoWatchPerWrite(t *testing.T) {
	t.Parallel()
	const writes = 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newFollowLine(t, ctx, "/dsync-test/watch-per-write")
	type acquired struct {
		e   entry
		err error
	}
	wDone := make(chan acquired, 1)
	go func() {
		var undoing []<-chan struct{}
		e, err := NewMutex(l.sW, l.path).q.acquire(ctx, true, false, &undoing)
		wDone <- acquired{e, err}
	}()
	pNode := l.pNode(t)
	l.awaitWatch(t, ctx, pNode)
	for range writes {
		if err := Revoke(ctx, l.sH, pNode); err != nil {
			t.Fatal(err)
		}
		l.awaitWatch(t, ctx, pNode) // W follows P again, after the write
	}
	l.release(t)
	w := <-wDone
	if w.err != nil {
		t.Fatalf("W: %v", w.err)
	}
	if n := len(w.e.watches); n != 0 {
		t.Errorf("W holds %d watches on signals once first; want 0 (they all fired or were taken back)", n)
	}
	_, settled := w.e.remove()
	<-settled
	zktest.AwaitChildren(t, l.obs, l.path, 0)
}

// TestReviewR68EntryWatchesUnderFaults: as TestWaiterKeepsNoWatchPerWrite,
// with W's exists on P's signal, as it follows P again after each write,
// cut, lost, dropped (each sent again by Do on the next connection) or
// passed in turn. W's entry keeps at most the one watch still wanted. Then
// W's ctx ends at a dropped exists: the entry returned keeps at most one
// watch, and its remove leaves no watch of W's session on the server.
func TestReviewR68EntryWatchesUnderFaults(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newFollowLine(t, ctx, "/dsync-test/r68-entry-watches")
	type joined struct {
		e   entry
		err error
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wDone := make(chan joined, 1)
	go func() {
		e, err := NewMutex(l.sW, l.path).q.join(wctx, l.hW, true, false)
		wDone <- joined{e, err}
	}()
	pNode := l.pNode(t)
	l.awaitWatch(t, ctx, l.sig)
	for i, a := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop, zktest.Pass, zktest.Cut} {
		m1 := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.sig}, zktest.Pass)
		e1 := l.p.Strike(zktest.Match{Op: zktest.OpExists, Path: l.sig}, a)
		m2 := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.sig}, zktest.Pass)
		if err := Revoke(ctx, l.sH, pNode); err != nil {
			t.Fatal(err)
		}
		for j, f := range []*zktest.Fault{m1, e1, m2} {
			select {
			case <-f.Struck():
			case <-ctx.Done():
				t.Fatalf("write %d: fault %d never struck", i, j)
			}
		}
		l.awaitWatch(t, ctx, l.sig)
	}
	// Once more, and W gives up with its last exists dropped.
	f1 := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.sig}, zktest.Pass)
	f2 := l.p.Strike(zktest.Match{Op: zktest.OpExists, Path: l.sig}, zktest.Drop)
	if err := Revoke(ctx, l.sH, pNode); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f1)
	zktest.AwaitStruck(t, f2)
	wcancel()
	w := <-wDone
	if !errors.Is(w.err, context.Canceled) {
		t.Fatalf("W: %v; want context.Canceled", w.err)
	}
	if len(w.e.watches) > 1 || slices.Contains(w.e.watches, nil) {
		t.Errorf("W's entry holds %d watches (a nil among them: %v); want at most 1", len(w.e.watches), slices.Contains(w.e.watches, nil))
	}
	_, settled := w.e.remove()
	<-settled
	zktest.AwaitChildren(t, l.obs, l.path, 2)
	l.release(t)
	zktest.AwaitChildren(t, l.obs, l.path, 0)
	m, err := l.srv.Watches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for wp, ids := range m {
		if strings.HasPrefix(wp, l.path) && slices.Contains(ids, l.hW.ID()) {
			t.Errorf("W's session still watches %s", wp)
		}
	}
}
