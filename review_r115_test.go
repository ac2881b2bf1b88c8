package dsync_test

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR115MarkMissesMiddleAncestor: the first use of a path two
// levels below anything that exists. CreateParents makes the middle
// ancestor, then the use gives up at the parent's own (second) create,
// black-holed, not applied. The mark went to the parent only, which is not
// there (NoNode): the middle ancestor, a container that never had a child,
// stayed for good (and so did everything above it). It now goes on up to
// the nearest node that is there.
func TestReviewR115MarkMissesMiddleAncestor(t *testing.T) {
	t.Parallel()
	for _, u := range parentUses {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			ctx, base, obs := r45Start(t)
			mid := base + "/mid"
			parent := mid + "/leaf"
			proxy, s := r45Proxied(t)
			first := proxy.Strike(zktest.Match{Op: zktest.OpCreateContainer, Path: parent}, zktest.Pass) // NoNode
			defer first.Disarm()
			f := proxy.Strike(zktest.Match{Op: zktest.OpCreateContainer, Path: parent}, zktest.BlackHole)
			defer f.Disarm()
			markLeaf := proxy.Strike(zktest.Match{Op: zktest.OpMulti, Path: mid + "/", Prefix: true}, zktest.Pass)
			defer markLeaf.Disarm()
			markMid := proxy.Strike(zktest.Match{Op: zktest.OpMulti, Path: mid + "/", Prefix: true}, zktest.Pass)
			defer markMid.Disarm()
			uctx, cancel := context.WithCancel(ctx)
			res := make(chan error, 1)
			go func() { res <- u.use(uctx, s, parent) }()
			r38Struck(t, f, res)
			cancel()
			if err := reviewRecv(t, "the use", res); err == nil {
				t.Fatal("the use = nil with its ctx canceled")
			}
			proxy.Heal()
			reviewRecv(t, "the cleanup's mark of the parent (not there)", markLeaf.Struck())
			reviewRecv(t, "the cleanup's mark of the middle ancestor", markMid.Struck())
			there, st, err := obs.Exists(mid)
			if err != nil || !there {
				t.Fatalf("%s: %v, %v", mid, there, err)
			}
			if st.Cversion == 0 && st.NumChildren == 0 {
				t.Fatalf("%s, made by the given-up use's CreateParents, left a never-used container (cversion %d, %d children): ZooKeeper 3.8 never removes it", mid, st.Cversion, st.NumChildren)
			}
		})
	}
}

// TestReviewR115MarkOnOncePathFakesRecord: a Count at PATH/x, PATH a
// Once's path, gives up at PATH's create (black-holed): its mark of PATH
// waits for the connection. A Once run at PATH takes the lock (making
// PATH), and while f runs the Count's connection heals and the mark lands
// on PATH, moving its cversion with no child left. The record's multi is
// then Cut (not applied, outcome unknown). decide compared PATH's cversion,
// which the mark moves, took it for "written, then deleted by a Reset",
// and Do returned nil with nothing recorded; it now compares PATH's data
// version, which a mark does not move.
func TestReviewR115MarkOnOncePathFakesRecord(t *testing.T) {
	t.Parallel()
	ctx, path, _ := r45Start(t)
	pv, sv := r45Proxied(t)
	f := pv.Strike(zktest.Match{Op: zktest.OpCreateContainer, Path: path}, zktest.BlackHole)
	defer f.Disarm()
	mark := pv.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/", Prefix: true}, zktest.Pass)
	defer mark.Disarm()
	uctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- dsync.NewCount(sv, path+"/x", 0).Set(uctx, 1) }()
	r38Struck(t, f, res)
	cancel()
	if err := reviewRecv(t, "Count.Set", res); err == nil {
		t.Fatal("Set = nil with its ctx canceled")
	}

	po := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{po.Addr()}), path, dsync.WithLossPolicy(dsync.LostOnExpiry))
	rec := po.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Cut)
	defer rec.Disarm()
	runs := 0
	err := o.Do(ctx, func(context.Context) error {
		runs++
		pv.Heal()
		reviewRecv(t, "the Count's mark of "+path, mark.Struck())
		return nil
	})
	if !isClosed(rec.Struck()) {
		t.Fatalf("the record's fault never struck (Do = %v)", err)
	}
	done, derr := o.Done(ctx)
	if err == nil && (derr != nil || !done) {
		t.Fatalf("Do = nil (\"its success is recorded\"), yet Done = %v, %v: the mark moved %s's cversion and decide took the unapplied record for written", done, derr, path)
	}
	t.Logf("Do = %v, Done = %v, %v, runs %d", err, done, derr, runs)
}
