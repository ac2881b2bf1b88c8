package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 36: give-ups in flight among the deletes under way, for the
// nodes R35 left out (a semaphore's lease, a downgrade's read node).

// TestReviewR36WeightedTryAfterLeaseGiveUp: an Acquire's lease create is
// applied, its reply swallowed (Drop), and its ctx ends: the create is given
// up in flight. TryAcquire of the same session right after, on a semaphore
// of 1 with nothing held anywhere, must succeed (x/sync: TryAcquire with
// room succeeds): the given-up lease is among the session's deletes under
// way, so the grant waits for it instead of failing. Several rounds.
func TestReviewR36WeightedTryAfterLeaseGiveUp(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	persistentParents(t, obs, leases)
	persistentParents(t, obs, path+"/locks")
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
	w := dsync.NewWeighted(s, path, 1)
	for round := range 5 {
		f := p.Strike(createOf(leases), zktest.Drop)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- w.Acquire(ctx, 1) }()
		zktest.AwaitStruck(t, f)
		awaitChildren(t, obs, leases, 1) // applied, its reply swallowed
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			f.Disarm()
			t.Fatalf("round %d: Acquire = %v; want context.Canceled", round, err)
		}
		if !w.TryAcquire(1) {
			t.Fatalf("round %d: TryAcquire(1) on a free semaphore right after a lease give-up in flight = false; leases %v",
				round, children(t, obs, leases))
		}
		w.Release(1)
		awaitChildren(t, obs, leases, 0)
		awaitChildren(t, obs, path+"/locks", 0)
	}
}

// TestReviewR36TryLockAfterDowngradeGiveUp: a downgrade's transaction
// (CreateTouching: the read node and a write to the write node) is applied,
// its reply swallowed (Drop), and the downgrade's ctx ends: given up in
// flight. The writer unlocks; TryLock of the same RWMutex right after, with
// nothing held anywhere, must succeed: the given-up read node is among the
// session's deletes under way (0b3c448's CreateTouching give-up).
func TestReviewR36TryLockAfterDowngradeGiveUp(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	persistentParents(t, obs, path)
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
	rw := dsync.NewRWMutex(s, path, dsync.WithLossPolicy(dsync.LostOnExpiry)) // the Drop closes the connection at the next reply
	for round := range 5 {
		held, err := rw.LockContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		f := p.Strike(createOf(path), zktest.Drop) // the downgrade's multi
		ctx, cancel := context.WithCancel(held)
		res := make(chan error, 1)
		go func() { _, err := rw.RLockContext(ctx); res <- err }()
		zktest.AwaitStruck(t, f)
		awaitChildren(t, obs, path, 2) // applied, its reply swallowed
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			f.Disarm()
			t.Fatalf("round %d: downgrade = %v; want context.Canceled", round, err)
		}
		if held.Err() != nil {
			t.Fatalf("round %d: write hold lost: %v", round, context.Cause(held))
		}
		rw.Unlock()
		if !rw.TryLock() {
			t.Fatalf("round %d: TryLock on a free RWMutex right after a downgrade given up in flight = false; children %v",
				round, children(t, obs, path))
		}
		rw.Unlock()
		awaitChildren(t, obs, path, 0)
	}
}
