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

// Review round 39: catchUp, Weighted's first listing behind its first lease
// create, and Once.Reset's one delete per record.

// r39Wait waits for ch within the bound, failing with what otherwise.
func r39Wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(reviewBound):
		t.Fatalf("%s: not within %v", what, reviewBound)
	}
}

// TestReviewR39WeightedListingPipelined pins that grant's first listing goes
// out behind the first lease create on the same connection, without waiting
// for the create's reply (create and listing: one round trip). Both replies
// are swallowed (Drop): the listing must reach the server while the first
// connection is still up (the tap closes it only at the next ping's reply,
// a third of the 30s session timeout later).
func TestReviewR39WeightedListingPipelined(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	leases := path + "/leases"
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(30*time.Second)), path, 2)
	if err := w.Acquire(ctx, 1); err != nil { // parents
		t.Fatal(err)
	}
	w.Release(1)
	assertEmpty(t, path)

	created := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, zktest.Drop)
	listed := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: leases}, zktest.Drop)
	defer created.Disarm()
	defer listed.Disarm()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	r39Wait(t, created.Struck(), "the first lease create")
	select {
	case <-listed.Struck():
	case <-time.After(5 * time.Second):
		t.Fatal("no listing of the leases went out behind the first lease create within 5s: it waits for the create's reply")
	}
	p.Cut() // both replies are lost: the create is recovered, the leases listed again
	if err := reviewRecv(t, "Acquire", res); err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	obs := observer(t, shared.Addr())
	if got := children(t, obs, leases); len(got) != 1 {
		t.Fatalf("leases = %v; want one", got)
	}
	w.Release(1)
	assertEmpty(t, path)
}

// TestReviewR39WeightedCycleRequests pins the cost of an uncontended
// Acquire/Release cycle of a Weighted, 1 and 2 leases: the first listing's
// new order sends no request more than before (77d859c: 6 and 8).
func TestReviewR39WeightedCycleRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}), path, 3)
	// Persistent parents, not the containers the first cycle would make:
	// ZooKeeper reaps an empty container (a check every 60 s), and the
	// next cycle would then make it again, with requests of its own.
	r33Parents(t, obs, path)
	cycle := func(n int64) int64 {
		before := p.Requests()
		if err := w.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
		w.Release(n)
		awaitChildren(t, obs, path+"/leases", 0)
		awaitChildren(t, obs, path+"/locks", 0)
		return p.Requests() - before
	}
	cycle(1) // parents
	for _, tc := range []struct{ n, want int64 }{{1, 6}, {2, 8}} {
		for range 10 {
			if got := cycle(tc.n); got != tc.want {
				t.Fatalf("an Acquire(%d)/Release cycle took %d requests; want %d", tc.n, got, tc.want)
			}
		}
	}
}

// TestReviewR39WeightedFirstCreateCut: the first lease create is cut
// (not applied) with another session holding one of two leases; the
// listing sent behind it goes out on the next connection, maybe before the
// create sent again. Acquire(2) must not be granted while the other lease
// is held (a listing without the create would count one lease too few), it
// is granted once that lease is released, and TryAcquire(1) fails meanwhile.
func TestReviewR39WeightedFirstCreateCut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	leases := path + "/leases"
	obs := observer(t, shared.Addr())
	other := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	if err := other.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path, 2)

	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, zktest.Cut)
	defer f.Disarm()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 2) }()
	r39Wait(t, f.Struck(), "the cut of the first lease create")
	// The acquirer has recovered (nothing), created both leases and waits:
	// three leases under a maximum of two.
	awaitChildren(t, obs, leases, 3)
	select {
	case err := <-res:
		t.Fatalf("Acquire(2) = %v while another session holds one of 2 leases", err)
	default:
	}
	if other.TryAcquire(1) {
		t.Fatal("TryAcquire(1) = true while 1 lease is held and 2 are being acquired")
	}
	other.Release(1)
	if err := reviewRecv(t, "Acquire", res); err != nil {
		t.Fatalf("Acquire(2) = %v", err)
	}
	if got := children(t, obs, leases); len(got) != 2 {
		t.Fatalf("leases while Acquire(2) holds = %v; want 2", got)
	}
	w.Release(2)
	assertEmpty(t, path)
}

