package dsync_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
)

// Review round 91: Weighted.Release partitioning w.held in place, runlock
// looking for a gone read hold only when no hold is named, and RWMutex.Token
// falling back to a MultiLock's read hold.

// TestReviewR91ReleaseGoneLeaseInMiddle: a Weighted of 3. A1 and A2 were
// acquired on session 1, which expired; B on session 2. Release(1) ends one
// lost lease, leaving the other in the middle of what is held once C
// (session 2) is appended after it. The next Release(1) must end that lost
// lease, not C's live one (the newest): B's and C's nodes stay, and another
// process gets exactly one lease beside them.
func TestReviewR91ReleaseGoneLeaseInMiddle(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	w := dsync.NewWeighted(s, path, 3)
	o := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	for range 2 { // A1, A2
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	r89Expire(t, p, s, obs, path+"/leases")
	if err := w.Acquire(ctx, 1); err != nil { // B
		t.Fatal(err)
	}
	awaitChildren(t, obs, path+"/leases", 1)
	w.Release(1)                              // one of A1, A2
	if err := w.Acquire(ctx, 1); err != nil { // C, after the other lost one
		t.Fatal(err)
	}
	live := awaitChildren(t, obs, path+"/leases", 2)
	w.Release(1) // the other lost one
	if o.TryAcquire(2) {
		t.Errorf("another process got 2 leases of 3 beside B's and C's live ones (leases %v, were %v)",
			children(t, obs, path+"/leases"), live)
		o.Release(2)
	}
	if !o.TryAcquire(1) {
		t.Fatalf("another process got no lease beside B's and C's (leases %v)", children(t, obs, path+"/leases"))
	}
	o.Release(1)
	if kids := awaitChildren(t, obs, path+"/leases", 2); kids[0] != live[0] && kids[0] != live[1] {
		t.Fatalf("leases %v; want B's and C's %v", kids, live)
	}
	w.Release(2) // B, C
	r90NothingHeld(t, obs, path, w)
}

// TestReviewR91ReleaseInPlaceRaces: goroutines of one process take and give
// back leases of a Weighted of 6 (Acquire, TryAcquire; Release of 1 to 3)
// while two holders keep leases lost with an expired session in w.held,
// released only midway: Release partitions w.held in place while others
// keep leases into it. Under -race: no race, no panic, nothing left.
func TestReviewR91ReleaseInPlaceRaces(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	w := dsync.NewWeighted(s, path, 6)
	for range 2 { // lost with session 1, released midway
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	r89Expire(t, p, s, obs, path+"/leases")
	var wg sync.WaitGroup
	var cycles atomic.Int64
	errs := make(chan error, 8)
	stop := make(chan struct{})
	progress := make(chan struct{}, 1)
	for g := range 4 {
		wg.Go(func() {
			n := int64(1 + g%3)
			for {
				select {
				case <-stop:
					return
				default:
				}
				var ok bool
				if g%2 == 0 {
					actx, cancel := context.WithTimeout(ctx, time.Second)
					ok = w.Acquire(actx, n) == nil
					cancel()
				} else {
					ok = w.TryAcquire(n)
				}
				if !ok {
					continue
				}
				cycles.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
				if v := r90Panics(func() { w.Release(n) }); v != nil {
					errs <- errors.New("Release panicked: " + v.(string))
					return
				}
			}
		})
	}
	awaitN := func(k int) {
		t.Helper()
		for range k {
			reviewRecv(t, "an acquisition", (<-chan struct{})(progress))
		}
	}
	awaitN(20)
	w.Release(1) // the lost ones, amid the churn
	awaitN(10)
	w.Release(1)
	awaitN(20)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d acquisitions", cycles.Load())
	r90NothingHeld(t, obs, path, w)
}

// TestReviewR91RUnlockLeavesMultiLockReadHold: rw's read side is a member
// of a MultiLock (M) beside plain read holds A (lost: an operator deleted
// its node) and B. RUnlock never ends M, gone or not: the first ends A
// (gone), the second B; M's node stays and ml.Unlock ends it. Meanwhile,
// with only M left, rw.Token is M's czxid. Then the reverse: M's node is
// deleted (M gone) while B reads; RUnlock ends B, not M, and ml.Unlock
// ends M without a panic.
func TestReviewR91RUnlockLeavesMultiLockReadHold(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path)
	other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	ml := dsync.NewMultiLock(rw.RLocker())
	mctx, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mNode := awaitChildren(t, obs, path, 1)[0]
	_, st, err := obs.Get(path + "/" + mNode)
	if err != nil {
		t.Fatal(err)
	}
	if got := rw.Token(); got != st.Czxid {
		t.Errorf("Token with only a MultiLock's read hold = %d; want its czxid %d", got, st.Czxid)
	}
	a, err := rw.RLockContext(ctx) // A
	if err != nil {
		t.Fatal(err)
	}
	aNode := r45Only(t, obs, path, 2, mNode)
	rw.RLock() // B
	bNode := r45Only(t, obs, path, 3, mNode, aNode)
	if err := obs.Delete(path+"/"+aNode, -1); err != nil {
		t.Fatal(err)
	}
	reviewRecv(t, "A's loss", a.Done())
	rw.RUnlock() // ends A, gone
	if kids := awaitChildren(t, obs, path, 2); !(kids[0] == mNode && kids[1] == bNode || kids[0] == bNode && kids[1] == mNode) {
		t.Fatalf("after the first RUnlock, children %v; want M's %s and B's %s", kids, mNode, bNode)
	}
	rw.RUnlock() // B
	if kids := awaitChildren(t, obs, path, 1); kids[0] != mNode {
		t.Fatalf("after the second RUnlock, children %v; want M's %s", kids, mNode)
	}
	if mctx.Err() != nil {
		t.Fatalf("the MultiLock's hold ended: %v", context.Cause(mctx))
	}
	if v := r90Panics(rw.RUnlock); v == nil {
		t.Fatal("RUnlock with only a MultiLock's read hold did not panic")
	}
	if other.TryLock() {
		other.Unlock()
		t.Fatal("another process's writer holds beside the MultiLock's read hold")
	}
	ml.Unlock()
	awaitChildren(t, obs, path, 0)

	// The reverse: the MultiLock's member is the gone one.
	mctx, err = ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mNode = awaitChildren(t, obs, path, 1)[0]
	rw.RLock() // B
	bNode = r45Only(t, obs, path, 2, mNode)
	if err := obs.Delete(path+"/"+mNode, -1); err != nil {
		t.Fatal(err)
	}
	reviewRecv(t, "M's loss", mctx.Done())
	rw.RUnlock() // B
	awaitChildren(t, obs, path, 0)
	if v := r90Panics(ml.Unlock); v != nil {
		t.Fatalf("ml.Unlock after its member was lost panicked: %v", v)
	}
	if v := r90Panics(rw.RUnlock); v == nil {
		t.Error("RUnlock with no read hold did not panic")
	}

	// A named hold is ended, not a gone plain one: M is live, A lost.
	if mctx, err = ml.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	mNode = awaitChildren(t, obs, path, 1)[0]
	if a, err = rw.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	aNode = r45Only(t, obs, path, 2, mNode)
	if err := obs.Delete(path+"/"+aNode, -1); err != nil {
		t.Fatal(err)
	}
	reviewRecv(t, "A's loss", a.Done())
	ml.Unlock() // M, not A
	awaitChildren(t, obs, path, 0)
	if v := r90Panics(rw.RUnlock); v != nil { // A
		t.Fatalf("RUnlock of A's lost hold panicked (ml.Unlock ended it?): %v", v)
	}
	if v := r90Panics(rw.RUnlock); v == nil {
		t.Error("RUnlock with no read hold did not panic")
	}
	if !other.TryLock() {
		t.Fatal("no writer holds once every read hold has ended")
	}
	other.Unlock()
}
