package dsync_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR112LateDeleteOperatorRecord: a run A is under way (it found no
// record and advanced PATH's version to V); an operator creates PATH/done by
// hand (record's doc: "NodeExists: an operator's record"). A Reset reads V
// and the operator's record; its delete is held in the network past its
// session's give-up; Reset goes on on the next session and deletes the
// operator's record. A then records its success: PATH's version is still V.
// The held delete (check V, delete done) reaches the server: it deletes A's
// record, which Reset never read, and the next Do runs f again.
func TestReviewR112LateDeleteOperatorRecord(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	var runs atomic.Int32
	started, finish := make(chan struct{}), make(chan struct{})
	blocking := func(context.Context) error {
		runs.Add(1)
		close(started)
		<-finish
		return nil
	}
	other := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	runA := make(chan error, 1)
	go func() { runA <- other.Do(ctx, blocking) }()
	reviewRecv(t, "f's start", started)
	if _, err := obs.Create(path+"/done", []byte("by hand"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	held := resetHeld(t, ctx, path)
	if ok, _, _ := obs.Exists(path + "/done"); ok {
		t.Fatal("the operator's record is still there after Reset")
	}
	close(finish)
	if err := reviewRecv(t, "A's Do", runA); err != nil {
		t.Fatalf("A's Do = %v", err)
	}
	_, stRec, err := obs.Get(path + "/done")
	if err != nil {
		t.Fatalf("A's record: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if ok, _, _ := obs.Exists(path + "/done"); !ok {
		t.Errorf("A's record (czxid %d, written after Reset's read and after Reset returned) "+
			"deleted by Reset's held delete", stRec.Czxid)
	}
	f := func(context.Context) error { runs.Add(1); return nil }
	if err := other.Do(ctx, f); err != nil || runs.Load() != 1 {
		t.Errorf("Do after A's recorded success = %v, f ran %d times; want nil, once", err, runs.Load())
	}
}

// TestReviewR112HeldRecordLateWrite: the record's transaction is held past
// the run's session's give-up: Do returns ErrLockLost, and Release then
// writes the record for the session the server still keeps, whose lock
// node still exists. Do's error must say the outcome is unknown
// (ErrOutcomeUnknown), not that nothing was recorded.
func TestReviewR112HeldRecordLateWrite(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	held := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/done"}, zktest.Hold)
	defer held.Disarm()
	res := make(chan error, 1)
	go func() { res <- dsync.NewOnce(s, path).Do(ctx, func(context.Context) error { return nil }) }()
	r38Struck(t, held, res)
	hsLose(t, p, s) // the held connection keeps the session at the server
	err := reviewRecv(t, "Do", res)
	t.Logf("Do = %v (ErrLockLost: %v)", err, errors.Is(err, dsync.ErrLockLost))
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	ok, _, _ := obs.Exists(path + "/done")
	t.Logf("record after Release: %v", ok)
	if ok && !errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Errorf("Do = %v, and its record was written afterwards; want an error wrapping ErrOutcomeUnknown", err)
	}
}
