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

// TestReview3TryAcquireRefusedOwnDeletesNoSpin: the own deletes TryAcquire
// waits for settle refused (NoAuth) with the nodes still there: it lists
// once more and fails with ErrWouldBlock (a ctx without deadline), without
// listing again and again on the settled deletes (queue.past's bug, pinned
// for TryLock by TestReviewFinalTryLockSpinsOnStaleDeleting). n = 2. (The
// deletes sent again may settle before TryAcquire lists;
// TestTryOwnDeleteRefusedNoSpin makes the interleaving on purpose.)
func TestReview3TryAcquireRefusedOwnDeletesNoSpin(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	p1, p2, s, sub := rwTwoProxies(t)
	w := dsync.NewWeighted(s, path, 2)
	releaseRefused(t, obs, p1, p2, w, leases, 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		ls, err := w.TryAcquireLeases(ctx, 2)
		for _, l := range ls {
			l.Release()
		}
		res <- err
	}()
	awaitChildren(t, obs, leases, 4)
	before := p1.Requests() + p2.Requests()
	liveProxy(t, p1, p2).Cut() // sent again: refused again, settled; the nodes stay
	rlAwait(t, sub, zkconn.StateSuspended)
	select {
	case err := <-res:
		if !errors.Is(err, dsync.ErrWouldBlock) {
			t.Fatalf("TryAcquireLeases = %v once its own deletes settled refused; want ErrWouldBlock", err)
		}
	case <-time.After(4 * time.Second):
		cancel()
		t.Fatalf("TryAcquireLeases still running 4s after its own deletes settled (refused), %d requests; then %v",
			p1.Requests()+p2.Requests()-before, <-res)
	}
	if n := p1.Requests() + p2.Requests() - before; n > 40 {
		t.Fatalf("%d requests after the reconnect: it lists again and again", n)
	}
}

// TestReview3TryAcquireAfterReleaseCut: x/sync's promise: a TryAcquire
// after a Release (returned) of the same semaphore, with room, succeeds.
// Each round one of the two released leases' delete is cut on its way
// (written, not applied: sent again after the reconnect, racing the
// TryAcquire's requests).
func TestReview3TryAcquireAfterReleaseCut(t *testing.T) {
	t.Parallel()
	p1, p2, s, _ := rwTwoProxies(t)
	path := lockPath(t)
	w := dsync.NewWeighted(s, path, 2)
	leaseDelete := zktest.Match{Op: zktest.OpDelete, Path: path + "/leases/", Prefix: true}
	for round := 0; round < 10; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.Acquire(ctx, 2); err != nil {
			t.Fatalf("round %d: Acquire = %v", round, err)
		}
		cancel()
		strikeEach(p1, p2, zktest.Cut, func() { w.Release(2) }, leaseDelete)
		if !w.TryAcquire(2) {
			t.Fatalf("round %d: TryAcquire(2) = false after Release(2) returned", round)
		}
		w.Release(2)
	}
	assertEmpty(t, path)
}

// TestReview3TryAcquireWhileOtherReleases: leases of this session are
// released by other goroutines (deletes cut on the way now and then) while
// TryAcquire(2) of another Weighted on the same session and path lists and
// waits for them. The process never holds more than max at once, and
// nothing is left.
func TestReview3TryAcquireWhileOtherReleases(t *testing.T) {
	t.Parallel()
	p1, p2, s, _ := rwTwoProxies(t)
	path := lockPath(t)
	const max = 2
	w := dsync.NewWeighted(s, path, max)
	other := dsync.NewWeighted(s, path, max)
	var inUse atomic.Int64
	hold := func(n int64) {
		if v := inUse.Add(n); v > max {
			t.Errorf("%d leases held by this process; max %d", v, max)
		}
	}
	leaseDelete := zktest.Match{Op: zktest.OpDelete, Path: path + "/leases/", Prefix: true}
	granted := 0
	for round := 0; round < 20; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := other.Acquire(ctx, 1); err != nil {
			t.Fatalf("round %d: Acquire = %v", round, err)
		}
		cancel()
		hold(1)
		var wg sync.WaitGroup
		wg.Go(func() {
			inUse.Add(-1)
			if round%2 == 0 {
				strikeEach(p1, p2, zktest.Cut, func() { other.Release(1) }, leaseDelete)
			} else {
				other.Release(1)
			}
		})
		if w.TryAcquire(2) {
			granted++
			hold(2)
			inUse.Add(-2)
			w.Release(2)
		}
		wg.Wait()
	}
	t.Logf("TryAcquire(2) granted %d of 20", granted)
	assertEmpty(t, path)
}
