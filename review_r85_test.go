package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// r85Shutdown runs s.Shutdown(ctx), failing the test if it does not return
// within reviewBound.
func r85Shutdown(t *testing.T, ctx context.Context, s *zkconn.Session) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	return reviewRecv(t, "Shutdown", done)
}

// r85Sessions returns a fresh path, an observer, and two Sessions: a
// through addr (a proxy, or the shared server) with session timeout ta, b
// to the shared server with one no test here reaches.
func r85Sessions(t *testing.T, addr string, ta time.Duration) (path string, obs *zk.Conn, a, b *zkconn.Session) {
	t.Helper()
	path = lockPath(t)
	obs = observer(t, shared.Addr())
	a = dial(t, []string{addr}, zkconn.WithSessionTimeout(ta))
	b = dial(t, []string{shared.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	return path, obs, a, b
}

// TestReviewR85ShutdownEndsHold: Shutdown with a hold not released ends the
// hold: its context is canceled, its node goes at once, another session
// takes the lock, and a late Unlock returns.
func TestReviewR85ShutdownEndsHold(t *testing.T) {
	t.Parallel()
	path, obs, a, b := r85Sessions(t, shared.Addr(), 20*time.Second)
	ma, mb := dsync.NewMutex(a, path), dsync.NewMutex(b, path)
	held, err := ma.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := mb.LockContext(context.Background())
		got <- err
	}()
	awaitChildren(t, obs, path, 2)
	if err := r85Shutdown(t, context.Background(), a); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if held.Err() == nil {
		t.Log("A's hold context not yet canceled when Shutdown returned")
	}
	if err := reviewRecv(t, "B's LockContext", got); err != nil {
		t.Fatalf("B's LockContext = %v", err)
	}
	if held.Err() == nil {
		t.Error("B holds while A's hold context is not canceled")
	}
	reviewRecv(t, "hold context canceled", held.Done())
	t.Logf("A's hold cause: %v", context.Cause(held))
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Errorf("children after B took the lock = %v; want B's only", kids)
	}
	unlocked := make(chan any, 1)
	go func() {
		defer func() { unlocked <- recover() }()
		ma.Unlock()
	}()
	if p := reviewRecv(t, "A's late Unlock", unlocked); p != nil {
		t.Errorf("A's late Unlock, after Shutdown ended the hold, panicked: %v", p)
	}
	mb.Unlock()
}

// TestReviewR85ShutdownWhileWaiting: Shutdown while a LockContext of the
// same Session waits behind another session's hold (its getData watch set):
// the wait ends with an error, the waiter's node goes at once, and the
// holder's release afterwards finds nobody behind it.
func TestReviewR85ShutdownWhileWaiting(t *testing.T) {
	t.Parallel()
	path, obs, a, b := r85Sessions(t, shared.Addr(), 20*time.Second)
	ma, mb := dsync.NewMutex(a, path), dsync.NewMutex(b, path)
	if _, err := ma.LockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := mb.LockContext(context.Background())
		got <- err
	}()
	awaitChildren(t, obs, path, 2)
	if err := r85Shutdown(t, context.Background(), b); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := reviewRecv(t, "B's LockContext", got); err == nil {
		t.Fatal("B's LockContext = nil after Shutdown")
	} else if !errors.Is(err, zkconn.ErrClosed) {
		t.Logf("B's LockContext = %v", err)
	}
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Errorf("children after Shutdown = %v; want A's only", kids)
	}
	ma.Unlock()
}

