package dsync_test

import (
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestHoldSweepWeightedInternalLock: A's node in the internal lock's queue
// (PATH/locks) held, max 1. A acquires on its next session; the late node
// (the old session's) heads the internal lock until that session expires:
// C acquires after A's release, and no more than one lease is ever out.
func TestHoldSweepWeightedInternalLock(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewWeighted(s, path, 1)
	f := p.Strike(createOf(path+"/locks"), zktest.Hold)
	defer f.Disarm()
	ares := hsAsync(func() error { return a.Acquire(ctx, 1) })
	r38Struck(t, f, ares)
	hsLose(t, p, s)
	if err := reviewRecv(t, "a's Acquire", ares); err != nil {
		t.Fatal(err)
	}
	hsRelease(t, ctx, f)
	c := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	cres := hsAsync(func() error { return c.Acquire(ctx, 1) })
	awaitChildren(t, obs, path+"/locks", 2) // the late one, c's
	hsNone(t, "c's Acquire", cres)
	if kids := children(t, obs, path+"/leases"); len(kids) != 1 {
		t.Fatalf("leases %v while a holds", kids)
	}
	a.Release(1)
	if err := reviewRecv(t, "c's Acquire", cres); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, obs, path+"/leases"); len(kids) != 1 {
		t.Fatalf("leases %v while c holds", kids)
	}
	c.Release(1)
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
}

// TestHoldSweepRWReadCreate: reader A's node create held while writer W
// holds; A reads on its next session after W; writer C, queued after the
// late read node, writes only once A unlocked and that node expired.
func TestHoldSweepRWReadCreate(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	w := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := w.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	p, s := r89Short(t)
	a := dsync.NewRWMutex(s, path)
	_, f := hsRequeued(t, ctx, obs, path, p, s, a.RLockContext, w.Unlock)
	hsRelease(t, ctx, f)
	c := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	hsLastIn(t, ctx, obs, path, c, 3, a.RUnlock)
}

// TestHoldSweepRevoke: a revocation request (setData at the node's version)
// held; Revoke asks again on its next session; the late write fails its
// version check (the holder is asked once, its node's data unchanged).
func TestHoldSweepRevoke(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	p, s := r89Short(t)
	f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: node}, zktest.Hold)
	defer f.Disarm()
	res := hsAsync(func() error { return dsync.Revoke(ctx, s, node) })
	r38Struck(t, f, res)
	hsLose(t, p, s)
	if err := reviewRecv(t, "Revoke", res); err != nil {
		t.Fatal(err)
	}
	_, st, err := obs.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	hsRelease(t, ctx, f)
	_, st2, err := obs.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Version != st.Version {
		t.Fatalf("the late revocation request applied too: version %d → %d", st.Version, st2.Version)
	}
	a.Unlock()
	awaitChildren(t, obs, path, 0)
}
