package dsync_test

import (
	"errors"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestHoldSweepValueSet: a Set's setData (version -1) held past its
// session: Set must not report success (it may not retry it), as the late
// write lands after another client's Set.
func TestHoldSweepValueSet(t *testing.T) {
	t.Parallel()
	ctx, path, _ := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewCount(s, path, 0)
	if _, err := a.Get(ctx); err != nil {
		t.Fatal(err)
	}
	f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Hold)
	defer f.Disarm()
	res := hsAsync(func() error { return a.Set(ctx, 1) })
	r38Struck(t, f, res)
	hsLose(t, p, s)
	err := reviewRecv(t, "Set", res)
	b := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
	if err := b.Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	hsRelease(t, ctx, f)
	got, gerr := b.Get(ctx)
	t.Logf("held Set = %v; after the late delivery: %+v, %v", err, got, gerr)
	if err == nil && got.Value == 1 {
		t.Fatalf("Set(1) returned nil before Set(2) began, and the value is 1 after both: Set(2) lost")
	}
	if err != nil && !errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Fatalf("held Set = %v; want ErrOutcomeUnknown", err)
	}
}

// TestHoldSweepValueCAS: a CompareAndSet's versioned setData held: it
// reports an unknown outcome, and the late write fails its version check
// after another client's CompareAndSet.
func TestHoldSweepValueCAS(t *testing.T) {
	t.Parallel()
	ctx, path, _ := r45Start(t)
	p, s := r89Short(t)
	a := dsync.NewCount(s, path, 0)
	prev, err := a.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Hold)
	defer f.Disarm()
	type r struct {
		ok  bool
		err error
	}
	res := make(chan r, 1)
	go func() { ok, err := a.CompareAndSet(ctx, prev, 1); res <- r{ok, err} }()
	r38Struck(t, f, res)
	hsLose(t, p, s)
	got := reviewRecv(t, "CompareAndSet", res)
	b := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
	bprev, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := b.CompareAndSet(ctx, bprev, 2)
	if err != nil {
		t.Fatal(err)
	}
	hsRelease(t, ctx, f)
	v, err := b.Get(ctx)
	t.Logf("held CAS = %v, %v; b's CAS from %+v = %v; after the late delivery %+v, %v", got.ok, got.err, bprev, ok, v, err)
	if got.ok || !errors.Is(got.err, dsync.ErrOutcomeUnknown) {
		t.Fatalf("held CAS = %v, %v; want false, ErrOutcomeUnknown", got.ok, got.err)
	}
	if ok && v.Value != 2 {
		t.Fatalf("b's CAS succeeded, then the value is %+v: b's update lost", v)
	}
}

// TestHoldSweepValueCreate: the create of a Value's node held: by Get (the
// seed, a retried create) or by Set (its data, sent once): the late create
// finds the node made since and changes nothing.
func TestHoldSweepValueCreate(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"Get", "Set"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			ctx, path, _ := r45Start(t)
			p, s := r89Short(t)
			a := dsync.NewCount(s, path, 3)
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path}, zktest.Hold)
			defer f.Disarm()
			res := hsAsync(func() error {
				if by == "Get" {
					_, err := a.Get(ctx)
					return err
				}
				return a.Set(ctx, 4)
			})
			r38Struck(t, f, res)
			hsLose(t, p, s)
			err := reviewRecv(t, by, res)
			t.Logf("held %s = %v", by, err)
			b := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
			if err := b.Set(ctx, 7); err != nil {
				t.Fatal(err)
			}
			hsRelease(t, ctx, f)
			v, err := b.Get(ctx)
			if err != nil || v.Value != 7 {
				t.Fatalf("after the late create: %+v, %v; want 7", v, err)
			}
		})
	}
}