// TestReviewR39OnceResetSessionLostUnknown: Reset's delete is applied and
// its reply lost, then the network is partitioned: the session is lost,
// and ctx ends while Reset waits for the next one to read the record
// again. Its error must wrap ErrOutcomeUnknown (the record was deleted), as
// Reset's doc says; one that says only "deadline exceeded" tells the
// operator the Reset did nothing, and a Reset run again deletes the record
// of the run that came after this one.
func TestReviewR39OnceResetSessionLostUnknown(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	x := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	if err := x.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	p := zktest.NewProxy(t, shared.Addr())
	operator := dsync.NewOnce(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(3*time.Second)), path)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/done"}, zktest.Drop)
	defer f.Disarm()
	rctx, rcancel := context.WithTimeout(ctx, 8*time.Second) // past the session's loss
	defer rcancel()
	res := make(chan error, 1)
	go func() { res <- operator.Reset(rctx) }()
	select {
	case <-f.Struck():
	case err := <-res:
		t.Fatalf("Reset = %v before its delete went out", err)
	case <-time.After(reviewBound):
		t.Fatal("Reset sent no delete")
	}
	p.BlackHole() // no reply closes the connection; the session is given up
	err := reviewRecv(t, "Reset", res)
	p.Heal()
	if ok, _, _ := obs.Exists(path + "/done"); ok {
		t.Fatal("the record is still there: the delete was not applied")
	}
	if err != nil && !errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Fatalf("Reset, its delete applied and its reply lost, then the session lost and ctx done = %v; "+
			"want nil or an error wrapping ErrOutcomeUnknown", err)
	}
}

// TestReviewR39OnceDecidesAfterSync pins that Do's read of the record
// under the lock goes out after a sync. Do takes the lock when the last
// run's lock node is deleted, as a notification tells it; a notification
// does not count towards what a reconnect asks the next server to have
// seen (catchUp's argument), so after a move to a server that lags behind
// the last run's record, an unsynced read finds no record and f runs a
// second time: "Do decides under the lock, so it never runs f again after
// a run has succeeded" would not hold. Both requests are armed to be cut:
// the one the proxy sees first is cut (and the run's lock is lost with the
// connection); a second Do runs f, once in all.
func TestReviewR39OnceDecidesAfterSync(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/lock")
	if _, err := holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	p := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path)
	var runs int
	res := make(chan error, 1)
	go func() { res <- o.Do(ctx, func(context.Context) error { runs++; return nil }) }()
	awaitChildren(t, observer(t, shared.Addr()), path+"/lock", 2) // o waits behind holder
	synced := p.Strike(zktest.Match{Op: zktest.OpSync, Path: path}, zktest.Cut)
	read := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path}, zktest.Cut)
	defer synced.Disarm()
	defer read.Disarm()
	holder.Unlock() // o takes the lock by the notification
	select {
	case <-synced.Struck():
	case <-read.Struck():
		t.Error("Do read the record under the lock with no sync before it")
	case err := <-res:
		t.Fatalf("Do = %v before reading the record", err)
	case <-time.After(reviewBound):
		t.Fatal("Do neither synced nor read the record")
	}
	// The cut suspends the connection, and the run's lock counts as lost.
	if err := reviewRecv(t, "Do", res); err != nil && !errors.Is(err, dsync.ErrLockLost) {
		t.Fatalf("Do = %v; want nil or ErrLockLost", err)
	}
	if err := o.Do(ctx, func(context.Context) error { runs++; return nil }); err != nil || runs != 1 {
		t.Fatalf("Do again = %v, f ran %d times in all; want nil, once", err, runs)
	}
}
