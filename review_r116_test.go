package dsync_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR116StaleAdvanceFakesRecord: run A takes the lock and sends its
// advance (a setData of PATH at the version it read), which is black-holed
// (not applied). A's lock node is deleted behind its back (the docs' "its
// node deleted"). Run B takes the lock, advances PATH to v1 and runs f.
// Meanwhile A's client reconnects and h.Do sends A's setData again: BadVersion,
// so advance reads PATH again and writes it at v1: v2, under B's lock. B's
// record is Cut (not applied); decide sees no record, B's lock node there and
// PATH's data version moved (v2 != v1): "written, then deleted by a Reset",
// and B's Do returns nil with nothing recorded. With cversion (before
// d511e50) A's stale advance could not move what decide compares; now
// advance's write is checked on the run's lock node, so A's write sent
// again fails (A's Do: ErrLockLost) and B's f sees A end first.
func TestReviewR116StaleAdvanceFakesRecord(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	pa := zktest.NewProxy(t, shared.Addr())
	a := dsync.NewOnce(dial(t, []string{pa.Addr()}, zkconn.WithSessionTimeout(6*time.Second)), path)
	hole := pa.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.BlackHole)
	defer hole.Disarm()
	var runsA, runsB atomic.Int32
	resA := make(chan error, 1)
	go func() {
		resA <- a.Do(ctx, func(context.Context) error { runsA.Add(1); return nil })
	}()
	r38Struck(t, hole, resA)
	kids, _, err := obs.Children(path + "/lock")
	if err != nil || len(kids) != 1 {
		t.Fatalf("A's lock node: %v, %v", kids, err)
	}
	if err := obs.Delete(path+"/lock/"+kids[0], -1); err != nil { // behind A's back
		t.Fatal(err)
	}

	pb := zktest.NewProxy(t, shared.Addr())
	b := dsync.NewOnce(dial(t, []string{pb.Addr()}), path, dsync.WithLossPolicy(dsync.LostOnExpiry))
	rec := pb.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Cut)
	defer rec.Disarm()
	var errA error
	aEnded := false
	errB := b.Do(ctx, func(context.Context) error {
		runsB.Add(1)
		_, st, err := obs.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		mine := st.Version
		for { // until A's stale advance lands, or A's Do ends (a watch, no sleep)
			_, st, ev, err := obs.GetW(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Version != mine {
				t.Logf("PATH's data version moved under B's lock: %d -> %d", mine, st.Version)
				return nil
			}
			select {
			case <-ev:
			case errA = <-resA:
				aEnded = true
				return nil
			case <-ctx.Done():
				t.Fatal("neither A's advance landed nor A's Do ended")
			}
		}
	})
	if !aEnded {
		errA = reviewRecv(t, "A's Do", resA)
	}
	if !errors.Is(errA, dsync.ErrLockLost) {
		t.Errorf("A's Do, its lock node deleted while its advance was out = %v; want ErrLockLost", errA)
	}
	if !isClosed(rec.Struck()) {
		t.Fatalf("B's record fault never struck (Do = %v)", errB)
	}
	done, derr := b.Done(ctx)
	t.Logf("A: Do = %v (f ran %d); B: Do = %v (f ran %d); Done = %v, %v", errA, runsA.Load(), errB, runsB.Load(), done, derr)
	if errB == nil && (derr != nil || !done) {
		t.Fatalf("B's Do = nil (\"its success is recorded\"), yet Done = %v, %v: A's stale advance moved PATH's data version under B's lock and decide took B's unapplied record for written", done, derr)
	}
}

// TestReviewR116AdvanceLostThenRecordCut: advance's setData applied with its
// reply lost (h.Do sends it again: BadVersion, read again, written again),
// then the record Cut: decide must compare the version last written.
func TestReviewR116AdvanceLostThenRecordCut(t *testing.T) {
	t.Parallel()
	ctx, path, _ := r45Start(t)
	p := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path, dsync.WithLossPolicy(dsync.LostOnExpiry))
	adv := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Lose)
	defer adv.Disarm()
	rec := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Cut)
	defer rec.Disarm()
	runs := 0
	err := o.Do(ctx, func(context.Context) error { runs++; return nil })
	done, derr := o.Done(ctx)
	t.Logf("Do = %v, runs %d, Done = %v, %v, adv %v rec %v", err, runs, done, derr, isClosed(adv.Struck()), isClosed(rec.Struck()))
	if !isClosed(adv.Struck()) || !isClosed(rec.Struck()) {
		t.Fatal("a fault never struck")
	}
	if err == nil && !done {
		t.Fatal("Do = nil with nothing recorded")
	}
}
