package dsync_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r2Disconnected returns a Weighted (max) on a Session through a proxy, an
// outside holder of all its leases, and puts a canceled Acquire's internal
// lock delete (and lease delete) under way while the connection is down
// (proxy black-holed and cut): the gate's token is then a `sent` that cannot
// close until the connection comes back or the session ends.
func r2Disconnected(t *testing.T, timeout time.Duration) (*zktest.Proxy, *zkconn.Session, *zkconn.Subscription, *dsync.Weighted, *dsync.Weighted, string) {
	t.Helper()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := heldWeighted(t, path)
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(timeout))
	sub := s.Subscribe()
	t.Cleanup(sub.Stop)
	rlAwait(t, sub, zkconn.StateConnected)
	w := dsync.NewWeighted(s, path, 1)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/leases", 2)
	p.BlackHole()
	p.Cut()
	rlAwait(t, sub, zkconn.StateSuspended)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v; want context.Canceled", err)
	}
	return p, s, sub, w, holder, path
}

// TestReview2NextAcquireBoundedWhileDeleteUnsent: the gate's token is the
// unsent internal lock delete (the connection is down). The next Acquire
// waits for it only until its ctx is done, and returns ctx.Err() on time;
// after the reconnect everything goes through and nothing stays.
func TestReview2NextAcquireBoundedWhileDeleteUnsent(t *testing.T) {
	p, _, sub, w, holder, path := r2Disconnected(t, 10*time.Second)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := w.Acquire(ctx, 1)
		over := time.Since(deadlineOf(ctx))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire while disconnected = %v; want DeadlineExceeded", err)
		}
		if over > slack {
			t.Errorf("Acquire returned %v after its deadline", over)
		}
	}
	p.Heal()
	rlAwait(t, sub, zkconn.StateReconnected)
	holder.Release(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Acquire(ctx, 1); err != nil {
		t.Fatalf("Acquire after the reconnect = %v", err)
	}
	if w.TryAcquire(1) {
		t.Fatal("TryAcquire(1) succeeded on a full semaphore")
	}
	w.Release(1)
	assertEmpty(t, path)
}

func deadlineOf(ctx context.Context) time.Time { d, _ := ctx.Deadline(); return d }

// TestReview2CloseWhileDeletePending: Session.Close while the internal lock
// delete (the gate's token) is unsent and another Acquire waits for it
// without a deadline: Close ends the delete, sent closes, and that Acquire
// returns ErrClosed promptly (no goroutine left: goleak in TestMain).
func TestReview2CloseWhileDeletePending(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own; its 5 s bounds are for calls that return in under a millisecond
	_, s, _, w, holder, path := r2Disconnected(t, 4*time.Second)
	res := make(chan error, 1)
	go func() { res <- w.Acquire(context.Background(), 1) }()
	select {
	case err := <-res:
		t.Fatalf("Acquire returned %v while the token's delete was unsent", err)
	default: // it waits at the gate, or is on its way there
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case err := <-res:
		if !errors.Is(err, zkconn.ErrClosed) {
			t.Errorf("Acquire after Close = %v; want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire waiting at the gate did not return after Session.Close")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Session.Close did not return with a delete pending")
	}
	if w.TryAcquire(1) {
		t.Fatal("TryAcquire on a closed session succeeded")
	}
	holder.Release(1)
	assertEmpty(t, path)
}

// TestReview2TryWhileDeleteUnsent: TryAcquire right after the canceled
// Acquire, while the connection is down: it waits for the gate's token at
// most the session timeout (its documented bound), then reports false, and
// the semaphore is usable once the connection returns.
func TestReview2TryWhileDeleteUnsent(t *testing.T) {
	p, _, sub, w, holder, path := r2Disconnected(t, 4*time.Second)
	start := time.Now()
	if w.TryAcquire(1) {
		t.Fatal("TryAcquire succeeded on a full semaphore while disconnected")
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("TryAcquire took %v", took)
	}
	p.Heal()
	rlAwait(t, sub, zkconn.StateConnected) // reconnected or a new session
	holder.Release(1)
	if !w.TryAcquire(1) {
		// the holder's release may not be in yet: Acquire then.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	w.Release(1)
	assertEmpty(t, path)
}

// TestReview2ExpiryBetweenCreateAndResentDelete: the internal lock delete is
// written and cut (sent closed), the connection stays down until the
// session expires, and the next Acquire (n = 2 of 3), which waited through
// the expiry, runs on the new session: it succeeds, and the old session's
// lock node and lease are gone with it.
func TestReview2ExpiryBetweenCreateAndResentDelete(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(4*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)
	old := sessionID(t, s)
	w := dsync.NewWeighted(s, path, 3)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/locks/", Prefix: true}, zktest.Cut)
	if err := w.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	p.BlackHole() // go-zookeeper waits a second before dialing its only server again
	rlAwait(t, sub, zkconn.StateSuspended)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 2) }()
	awaitChildren(t, obs, path+"/locks", 0) // expired: the server removed the old nodes
	awaitChildren(t, obs, path+"/leases", 0)
	p.Heal()
	if err := <-res; err != nil {
		t.Fatalf("Acquire across expiry = %v", err)
	}
	if sessionID(t, s) == old {
		t.Fatal("same session")
	}
	if got := children(t, obs, path+"/leases"); len(got) != 2 {
		t.Fatalf("leases = %v; want the 2 of the new session", got)
	}
	// Acquire sends its internal lock's delete without waiting for it: the
	// node goes soon after, and an orphan fails the wait.
	awaitChildren(t, obs, path+"/locks", 0)
	w.Release(3) // the old lease's release is a no-op
	assertEmpty(t, path)
}

