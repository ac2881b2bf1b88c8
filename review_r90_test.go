package dsync_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// Review round 90: Weighted.Release and RWMutex.RUnlock ending gone holds
// first (hold.gone), and Value.Watch keeping a watch its loop gave up on.

// r90Panics runs f and returns what it panicked with, or nil.
func r90Panics(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// r90NothingHeld checks that w, at path, holds nothing: no lease node is
// left, and Release(1) panics.
func r90NothingHeld(t *testing.T, obs *zk.Conn, path string, w *dsync.Weighted) {
	t.Helper()
	awaitChildren(t, obs, path+"/leases", 0)
	if v := r90Panics(func() { w.Release(1) }); v == nil {
		t.Error("Release(1) with nothing held did not panic")
	}
}

// TestReviewR90ReleaseMoreThanLost: A acquired 2 leases of a Weighted of 3
// on session 1, which expired; B and C hold one each on session 2. A
// Release(3) ends both lost leases and one live one, not two live ones:
// one lease node is left, and another process gets 2 leases beside it,
// not 3. Then Release(1) ends the last, and one more panics.
func TestReviewR90ReleaseMoreThanLost(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	w := dsync.NewWeighted(s, path, 3)
	o := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	if err := w.Acquire(ctx, 2); err != nil { // A
		t.Fatal(err)
	}
	r89Expire(t, p, s, obs, path+"/leases")
	for range 2 { // B, C
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	awaitChildren(t, obs, path+"/leases", 2)
	w.Release(3)
	awaitChildren(t, obs, path+"/leases", 1)
	if !o.TryAcquire(2) {
		t.Fatal("another process got no 2 leases beside the one live lease left")
	}
	if o.TryAcquire(1) {
		t.Errorf("another process got a third lease beside a live one: leases %v", children(t, obs, path+"/leases"))
		o.Release(1)
	}
	o.Release(2)
	if v := r90Panics(func() { w.Release(1) }); v != nil {
		t.Fatalf("Release(1) of the last lease held panicked: %v", v)
	}
	r90NothingHeld(t, obs, path, w)
}

// TestReviewR90ConcurrentReleasesOverLost: a Weighted of 2; A's lease was
// lost with session 1, B and C hold live ones on session 2. A and B call
// Release(1) at once: between them they end A's lost lease and one live
// one, so C's or B's live node is left, and another process gets exactly
// one lease beside it. Run a few times: which Release takes the lost lease
// varies.
func TestReviewR90ConcurrentReleasesOverLost(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	w := dsync.NewWeighted(s, path, 2)
	o := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	for i := range 2 {
		if err := w.Acquire(ctx, 1); err != nil { // A
			t.Fatal(err)
		}
		r89Expire(t, p, s, obs, path+"/leases")
		for range 2 { // B, C
			if err := w.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		awaitChildren(t, obs, path+"/leases", 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		panics := make(chan any, 2)
		for range 2 {
			wg.Go(func() {
				<-start
				if v := r90Panics(func() { w.Release(1) }); v != nil {
					panics <- v
				}
			})
		}
		close(start)
		wg.Wait()
		close(panics)
		for v := range panics {
			t.Fatalf("run %d: a concurrent Release(1) panicked: %v", i, v)
		}
		awaitChildren(t, obs, path+"/leases", 1)
		if o.TryAcquire(2) {
			t.Errorf("run %d: another process got 2 leases of 2 while C holds a live one", i)
			o.Release(2)
		}
		if !o.TryAcquire(1) {
			t.Fatalf("run %d: another process got no lease beside C's", i)
		}
		o.Release(1)
		w.Release(1) // C
		awaitChildren(t, obs, path+"/leases", 0)
	}
}

// TestReviewR90ReleaseAcquireLossChurn: goroutines of one process acquire
// and release leases of a Weighted of 4 in a loop (1 or 2 at a time) while
// the session expires under them, twice; two of them hold their lease
// across each loss, so that Releases on the next session find lost leases
// beside live ones. Every Release is of as many leases as its goroutine
// acquired, so none may panic; and when all are done nothing is held: no
// node is left, and a Release(1) panics.
func TestReviewR90ReleaseAcquireLossChurn(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	w := dsync.NewWeighted(s, path, 4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycles, fails atomic.Int64
	errs := make(chan error, 8)
	progress := make(chan struct{}, 1)
	// awaitCycles waits for n more acquisitions.
	awaitCycles := func(n int) {
		t.Helper()
		for range n {
			reviewRecv(t, "an acquisition", (<-chan struct{})(progress))
		}
	}
	var phaseMu sync.Mutex
	cur := make(chan struct{})
	phase := func() <-chan struct{} {
		phaseMu.Lock()
		defer phaseMu.Unlock()
		return cur
	}
	next := func() {
		phaseMu.Lock()
		defer phaseMu.Unlock()
		close(cur)
		cur = make(chan struct{})
	}
	for g := range 4 {
		wg.Go(func() {
			for n := int64(1 + g%2); ; {
				select {
				case <-stop:
					return
				default:
				}
				actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				err := w.Acquire(actx, n)
				cancel()
				if err != nil {
					fails.Add(1)
					continue // timed out behind the others, or the loss
				}
				cycles.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
				if g%2 == 0 { // a holder of 1: holds on across the next loss
					select {
					case <-phase():
					case <-stop:
					}
				}
				if v := r90Panics(func() { w.Release(n) }); v != nil {
					errs <- fmt.Errorf("goroutine %d: Release(%d) panicked: %v", g, n, v)
					return
				}
			}
		})
	}
	sub := s.Subscribe()
	defer sub.Stop()
	for range 2 {
		awaitCycles(20)
		p.BlackHole()
		awaitState(t, sub, zkconn.StateLost)
		p.Heal()
		awaitState(t, sub, zkconn.StateConnected)
		next() // the holders release leases lost with the last session
	}
	awaitCycles(20)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d acquisitions, %d given up", cycles.Load(), fails.Load())
	r90NothingHeld(t, obs, path, w)
}

// TestReviewR90RUnlockReenteredLostHold: A's read hold (RLockContext,
// re-entered once) loses its node (an operator deletes it); B reads under
// a live RLock. RUnlock ends A's lost hold's levels first: after two
// RUnlocks B's node is still there and another process's writer cannot
// lock; the third ends B's.
func TestReviewR90RUnlockReenteredLostHold(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path)
	other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	a, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a2, err := rw.RLockContext(a); err != nil || a2 != a {
		t.Fatalf("re-entry = %v, %v; want the hold's context", a2, err)
	}
	aNode := awaitChildren(t, obs, path, 1)[0]
	rw.RLock() // B
	bNode := r45Only(t, obs, path, 2, aNode)
	if err := obs.Delete(path+"/"+aNode, -1); err != nil {
		t.Fatal(err)
	}
	reviewRecv(t, "A's loss", a.Done())
	for i := range 2 {
		rw.RUnlock()
		// (A failed TryLock's node may still be on its way out.)
		if kids := awaitChildren(t, obs, path, 1); kids[0] != bNode {
			t.Fatalf("after RUnlock %d, children %v; want B's %s", i+1, kids, bNode)
		}
		if other.TryLock() {
			t.Fatalf("after RUnlock %d, another process's writer holds while B reads", i+1)
		}
	}
	rw.RUnlock()
	awaitChildren(t, obs, path, 0)
	if !other.TryLock() {
		t.Fatal("no writer holds once every read hold has ended")
	}
	other.Unlock()
	if v := r90Panics(rw.RUnlock); v == nil {
		t.Error("RUnlock with no read hold did not panic")
	}
}

// TestReviewR90RUnlockSuspendedHoldFirst: under LostOnSuspension, C's read
// hold (RLockContext) is lost when the connection drops, though its node
// stays (the session survives); R reads under a later RLock (not watched,
// so not lost). C's RUnlock ends C's hold, whose node still exists, not
// R's newer one: R's node is left, and a writer of another process waits.
// Under LostOnExpiry nothing is lost: the newest, R's, is ended, and C's
// node is left for R.
func TestReviewR90RUnlockSuspendedHoldFirst(t *testing.T) {
	t.Parallel()
	for name, policy := range map[string]dsync.LossPolicy{"LostOnSuspension": dsync.LostOnSuspension, "LostOnExpiry": dsync.LostOnExpiry} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			p, s := r45Proxied(t)
			sub := s.Subscribe()
			defer sub.Stop()
			rw := dsync.NewRWMutex(s, path, dsync.WithLossPolicy(policy))
			other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			c, err := rw.RLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cNode := awaitChildren(t, obs, path, 1)[0]
			rw.RLock() // R, the newest
			rNode := r45Only(t, obs, path, 2, cNode)
			p.Cut()
			awaitState(t, sub, zkconn.StateReconnected)
			if policy == dsync.LostOnSuspension {
				reviewRecv(t, "C's loss", c.Done())
			} else if c.Err() != nil {
				t.Fatalf("C's hold ended under LostOnExpiry: %v", context.Cause(c))
			}
			awaitChildren(t, obs, path, 2) // both nodes are there
			rw.RUnlock()                   // C
			want, left := rNode, "R's"     // C's, lost, goes first
			if policy == dsync.LostOnExpiry {
				want, left = cNode, "C's" // the newest, R's, goes
			}
			if kids := awaitChildren(t, obs, path, 1); kids[0] != want {
				t.Fatalf("C's RUnlock left %v; want %s %s", kids, left, want)
			}
			if other.TryLock() {
				t.Fatal("another process's writer holds while R reads")
			}
			rw.RUnlock() // R
			awaitChildren(t, obs, path, 0)
			if !other.TryLock() {
				t.Fatal("no writer holds once every read hold has ended")
			}
			other.Unlock()
		})
	}
}

// TestReviewR90WatchRepeatedLosses: a Watch loop rides out three session
// losses in a row, the value written while each was partitioned; it yields
// each write on the next session, and afterwards go-zookeeper holds one
// watch on the node for it (none piled up from the lost sessions' loops);
// a Weighted on the same Count acquiring three times adds one, its own,
// and a write fires both (the loop sets one again).
func TestReviewR90WatchRepeatedLosses(t *testing.T) {
	t.Parallel()
	p, s, sub, c, obs, path := r86Short(t)
	a, _, _ := r86Loop(t, c)
	r86Want(t, "A", a, 1, 0)
	for i := range int32(3) {
		p.BlackHole()
		awaitState(t, sub, zkconn.StateLost)
		if _, err := obs.Set(path, []byte{0, 0, 0, byte(2 + i)}, i); err != nil {
			t.Fatal(err)
		}
		p.Heal()
		r86Want(t, fmt.Sprint("A after loss ", i+1), a, 2+i, i+1)
	}
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("go-zookeeper holds %d watches on the node after three losses; want 1", n)
	}
	// The Weighted keeps its own read of the Count: one watch more.
	ctx, _, _ := r45Start(t)
	w := dsync.NewWeightedCount(s, lockPath(t)+"-sem", c)
	for range 3 {
		if err := w.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w.Release(2)
	}
	if n := clientWatches(t, connOf(t, s), path); n != 2 {
		t.Errorf("go-zookeeper holds %d watches on the node with a Weighted's read beside the loop's; want 2", n)
	}
	r86Then(t, obs, path, 9, 3, a)
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("after another write, go-zookeeper holds %d watches on the node; want 1", n)
	}
}

