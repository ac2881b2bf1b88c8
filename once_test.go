package dsync_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestOnceRunsOnce: eight callers, each with a session of its own, call Do
// at once: f runs once, every Do returns nil, and the record says who.
func TestOnceRunsOnce(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	var (
		runs atomic.Int32
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range 8 {
		o := dsync.NewOnce(dial(t, []string{shared.Addr()}), path, dsync.WithData([]byte("caller")))
		wg.Go(func() {
			<-start
			if err := o.Do(ctx, func(held context.Context) error {
				if dsync.Token(held) == 0 {
					t.Error("Token of f's context = 0; want the run's lock token")
				}
				runs.Add(1)
				return nil
			}); err != nil {
				t.Errorf("Do %d = %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("f ran %d times; want 1", n)
	}
	rec, ok, err := dsync.NewOnce(dial(t, []string{shared.Addr()}), path).Record(ctx)
	if err != nil || !ok || !strings.HasPrefix(string(rec.Data), "caller at=") || rec.Path != path+"/done" || rec.Created.IsZero() {
		t.Fatalf("Record = %+v, %v, %v; want who and when", rec, ok, err)
	}
	awaitChildren(t, obs, path+"/lock", 0) // Do does not wait for its lock's delete
}

// TestOnceFailedRunLetsNextTry: when f fails, Do returns its error, nothing
// is recorded, and the next caller runs f; once one succeeds, no more run.
func TestOnceFailedRunLetsNextTry(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	boom := errors.New("boom")
	var (
		runs     atomic.Int32
		wg       sync.WaitGroup
		failures atomic.Int32
	)
	f := func(context.Context) error {
		if runs.Add(1) == 1 {
			return boom
		}
		return nil
	}
	start := make(chan struct{})
	for range 8 {
		o := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
		wg.Go(func() {
			<-start
			switch err := o.Do(ctx, f); {
			case errors.Is(err, boom):
				failures.Add(1)
			case err != nil:
				t.Errorf("Do = %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n, fails := runs.Load(), failures.Load(); n != 2 || fails != 1 {
		t.Fatalf("f ran %d times, %d Do failed; want 2 runs, 1 failure", n, fails)
	}
}

// TestOnceDoneReset: Done tells whether a run succeeded; Reset lets the next
// Do run f again.
func TestOnceDoneReset(t *testing.T) {
	ctx := context.Background()
	o := dsync.NewOnce(dial(t, []string{shared.Addr()}), lockPath(t))
	runs := 0
	f := func(context.Context) error { runs++; return nil }
	for _, step := range []struct {
		reset    bool
		wantRuns int
	}{{false, 1}, {false, 1}, {true, 2}, {false, 2}} {
		if step.reset {
			if err := o.Reset(ctx); err != nil {
				t.Fatalf("Reset = %v", err)
			}
			if done, err := o.Done(ctx); err != nil || done {
				t.Fatalf("Done after Reset = %v, %v; want false", done, err)
			}
		}
		if err := o.Do(ctx, f); err != nil {
			t.Fatalf("Do = %v", err)
		}
		if done, err := o.Done(ctx); err != nil || !done {
			t.Fatalf("Done after Do = %v, %v; want true", done, err)
		}
		if runs != step.wantRuns {
			t.Fatalf("f ran %d times; want %d", runs, step.wantRuns)
		}
	}
	if err := o.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Reset(ctx); err != nil {
		t.Fatalf("Reset with no record = %v; want nil", err)
	}
}

// TestOnceLostRunNotRecorded: f's context is canceled when the run's lock
// is lost; a run that succeeds anyway after its lock node is gone is not
// recorded (the record's transaction checks the node), and the next caller
// runs f.
func TestOnceLostRunNotRecorded(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	err := o.Do(ctx, func(held context.Context) error {
		kids := children(t, obs, path+"/lock")
		if len(kids) != 1 {
			t.Fatalf("lock nodes %v; want 1", kids)
		}
		if err := obs.Delete(path+"/lock/"+kids[0], -1); err != nil {
			t.Fatal(err)
		}
		<-held.Done()
		if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) {
			t.Errorf("f's context cause = %v; want ErrLockLost", cause)
		}
		return nil // and yet it claims success
	})
	if !errors.Is(err, dsync.ErrLockLost) {
		t.Fatalf("Do of a run that lost its lock = %v; want ErrLockLost", err)
	}
	if done, err := o.Done(ctx); err != nil || done {
		t.Fatalf("Done = %v, %v; want false", done, err)
	}
	ran := false
	if err := dsync.NewOnce(dial(t, []string{shared.Addr()}), path).Do(ctx, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("next Do = %v, ran %v; want a run", err, ran)
	}
}

func TestOnceBadInput(t *testing.T) {
	ctx := context.Background()
	f := func(context.Context) error { t.Error("f ran"); return nil }
	if err := dsync.NewOnce(nil, "/x").Do(ctx, f); !errors.Is(err, dsync.ErrNilSession) {
		t.Fatalf("Do with nil session = %v; want ErrNilSession", err)
	}
	o := dsync.NewOnce(dial(t, []string{shared.Addr()}), "/bad/")
	if err := o.Do(ctx, f); !errors.Is(err, dsync.ErrBadPath) {
		t.Fatalf("Do on a bad path = %v; want ErrBadPath", err)
	}
	if _, err := o.Done(ctx); !errors.Is(err, dsync.ErrBadPath) {
		t.Fatalf("Done on a bad path = %v; want ErrBadPath", err)
	}
	// A lock path is at most 4096 bytes, and a Once's lock is PATH/lock.
	s := dial(t, []string{shared.Addr()})
	long := longestPath(t)
	if err := dsync.NewOnce(s, long).Do(ctx, f); !errors.Is(err, dsync.ErrBadPath) {
		t.Fatalf("Do on a %d-byte path = %v; want ErrBadPath", len(long), err)
	}
	ran := false
	if err := dsync.NewOnce(s, long[:len(long)-len("/lock")]).Do(ctx, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("Do on the longest path = %v (f ran: %v); want f run and nil", err, ran)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := dsync.NewOnce(s, lockPath(t)).Do(done, f); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a done ctx = %v; want context.Canceled", err)
	}
}

// TestOnceRecordsAfterCtx: ctx bounds the wait for a turn, not the record:
// a run that succeeds after ctx ended is recorded, and Do returns nil.
func TestOnceRecordsAfterCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	o := dsync.NewOnce(dial(t, []string{shared.Addr()}), lockPath(t))
	if err := o.Do(ctx, func(context.Context) error { cancel(); return nil }); err != nil {
		t.Fatalf("Do whose ctx ended during f = %v; want nil", err)
	}
	if done, err := o.Done(context.Background()); err != nil || !done {
		t.Fatalf("Done = %v, %v; want true", done, err)
	}
}

// TestOnceReadsAcrossSessionLoss: Record (so Done) and Reset, whose read of
// the record goes out as the session is partitioned until it is lost, read
// again on the next session instead of failing with the loss: Record
// returns the record, Reset deletes it.
func TestOnceReadsAcrossSessionLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   zktest.Op
		call func(ctx context.Context, o *dsync.Once) error
	}{
		{"Record", zktest.OpGetData, func(ctx context.Context, o *dsync.Once) error {
			_, done, err := o.Record(ctx)
			if err == nil && !done {
				err = errors.New("no record")
			}
			return err
		}},
		{"Reset", zktest.OpExists, func(ctx context.Context, o *dsync.Once) error { return o.Reset(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			if err := dsync.NewOnce(dial(t, []string{shared.Addr()}), path).Do(ctx, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			p, s := r89Short(t)
			sub := s.Subscribe()
			defer sub.Stop()
			o := dsync.NewOnce(s, path)
			f := p.Strike(zktest.Match{Op: tc.op, Path: path + "/done"}, zktest.BlackHole)
			defer f.Disarm()
			res := make(chan error, 1)
			go func() { res <- tc.call(ctx, o) }()
			r38Struck(t, f, res)
			p.BlackHole()
			awaitState(t, sub, zkconn.StateLost)
			p.Heal()
			if err := reviewRecv(t, tc.name, res); err != nil {
				t.Fatalf("%s across the session's loss = %v; want it done on the next session", tc.name, err)
			}
			if tc.name == "Reset" {
				if ok, _, err := obs.Exists(path + "/done"); err != nil || ok {
					t.Fatalf("record there after Reset: %v, %v", ok, err)
				}
			}
		})
	}
}

// resetHeld runs a Reset at path whose delete is held in the network while
// its session is given up (zktest's Hold), and which goes on on the next
// session; it returns the held delete once Reset has returned nil.
func resetHeld(t *testing.T, ctx context.Context, path string) *zktest.Fault {
	t.Helper()
	p, s := r89Short(t)
	held := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/done"}, zktest.Hold)
	t.Cleanup(held.Disarm)
	res := make(chan error, 1)
	go func() { res <- dsync.NewOnce(s, path).Reset(ctx) }()
	r38Struck(t, held, res)
	hsLose(t, p, s) // the held connection keeps the session at the server
	if err := reviewRecv(t, "Reset", res); err != nil {
		t.Fatalf("Reset = %v; want it done on the next session", err)
	}
	return held
}

// TestOnceResetLateDelete: Reset's delete is held in the network while its
// session is given up; Reset goes on on the next session and deletes the
// record, and a later run records its success. The held delete then
// reaches the server for the old session, which the server still keeps
// (zktest's Hold): its check fails, and the later record stays.
func TestOnceResetLateDelete(t *testing.T) {
	t.Parallel()
	ctx, path, _ := r45Start(t)
	var runs atomic.Int32
	f := func(context.Context) error { runs.Add(1); return nil }
	other := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	if err := other.Do(ctx, f); err != nil {
		t.Fatal(err)
	}
	held := resetHeld(t, ctx, path)
	if err := other.Do(ctx, f); err != nil || runs.Load() != 2 {
		t.Fatalf("Do after Reset = %v, f ran %d times; want nil, twice", err, runs.Load())
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("the held delete's Release = %v", err)
	}
	if done, err := other.Done(ctx); err != nil || !done {
		t.Fatalf("Done after the held delete reached the server = %v, %v; want true: "+
			"the later run's record deleted by a delete sent before it", done, err)
	}
	if err := other.Do(ctx, f); err != nil || runs.Load() != 2 {
		t.Fatalf("Do after the held delete = %v, f ran %d times; want nil, twice", err, runs.Load())
	}
}
