package dsync_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// hsNone fails if res has yielded.
func hsNone[T any](t *testing.T, what string, res <-chan T) {
	t.Helper()
	select {
	case x := <-res:
		t.Fatalf("%s returned (%v) too soon", what, x)
	default:
	}
}

// TestHoldSweepOnceRecord: the run's record (check of the lock node and
// create of PATH/done: one multi) held. A's Do reports the outcome
// unknown; the lock node lives on with the held session, so B's Do waits,
// and after the late record it finds the run recorded: f ran once.
func TestHoldSweepOnceRecord(t *testing.T) {
	t.Parallel()
	ctx, path, _ := r45Start(t)
	var runs atomic.Int32
	f := func(context.Context) error { runs.Add(1); return nil }
	p, s := r89Short(t)
	fault := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/done"}, zktest.Hold)
	defer fault.Disarm()
	res := hsAsync(func() error { return dsync.NewOnce(s, path).Do(ctx, f) })
	r38Struck(t, fault, res)
	hsLose(t, p, s)
	if err := reviewRecv(t, "a's Do", res); !errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Fatalf("a's Do with its record held = %v; want an error wrapping ErrOutcomeUnknown", err)
	}
	other := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	ores := hsAsync(func() error { return other.Do(ctx, f) })
	hsRelease(t, ctx, fault)
	if err := reviewRecv(t, "b's Do", ores); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Fatalf("f ran %d times; want once", runs.Load())
	}
}

// TestHoldSweepWeightedLease: A's lease create (a multi checked on A's
// internal lock node) held, max 1. A's Acquire goes on on its next session,
// behind its old internal lock node (live with the held session); so does
// C's. After the late create and the old session's expiry, exactly one of
// them holds at a time.
func TestHoldSweepWeightedLease(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewWeighted(s, path, 1)
	c := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/leases/", Prefix: true}, zktest.Hold)
	defer f.Disarm()
	ares := hsAsync(func() error { return a.Acquire(ctx, 1) })
	r38Struck(t, f, ares)
	hsLose(t, p, s)
	cres := hsAsync(func() error { return c.Acquire(ctx, 1) })
	awaitChildren(t, obs, path+"/locks", 3) // the old one, a's and c's
	hsNone(t, "a's Acquire", ares)
	hsNone(t, "c's Acquire", cres)
	hsRelease(t, ctx, f)
	var first, second *dsync.Weighted
	var secondRes <-chan error
	select {
	case err := <-ares:
		if err != nil {
			t.Fatal(err)
		}
		first, second, secondRes = a, c, cres
	case err := <-cres:
		if err != nil {
			t.Fatal(err)
		}
		first, second, secondRes = c, a, ares
	case <-ctx.Done():
		t.Fatal("neither acquired")
	}
	if kids := children(t, obs, path+"/leases"); len(kids) != 1 {
		t.Fatalf("one holder, leases %v", kids)
	}
	hsNone(t, "the second Acquire", secondRes)
	first.Release(1)
	if err := reviewRecv(t, "the second Acquire", secondRes); err != nil {
		t.Fatal(err)
	}
	second.Release(1)
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
}

// TestHoldSweepWeightedRelease: A's lease delete held, max 1, B waiting:
// B waits until the late delete (or the old session's end), then holds; A,
// acquiring again on its next session, holds after B.
func TestHoldSweepWeightedRelease(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewWeighted(s, path, 1)
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	lease := children(t, obs, path+"/leases")[0]
	b := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	bres := hsAsync(func() error { return b.Acquire(ctx, 1) })
	awaitChildren(t, obs, path+"/leases", 2)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/leases/" + lease}, zktest.Hold)
	defer f.Disarm()
	a.Release(1)
	zktest.AwaitStruck(t, f)
	hsLose(t, p, s)
	ares := hsAsync(func() error { return a.Acquire(ctx, 1) })
	hsNone(t, "b's Acquire", bres)
	hsRelease(t, ctx, f)
	if err := reviewRecv(t, "b's Acquire", bres); err != nil {
		t.Fatal(err)
	}
	hsNone(t, "a's Acquire", ares)
	b.Release(1)
	if err := reviewRecv(t, "a's Acquire", ares); err != nil {
		t.Fatal(err)
	}
	a.Release(1)
	awaitChildren(t, obs, path+"/leases", 0)
}