// TestReviewR90RUnlockLostDowngradeFirst: W downgrades its write hold and
// unlocks the write side, keeping the downgrade's read hold (its node
// named after the write node's sequence); B then reads under RLock. The
// downgrade's node is deleted by an operator (its hold context says so).
// W's RUnlock ends that lost hold, not B's: a writer of another process
// cannot lock while B reads, and can once B's RUnlock is done.
func TestReviewR90RUnlockLostDowngradeFirst(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wNode := awaitChildren(t, obs, path, 1)[0]
	d, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	dNode := r45Only(t, obs, path, 2, wNode)
	rw.Unlock()
	awaitChildren(t, obs, path, 1)
	rw.RLock() // B
	bNode := r45Only(t, obs, path, 2, dNode)
	if err := obs.Delete(path+"/"+dNode, -1); err != nil {
		t.Fatal(err)
	}
	reviewRecv(t, "the downgrade's loss", d.Done())
	rw.RUnlock() // W, done
	if kids := awaitChildren(t, obs, path, 1); kids[0] != bNode {
		t.Fatalf("after W's RUnlock, children %v; want B's %s", kids, bNode)
	}
	if other.TryLock() {
		other.Unlock()
		t.Fatal("another process's writer holds while B reads")
	}
	rw.RUnlock() // B
	awaitChildren(t, obs, path, 0)
	if !other.TryLock() {
		t.Fatal("no writer holds once every read hold has ended")
	}
	other.Unlock()
}
