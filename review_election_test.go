package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review of Election (election.go), Once (once.go), queue.take (hold.go) and
// describe's watch (participants.go).

// reStruck waits until f has struck, failing if res (Do's result) comes
// first.
func reStruck(t *testing.T, f *zktest.Fault, res <-chan error) {
	t.Helper()
	select {
	case <-f.Struck():
	case err := <-res:
		t.Fatalf("Do = %v before the fault struck", err)
	}
}

// Bug (fixed during review: record now uses DoOnce): Once.record sent its multi again after a lost reply, so a record an operator's Reset deleted came back.
func TestReviewElectionOnceRecordResurrectedAfterReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}), path)
	operator := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)

	// The record's multi is applied and its reply swallowed.
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Drop)
	res := make(chan error, 1)
	go func() { res <- o.Do(ctx, func(context.Context) error { return nil }) }()
	reStruck(t, f, res)
	if done, err := operator.Done(ctx); err != nil || !done {
		t.Fatalf("Done once the record's multi was applied = %v, %v; want true", done, err)
	}
	// Someone saw the run recorded; then an operator resets the Once.
	if err := operator.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	p.Cut() // the connection drops: the Do's request fails and is retried
	err := <-res
	t.Logf("Do = %v", err)
	if done, err := operator.Done(ctx); err != nil || done {
		t.Fatalf("Done after a Reset that came after the only record = %v, %v; want false "+
			"(the run's record was written twice: the Reset is lost)", done, err)
	}
}

// Bug (fixed while under review: Do now records with a context of its own): a run that succeeded alone was not recorded when Do's ctx ended while f ran.
func TestReviewElectionOnceRunLostWhenCtxEndsDuringF(t *testing.T) {
	path := lockPath(t)
	o := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	f := func(held context.Context) error {
		runs++
		cancel() // a deadline passing during a long migration, say; held is not canceled
		if held.Err() != nil {
			t.Errorf("f's context canceled with Do's: %v", context.Cause(held))
		}
		return nil
	}
	err := o.Do(ctx, f)
	if err != nil {
		t.Errorf("Do of a run that succeeded alone = %v; want nil (\"If f returns nil, its success is recorded\")", err)
	}
	if done, derr := o.Done(context.Background()); derr != nil || !done {
		t.Errorf("Done after a run that succeeded alone = %v, %v; want true", done, derr)
	}
	if err := o.Do(context.Background(), f); err != nil || runs != 1 {
		t.Errorf("next Do = %v, f ran %d times in all; want 1", err, runs)
	}
}

// Bug (fixed during review: watchHead lists again): Observe missed writes to the leader's node when the leader arrived between its listing and its children watch.
func TestReviewElectionObserveMissesLeaderWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	osess := dial(t, []string{p.Addr()})

	// Observe finds no path (listing, children watch), then asks for an
	// exists watch: that request is swallowed while a leader arrives.
	f := p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, zktest.BlackHole)
	got := make(chan dsync.Participant, 8)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for p, err := range dsync.NewElection(osess, path).Observe(ctx) {
			if err == nil {
				got <- p
			}
		}
	}()
	zktest.AwaitStruck(t, f)
	e := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	if _, err := e.Campaign(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	defer e.Resign(context.Background())
	p.Heal() // the request is sent again: the children watch now lists the leader
	if l := <-got; l.Path != e.Key() {
		t.Fatalf("Observe yields %s; want %s", l.Path, e.Key())
	}
	if _, err := obs.Set(e.Key(), []byte("renamed"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if string(l.Data) != "renamed" {
			t.Fatalf("Observe yields %s %q; want the leader again with its new data", l.Path, l.Data)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Observe did not yield the leader again 10s after its node was written to "+
			"(\"and the leader again if its node's data changes\"); observer's watches on the leader: %#x",
			watches(t, shared)[e.Key()])
	}
	cancel()
	<-ended
}

// Bug (fixed during review: Do now panics): Do called from within f with f's context re-entered the run's lock and ran f again, nested.
func TestReviewElectionOnceDoWithinFRunsFTwice(t *testing.T) {
	t.Parallel()
	o := dsync.NewOnce(dial(t, []string{shared.Addr()}), lockPath(t))
	runs := 0
	var inner error
	var f func(context.Context) error
	f = func(held context.Context) error {
		runs++
		if runs == 1 {
			// A helper that ensures the migration ran, given the context at hand.
			ctx, cancel := context.WithTimeout(held, 2*time.Second)
			defer cancel()
			func() {
				defer func() { // refusing with a panic, as misuse, is fine too
					if r := recover(); r != nil {
						inner = fmt.Errorf("panic: %v", r)
					}
				}()
				inner = o.Do(ctx, f)
			}()
		}
		return nil
	}
	if err := o.Do(context.Background(), f); err != nil {
		t.Fatalf("Do = %v", err)
	}
	if runs != 1 {
		t.Errorf("f ran %d times, the second inside the first (inner Do = %v); want 1: a run must be alone", runs, inner)
	}
	if inner == nil {
		t.Errorf("Do within f = nil: it claims a run succeeded while the only run is still under way")
	}
}

// Bug (fixed during review: record checks Done first): after a lost reply, Once.record's retry reported ErrLockLost although its first multi wrote the record.
func TestReviewElectionOnceLostReplyReportedNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}), path)

	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Drop)
	res := make(chan error, 1)
	go func() { res <- o.Do(ctx, func(context.Context) error { return nil }) }()
	reStruck(t, f, res) // the record is written, its reply swallowed
	// An operator cleans up the lock node (a stuck-looking lock, say).
	for _, k := range children(t, obs, path+"/lock") {
		if err := obs.Delete(path+"/lock/"+k, -1); err != nil {
			t.Fatal(err)
		}
	}
	p.Cut()
	err := <-res
	done, derr := o.Done(ctx)
	if derr != nil {
		t.Fatal(derr)
	}
	if errors.Is(err, dsync.ErrLockLost) && done {
		t.Fatalf("Do = %v (\"not recorded ... another caller runs the function again\"), yet the run is recorded", err)
	}
}

// Bug: a run that succeeded alone is not recorded when the connection drops under the record's multi (not applied, session intact): the run is lost, against "written ... within the session timeout".
func TestReviewElectionOnceRecordLostOnBlip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}), path, dsync.WithLossPolicy(dsync.LostOnExpiry))

	// The record's multi never reaches the server; the connection comes
	// back at once, on the same session, with the lock node still there.
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Cut)
	runs := 0
	run := func(context.Context) error { runs++; return nil }
	err := o.Do(ctx, run)
	if !isClosed(f.Struck()) {
		t.Fatalf("the fault never struck (Do = %v)", err)
	}
	if err != nil {
		t.Errorf("Do of a run that succeeded alone, its lock intact, across a blip = %v; want nil", err)
	}
	if done, derr := o.Done(ctx); derr != nil || !done {
		t.Errorf("Done = %v, %v; want true: the run's success is lost", done, derr)
	}
	if err := o.Do(ctx, run); err != nil || runs != 1 {
		t.Errorf("next Do = %v, f ran %d times in all; want 1", err, runs)
	}
}
