package dsync_test

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestHoldSweepMutexCreate: A's lock-node create (protected) held while B
// holds. A queues again on its next session and holds after B; the late
// node (the old session's, live until it expires) queues behind A's; C
// waits behind it, holds only once A unlocks and that node expired, and
// nothing is left.
func TestHoldSweepMutexCreate(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	_, err := b.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, s := r89Short(t)
	a := dsync.NewMutex(s, path)
	held, f := hsRequeued(t, ctx, obs, path, p, s, a.LockContext, b.Unlock)
	hsRelease(t, ctx, f)
	awaitChildren(t, obs, path, 2) // a's, the late one
	c := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	hsLastIn(t, ctx, obs, path, c, 3, func() {
		if !hsLive(held) {
			t.Fatalf("a's hold lost after the late create: %v", context.Cause(held))
		}
		a.Unlock()
	})
}

// TestHoldSweepMutexUnlock: A's Unlock (its delete, with the handoff signal
// for B waiting behind it: one multi) held. B waits on until the late
// delete lands (A's node lives with its session), then holds; A, queued
// again on its next session behind B, holds after B.
func TestHoldSweepMutexUnlock(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewMutex(s, path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	aNode := children(t, obs, path)[0]
	b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	type r struct {
		held context.Context
		err  error
	}
	bres := make(chan r, 1)
	go func() { h, err := b.LockContext(ctx); bres <- r{h, err} }()
	awaitChildren(t, obs, path, 2)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/" + aNode}, zktest.Hold)
	defer f.Disarm()
	a.Unlock()
	zktest.AwaitStruck(t, f)
	hsLose(t, p, s)
	ares := make(chan r, 1)
	go func() { h, err := a.LockContext(ctx); ares <- r{h, err} }()
	awaitChildren(t, obs, path, 3)
	select {
	case x := <-bres:
		t.Fatalf("b's LockContext = %v with a's node still there", x.err)
	case x := <-ares:
		t.Fatalf("a's LockContext = %v with its old node and b's ahead", x.err)
	default:
	}
	hsRelease(t, ctx, f)
	bx := reviewRecv(t, "b's LockContext", bres)
	if bx.err != nil {
		t.Fatal(bx.err)
	}
	select {
	case x := <-ares:
		t.Fatalf("a's LockContext = %v while b holds", x.err)
	default:
	}
	b.Unlock()
	ax := reviewRecv(t, "a's LockContext", ares)
	if ax.err != nil {
		t.Fatal(ax.err)
	}
	a.Unlock()
	awaitChildren(t, obs, path, 0)
}