// TestHoldSweepRWDowngrade: A's downgrade (create of the read node at the
// write node's place with a versioned write to the write node: one multi)
// held, reader B and writer C waiting. A's RLockContext fails; after the
// late multi, B reads and C writes, never together, and nothing is left.
func TestHoldSweepRWDowngrade(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewRWMutex(s, path)
	wheld, err := a.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wNode := children(t, obs, path)[0]
	b := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	c := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	type r struct {
		held context.Context
		err  error
	}
	bres, cres := make(chan r, 1), make(chan r, 1)
	go func() { h, err := b.RLockContext(ctx); bres <- r{h, err} }()
	awaitChildren(t, obs, path, 2)
	go func() { h, err := c.LockContext(ctx); cres <- r{h, err} }()
	awaitChildren(t, obs, path, 3)
	f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path + "/" + wNode}, zktest.Hold)
	defer f.Disarm()
	dres := make(chan r, 1)
	go func() { h, err := a.RLockContext(wheld); dres <- r{h, err} }()
	r38Struck(t, f, dres)
	hsLose(t, p, s)
	d := reviewRecv(t, "the downgrade", dres)
	t.Logf("downgrade = %v", d.err)
	hsNone(t, "b's RLockContext", bres)
	hsRelease(t, ctx, f)
	bx := reviewRecv(t, "b's RLockContext", bres)
	if bx.err != nil {
		t.Fatal(bx.err)
	}
	if d.err == nil && hsLive(d.held) {
		t.Fatal("a's downgraded read hold live after its session was lost")
	}
	hsNone(t, "c's LockContext", cres)
	b.RUnlock()
	cx := reviewRecv(t, "c's LockContext", cres)
	if cx.err != nil {
		t.Fatal(cx.err)
	}
	if hsLive(bx.held) {
		t.Fatal("b's read hold live while c writes")
	}
	c.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestHoldSweepElection: a's campaign create held behind leader l, and
// then l's Resign... : variant "create": a campaigns again on its next
// session and leads after l; the late node queues behind and goes with
// its session. Variant "resign": the leader a's Resign (its delete) held,
// b waiting: b leads only after the late delete, and a, campaigning again,
// after b.
func TestHoldSweepElection(t *testing.T) {
	t.Parallel()
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		ctx, path, obs := r45Start(t)
		l := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
		if _, err := l.Campaign(ctx, "l"); err != nil {
			t.Fatal(err)
		}
		p, s := r89Short(t)
		a := dsync.NewElection(s, path)
		f := p.Strike(createOf(path), zktest.Hold)
		defer f.Disarm()
		ares := campaign(ctx, a, "a")
		r38Struck(t, f, ares)
		hsLose(t, p, s)
		awaitChildren(t, obs, path, 2)
		if err := l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reviewRecv(t, "a's Campaign", ares); err != nil {
			t.Fatal(err)
		}
		hsRelease(t, ctx, f)
		b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
		bres := campaign(ctx, b, "b")
		awaitChildren(t, obs, path, 3)
		if id := leaderID(t, b); id != "a" {
			t.Fatalf("leader %q; want a", id)
		}
		r38Pending(t, "b's Campaign", bres)
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reviewRecv(t, "b's Campaign", bres); err != nil {
			t.Fatal(err)
		}
		if kids := children(t, obs, path); len(kids) != 1 {
			t.Fatalf("b leads with %v", kids)
		}
		b.Resign(ctx)
		awaitChildren(t, obs, path, 0)
	})
	t.Run("resign", func(t *testing.T) {
		t.Parallel()
		ctx, path, obs := r45Start(t)
		p, s := r89Short(t)
		a := dsync.NewElection(s, path)
		if _, err := a.Campaign(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		aNode := children(t, obs, path)[0]
		b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
		bres := campaign(ctx, b, "b")
		awaitChildren(t, obs, path, 2)
		f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/" + aNode}, zktest.Hold)
		defer f.Disarm()
		rres := hsAsync(func() error { return a.Resign(ctx) })
		r38Struck(t, f, rres)
		hsLose(t, p, s)
		if err := reviewRecv(t, "a's Resign", rres); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("a's Resign = %v", err)
		}
		ares := campaign(ctx, a, "a")
		awaitChildren(t, obs, path, 3)
		r38Pending(t, "b's Campaign", bres)
		r38Pending(t, "a's Campaign", ares)
		hsRelease(t, ctx, f)
		if err := reviewRecv(t, "b's Campaign", bres); err != nil {
			t.Fatal(err)
		}
		r38Pending(t, "a's Campaign", ares)
		b.Resign(ctx)
		if err := reviewRecv(t, "a's Campaign", ares); err != nil {
			t.Fatal(err)
		}
		a.Resign(ctx)
		awaitChildren(t, obs, path, 0)
	})
}