// TestReviewR85ShutdownAcquirerCreateBlackHoled: Shutdown while a
// LockContext of the same Session has its create black-holed (the
// connection deaf from that request on). Shutdown's round trip queues
// behind it; both go again on the next connection. Afterwards no node of the
// session is left, the acquirer has returned (or its hold is canceled), and
// another session takes the lock at once.
func TestReviewR85ShutdownAcquirerCreateBlackHoled(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, shared.Addr())
	path, obs, a, b := r85Sessions(t, p.Addr(), 6*time.Second) // noticed dead after 4s
	ma, mb := dsync.NewMutex(a, path), dsync.NewMutex(b, path)
	f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/", Prefix: true}, zktest.BlackHole)
	type res struct {
		held context.Context
		err  error
	}
	got := make(chan res, 1)
	go func() {
		held, err := ma.LockContext(context.Background())
		got <- res{held, err}
	}()
	reviewRecv(t, "the create black-holed", f.Struck())
	if err := r85Shutdown(t, context.Background(), a); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	r := reviewRecv(t, "A's LockContext", got)
	if r.err == nil {
		reviewRecv(t, "A's hold canceled after Shutdown", r.held.Done())
	}
	if kids := children(t, obs, path); len(kids) != 0 {
		t.Errorf("children after Shutdown = %v; want none", kids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := mb.LockContext(ctx); err != nil {
		t.Fatalf("B's LockContext after A's Shutdown = %v", err)
	}
	mb.Unlock()
}

// TestReviewR85ShutdownWeightedInternalMutex: Shutdown while a Weighted
// acquirer of the Session holds the internal locks mutex and watches the
// leases (the semaphore full): Acquire ends with an error, and neither its
// lease nor its internal lock node is left.
func TestReviewR85ShutdownWeightedInternalMutex(t *testing.T) {
	t.Parallel()
	path, obs, a, b := r85Sessions(t, shared.Addr(), 20*time.Second)
	wa, wb := dsync.NewWeighted(a, path, 1), dsync.NewWeighted(b, path, 1)
	if err := wa.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- wb.Acquire(context.Background(), 1) }()
	awaitChildren(t, obs, path+"/leases", 2)
	awaitChildren(t, obs, path+"/locks", 1)
	if err := r85Shutdown(t, context.Background(), b); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := reviewRecv(t, "B's Acquire", got); err == nil {
		t.Fatal("B's Acquire = nil after Shutdown")
	}
	if kids := children(t, obs, path+"/leases"); len(kids) != 1 {
		t.Errorf("leases after Shutdown = %v; want A's only", kids)
	}
	if kids := children(t, obs, path+"/locks"); len(kids) != 0 {
		t.Errorf("locks after Shutdown = %v; want none", kids)
	}
	wa.Release(1)
	// A takes it again at once: nobody's internal mutex is left.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := wa.Acquire(ctx, 1); err != nil {
		t.Fatalf("A's Acquire after B's Shutdown = %v", err)
	}
	wa.Release(1)
}

// TestReviewR85ShutdownReleaseBehindBlackHoledSync: Shutdown's round trip
// black-holed (the connection deaf from it on), then a release made while it
// is out (recorded after settle's snapshot): both are swallowed, go again on
// the next connection, and the node is gone once Shutdown returns; another
// session takes the lock at once.
func TestReviewR85ShutdownReleaseBehindBlackHoledSync(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, shared.Addr())
	path, obs, a, b := r85Sessions(t, p.Addr(), 6*time.Second) // noticed dead after 4s
	ma, mb := dsync.NewMutex(a, path), dsync.NewMutex(b, path)
	held, err := ma.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kids := awaitChildren(t, obs, path, 1)
	node := path + "/" + kids[0]
	bh := p.Strike(zktest.Match{Op: zktest.OpSync}, zktest.BlackHole)
	done := make(chan error, 1)
	go func() { done <- a.Shutdown(context.Background()) }()
	reviewRecv(t, "Shutdown's sync black-holed", bh.Struck())
	ma.Unlock()
	reviewRecv(t, "hold context canceled by Unlock", held.Done())
	if err := reviewRecv(t, "Shutdown", done); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if there, _, err := obs.Exists(node); err != nil || there {
		t.Errorf("after Shutdown: %s there = %v, %v; want it gone", node, there, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := mb.LockContext(ctx); err != nil {
		t.Fatalf("B's LockContext after A's Shutdown = %v", err)
	}
	mb.Unlock()
}
