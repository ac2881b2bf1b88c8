package zktest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR112HoldReleaseRacesCut: Release and Cut at once, several
// times: Release returns (nil or an error) well within its ctx, and the race
// detector stays quiet. Reports when Release failed although the request
// was applied.
func TestReviewR112HoldReleaseRacesCut(t *testing.T) {
	s := zktest.Start(t)
	r := newFaultRig(t, s, 2*time.Second)
	for i := range 6 {
		path := fmt.Sprintf("/r112-race-%d", i)
		f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path}, zktest.Hold)
		done := async(func() error { return create(r.c, path) })
		zktest.AwaitStruck(t, f)
		r.p.BlackHole()
		r.failsClosed(t, done, "create held")
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		var wg sync.WaitGroup
		var err error
		start := time.Now()
		wg.Go(func() { err = f.Release(ctx) })
		if i%2 == 0 {
			r.p.Cut()
		} else {
			wg.Go(r.p.Cut)
		}
		wg.Wait()
		el := time.Since(start)
		cancel()
		if el > 5*time.Second {
			t.Errorf("%d: Release = %v after %v", i, err, el)
		}
		applied := r.exists(t, path)
		t.Logf("%d: Release = %v, applied %v", i, err, applied)
		if err != nil && applied {
			t.Logf("%d: Release failed (\"never applied\") but the request was applied", i)
		}
		r.p.Heal()
		r.c.waitState(r.ctx, t, zk.StateHasSession)
	}
}

// TestReviewR112HoldWithDelay: a held request on a connection with a delay
// longer than heldPing and a good part of the session timeout; the session
// lives on and Release applies it.
func TestReviewR112HoldWithDelay(t *testing.T) {
	s := zktest.Start(t)
	r := newFaultRig(t, s, 2*time.Second)
	w := newWitness(t, r, s, 2*time.Second)
	r.p.SetDelay(250 * time.Millisecond)
	if _, err := r.c.Create("/r112-delay-eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/r112-delayed"}, zktest.Hold)
	done := async(func() error { return create(r.c, "/r112-delayed") })
	zktest.AwaitStruck(t, f)
	w.partition()
	r.p.BlackHole()
	r.failsClosed(t, done, "create held")
	w.expired(t, r)
	if !r.exists(t, "/r112-delay-eph") {
		t.Fatal("the held session expired under a delay")
	}
	if err := f.Release(r.ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if !r.exists(t, "/r112-delayed") {
		t.Error("not applied")
	}
	r.p.Heal()
}

// TestReviewR112TwoHolds: two Hold faults, requests sent together on one
// connection: the first is held, the second is dropped without the fault
// (which stays armed). Then the client reconnects with its session: the
// server closes the held connection and Release fails at once.
func TestReviewR112TwoHolds(t *testing.T) {
	s := zktest.Start(t)
	r := newFaultRig(t, s, 2*time.Second)
	f1 := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/r112-a"}, zktest.Hold)
	f2 := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/r112-b"}, zktest.Hold)
	d1 := async(func() error { return create(r.c, "/r112-a") })
	zktest.AwaitStruck(t, f1)
	d2 := async(func() error { return create(r.c, "/r112-b") })
	r.failsClosed(t, d1, "a")
	r.failsClosed(t, d2, "b")
	notStruck(t, f2, "second Hold")
	r.c.waitState(r.ctx, t, zk.StateHasSession)
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	if err := f1.Release(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("Release of the first = %v", err)
	}
	d3 := async(func() error { return create(r.c, "/r112-b") })
	zktest.AwaitStruck(t, f2)
	r.p.BlackHole()
	r.failsClosed(t, d3, "b again")
	if err := f2.Release(ctx); err != nil {
		t.Errorf("Release of the second = %v", err)
	}
	if r.exists(t, "/r112-a") || !r.exists(t, "/r112-b") {
		t.Error("want /r112-b only")
	}
	r.p.Heal()
}