// TestReview2TryRightAfterAcquire: x/sync's TryAcquire right after an
// Acquire with room left always succeeds. Here the internal lock delete of
// the Acquire is not waited for at all: the TryAcquire's create must come
// after it. Directly and through a delaying proxy (the delete's reply still
// out when TryAcquire's create goes), n = 1 and 2.
func TestReview2TryRightAfterAcquire(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, shared.Addr())
	p.SetDelay(3 * time.Millisecond)
	for _, addr := range []string{shared.Addr(), p.Addr()} {
		path := lockPath(t) + "-" + map[bool]string{true: "direct", false: "delayed"}[addr == shared.Addr()]
		w := dsync.NewWeighted(dial(t, []string{addr}), path, 4)
		for i := 0; i < 25; i++ {
			n := int64(1 + i%2)
			if err := w.Acquire(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			if !w.TryAcquire(n) {
				t.Fatalf("%s round %d: TryAcquire(%d) right after Acquire(%d) of 4 = false", addr, i, n, n)
			}
			ls, err := w.TryAcquireLeases(context.Background(), 4-2*n)
			if 4-2*n > 0 && err != nil {
				t.Fatalf("TryAcquireLeases(%d) = %v", 4-2*n, err)
			}
			for _, l := range ls {
				l.Release()
			}
			w.Release(2 * n)
		}
		assertEmpty(t, path)
	}
}

// TestReview2CountBoundConcurrent: NewWeightedCount, n in {1, 2}, two
// Weighted on one session and one on another, Acquire and TryAcquire in
// loops with the count lowered and raised: never more than the count at
// its highest in use, nothing left behind.
func TestReview2CountBoundConcurrent(t *testing.T) {
	path := lockPath(t)
	maxPath := path + "-max"
	s1 := dial(t, []string{shared.Addr()})
	s2 := dial(t, []string{shared.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dsync.NewCount(s1, maxPath, 3)
	if err := c.Set(ctx, 3); err != nil {
		t.Fatal(err)
	}
	ws := []*dsync.Weighted{
		dsync.NewWeightedCount(s1, path, dsync.NewCount(s1, maxPath, 3)),
		dsync.NewWeightedCount(s1, path, dsync.NewCount(s1, maxPath, 3)),
		dsync.NewWeightedCount(s2, path, dsync.NewCount(s2, maxPath, 3)),
	}
	var in atomic.Int64
	var wg sync.WaitGroup
	for i, w := range ws {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 12; k++ {
					n := int64(1 + (i+g+k)%2)
					if (i+g+k)%3 == 0 {
						if !w.TryAcquire(n) {
							continue
						}
					} else if err := w.Acquire(ctx, n); err != nil {
						t.Error(err)
						return
					}
					if v := in.Add(n); v > 3 {
						t.Errorf("%d leases in use of a count of 3", v)
					}
					in.Add(-n)
					w.Release(n)
				}
			}()
		}
	}
	wg.Wait()
	assertEmpty(t, path)
}
