package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r67TakeBackRacesHandoff: X holds (A released), W follows X as a deep
// waiter; a revocation request into X makes W take back X's signal, its
// multi struck with action, and X releases for real (its signal sent with
// its delete) while that take-back is in flight. W must hold once X is
// gone, and leave nothing behind. X's release races W's reading of the
// revocation request: if the release wins, W sees X gone and sends no
// take-back, so the fault never strikes; W must hold all the same. Serial,
// as the take-back wins there (another test's load made the release win
// once).
func r67TakeBackRacesHandoff(t *testing.T, action zktest.Action) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r66Mutexes(t, ctx, false)
	_, f := l.revokeHeldX(t, ctx, action)
	l.x.Unlock() // the real handoff, W's take-back in flight (or about to be)
	var rw r66Res
	select {
	case <-f.Struck():
		select {
		case rw = <-l.wdone:
		case <-time.After(45 * time.Second):
			t.Fatalf("W never held after X released; children %v, watches %v", children(t, l.obs, l.path), watchesUnder(t, l.path, l.obs))
		}
	case rw = <-l.wdone:
		f.Disarm()
		t.Logf("X's release came before W read the revocation request: no take-back was sent")
	case <-time.After(45 * time.Second):
		t.Fatalf("neither W's take-back nor its hold came after X released; children %v, watches %v", children(t, l.obs, l.path), watchesUnder(t, l.path, l.obs))
	}
	if rw.err != nil {
		t.Fatalf("W: %v", rw.err)
	}
	if rw.held.Err() != nil {
		t.Fatalf("W's hold ended at once: %v", context.Cause(rw.held))
	}
	l.w.Unlock()
	awaitChildren(t, l.obs, l.path, 0)
	r66Flush(t, ctx, l.sw, l.path)
	if left := watchesUnder(t, l.path, l.obs); len(left) > 0 {
		t.Errorf("no node left under %s, but watches are: %v", l.path, left)
	}
}

func TestReviewR67TakeBackRacesHandoffPass(t *testing.T) { r67TakeBackRacesHandoff(t, zktest.Pass) }
func TestReviewR67TakeBackRacesHandoffLose(t *testing.T) { r67TakeBackRacesHandoff(t, zktest.Lose) }
func TestReviewR67TakeBackRacesHandoffCut(t *testing.T)  { r67TakeBackRacesHandoff(t, zktest.Cut) }

// r67Checked: a Weighted of 1. A holds the lease; B holds the internal lock
// waiting for it; C waits on the internal lock behind B; D (through a
// proxy) waits behind C, a deep waiter in a checked queue. An operator's
// write into C's lock node makes D take back C's signal (its multi struck
// with action) while C waits. The leases then pass A → B → C → D, one at a
// time, and nothing is left.
func r67Checked(t *testing.T, action zktest.Action) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	locks := path + "/locks"
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	ws := make([]*dsync.Weighted, 4)
	for i := range ws {
		addr := shared.Addr()
		if i == 3 {
			addr = p.Addr()
		}
		ws[i] = dsync.NewWeighted(dial(t, []string{addr}), path, 1)
	}
	if err := ws[0].Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := make([]chan error, 4)
	for i := 1; i < 4; i++ {
		done[i] = make(chan error, 1)
		go func() { done[i] <- ws[i].Acquire(ctx, 1) }()
		awaitChildren(t, obs, locks, i)
	}
	names := orderedNames(children(t, obs, locks))
	nodeC, nodeD := locks+"/"+names[1], locks+"/"+names[2]
	idD := mustSessionOf(t, obs, nodeD)
	awaitWatch(t, shared, nodeC+".handoff", idD)
	awaitWatch(t, shared, nodeC, idD)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: nodeC + ".handoff"}, action)
	if _, err := obs.Set(nodeC, []byte("operator"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitWatch(t, shared, nodeC, idD)
	awaitWatch(t, shared, nodeC+".handoff", idD)
	quiet := func(from int) {
		t.Helper()
		for i := from; i < 4; i++ {
			select {
			case err := <-done[i]:
				t.Fatalf("acquirer %d returned (%v) out of turn", i, err)
			default:
			}
		}
	}
	quiet(1)
	for i := 1; i < 4; i++ {
		ws[i-1].Release(1)
		select {
		case err := <-done[i]:
			if err != nil {
				t.Fatalf("acquirer %d: %v", i, err)
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("acquirer %d never acquired; locks %v leases %v", i, children(t, obs, locks), children(t, obs, path+"/leases"))
		}
		if i < 3 {
			awaitChildren(t, obs, locks, 3-i)
		}
		quiet(i + 1)
	}
	ws[3].Release(1)
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, locks, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		// the lease watch of a waiter may linger until a lease changes; report
		t.Errorf("no node left under %s, but watches are: %v", path, left)
	}
}

func TestReviewR67CheckedPass(t *testing.T) { r67Checked(t, zktest.Pass) }
func TestReviewR67CheckedLose(t *testing.T) { r67Checked(t, zktest.Lose) }
func TestReviewR67CheckedCut(t *testing.T)  { r67Checked(t, zktest.Cut) }

// r67Election: A leads, X and W (through a proxy, third: a deep waiter)
// campaign; an operator's write into X's node makes W take back X's signal
// (its multi struck with action) while X waits. W must lead only once X
// resigns, and nothing is left.
func r67Election(t *testing.T, action zktest.Action) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	x := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	w := dsync.NewElection(dial(t, []string{p.Addr()}), path)
	if _, err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	xdone, wdone := make(chan r66Res, 1), make(chan r66Res, 1)
	go func() { c, err := x.Campaign(ctx, "x"); xdone <- r66Res{c, err} }()
	awaitChildren(t, obs, path, 2)
	go func() { c, err := w.Campaign(ctx, "w"); wdone <- r66Res{c, err} }()
	names := r66Ordered(awaitChildren(t, obs, path, 3))
	nodeX, nodeW := path+"/"+names[1], path+"/"+names[2]
	idW := mustSessionOf(t, obs, nodeW)
	awaitWatch(t, shared, nodeX+".handoff", idW)
	awaitWatch(t, shared, nodeX, idW)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: nodeX + ".handoff"}, action)
	if _, err := obs.Set(nodeX, []byte("x2"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitWatch(t, shared, nodeX, idW)
	awaitWatch(t, shared, nodeX+".handoff", idW)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	rx := <-xdone
	if rx.err != nil {
		t.Fatalf("X: %v", rx.err)
	}
	r66Flush(t, ctx, dial(t, []string{shared.Addr()}), path)
	select {
	case r := <-wdone:
		t.Fatalf("W leads (%v) while X does", r.err)
	default:
	}
	if err := x.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	rw := <-wdone
	if rw.err != nil {
		t.Fatalf("W: %v", rw.err)
	}
	if err := w.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Errorf("no node left under %s, but watches are: %v", path, left)
	}
}

func TestReviewR67ElectionPass(t *testing.T) { r67Election(t, zktest.Pass) }
func TestReviewR67ElectionLose(t *testing.T) { r67Election(t, zktest.Lose) }
