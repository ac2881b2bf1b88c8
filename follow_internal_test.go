package dsync

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestWaiterKeepsNoWatchPerWrite: W waits behind P, itself a waiter (so W
// watches P's handoff signal too), and P's node is written to again and
// again (revocation requests). W follows P again after each write, setting
// a watch on P's signal each time and taking the last one back. Those taken
// back must not stay in W's entry: it kept one zkconn.ExistsWatch per write
// for as long as it waited, memory that grew with every revocation request.
func TestWaiterKeepsNoWatchPerWrite(t *testing.T) {
	t.Parallel()
	const writes = 20
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func() *zkconn.Session {
		s, err := zkconn.Dial(ctx, []string{srv.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	const path = "/dsync-test/watch-per-write"
	obs := zktest.Observer(t, srv.Addr())
	sH, sP, sW := dial(), dial(), dial()
	h := NewMutex(sH, path)
	if _, err := h.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	pDone := make(chan error, 1)
	p := NewMutex(sP, path, Revocable())
	go func() { _, err := p.LockContext(ctx); pDone <- err }()
	zktest.AwaitChildren(t, obs, path, 2)
	type acquired struct {
		e   entry
		err error
	}
	wDone := make(chan acquired, 1)
	go func() {
		var undoing []<-chan struct{}
		e, err := NewMutex(sW, path).q.acquire(ctx, true, false, &undoing)
		wDone <- acquired{e, err}
	}()
	kids := zktest.AwaitChildren(t, obs, path, 3)
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	pNode := path + "/" + kids[1]
	hW, err := sW.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	following := func() {
		t.Helper()
		if err := srv.AwaitWatches(ctx, func(m map[string][]int64) bool { return slices.Contains(m[pNode], hW.ID()) }); err != nil {
			t.Fatalf("W does not follow P: %v", err)
		}
	}
	following()
	for range writes {
		if err := Revoke(ctx, sH, pNode); err != nil {
			t.Fatal(err)
		}
		following() // again, after the write
	}
	h.Unlock()
	if err := <-pDone; err != nil {
		t.Fatalf("P: %v", err)
	}
	p.Unlock()
	w := <-wDone
	if w.err != nil {
		t.Fatalf("W: %v", w.err)
	}
	if n := len(w.e.watches); n != 0 {
		t.Errorf("W holds %d watches on signals once first; want 0 (they all fired or were taken back)", n)
	}
	_, settled := w.e.remove()
	<-settled
	zktest.AwaitChildren(t, obs, path, 0)
}
