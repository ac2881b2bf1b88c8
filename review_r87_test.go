package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 87: RWMutex (with downgrade), MultiLock, SemaphoreMutex,
// over the waiting core of rounds 63–81.

// r87Proxied returns a Session through a fresh proxy, with a session
// timeout (6s) whose pings notice a swallowed reply within a test's bound.
func r87Proxied(t *testing.T) (*zktest.Proxy, *zkconn.Session) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	return p, dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
}

// r87Struck waits until f has struck, within the bound. A result on res
// may come first only if the fault strikes too: a Cut or Lose closes the
// connection, which may cancel a hold and end the call before the proxy
// has closed both sides and tells of the strike. The result is then put
// back on the returned channel, to be received from in place of res.
func r87Struck(t *testing.T, f *zktest.Fault, res <-chan rvResult) <-chan rvResult {
	t.Helper()
	select {
	case <-f.Struck():
		return res
	case r := <-res:
		reviewRecv(t, fmt.Sprintf("the fault's strike (the call returned first: err %v)", r.err), f.Struck())
		out := make(chan rvResult, 1)
		out <- r
		return out
	case <-time.After(reviewBound):
		t.Fatal("the fault never struck")
		return nil
	}
}

// r87Other returns the one name of kids not in known.
func r87Other(t *testing.T, kids []string, known ...string) string {
	t.Helper()
	var out []string
	for _, k := range kids {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	if len(out) != 1 {
		t.Fatalf("children %v: want one other than %v", kids, known)
	}
	return out[0]
}

// TestReviewR87WriterGivesUpReadersProceed: a writer waiting behind a read
// hold gives up (ctx) while readers of other sessions wait behind it: they
// hold at once, beside the first read hold, while a writer behind them
// still waits; it holds once all three read holds end, and nothing (node,
// watch) is left at the end.
func TestReviewR87WriterGivesUpReadersProceed(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	rw := func() *dsync.RWMutex { return dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path) }
	r0, w, r1, r2, w2 := rw(), rw(), rw(), rw(), rw()
	h0, err := r0.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wres := rvGo(wctx, w.LockContext)
	awaitChildren(t, obs, path, 2)
	res1 := rvGo(ctx, r1.RLockContext)
	awaitChildren(t, obs, path, 3)
	res2 := rvGo(ctx, r2.RLockContext)
	awaitChildren(t, obs, path, 4)
	w2res := rvGo(ctx, w2.LockContext)
	awaitChildren(t, obs, path, 5)
	rvWaits(t, res1, "reader 1 behind a waiting writer")
	rvWaits(t, res2, "reader 2 behind a waiting writer")
	wcancel()
	if r := reviewRecv(t, "the writer that gives up", wres); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("writer's LockContext = %v; want context.Canceled", r.err)
	}
	h1 := rvHeld(t, res1, "reader 1 once the writer gave up")
	h2 := rvHeld(t, res2, "reader 2 once the writer gave up")
	awaitChildren(t, obs, path, 4)
	rvWaits(t, w2res, "the writer behind three read holds")
	for _, h := range []context.Context{h0, h1, h2} {
		if h.Err() != nil {
			t.Fatalf("a read hold ended: %v", context.Cause(h))
		}
	}
	r0.RUnlock()
	r1.RUnlock()
	awaitChildren(t, obs, path, 2)
	rvWaits(t, w2res, "the writer behind a read hold")
	r2.RUnlock()
	rvHeld(t, w2res, "the writer once the read holds ended")
	w2.Unlock()
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR87ReaderFollowFault: a reader of a proxied session waits
// behind another session's write hold, and the getData (with its watch)
// it sends on that write node is struck (Cut: not applied; Lose: applied,
// reply lost; Drop: applied, reply swallowed on a live connection). A writer
// of a third session queues behind the reader. The write holder unlocks:
// the reader holds, the writer does not until the reader's RUnlock, and
// nothing is left at the end.
func TestReviewR87ReaderFollowFault(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			w1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			if _, err := w1.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			first := awaitChildren(t, obs, path, 1)[0]
			p, sr := r87Proxied(t)
			r := dsync.NewRWMutex(sr, path)
			f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/" + first}, action)
			rres := rvGo(ctx, r.RLockContext)
			rres = r87Struck(t, f, rres)
			awaitChildren(t, obs, path, 2)
			w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			w2res := rvGo(ctx, w2.LockContext)
			awaitChildren(t, obs, path, 3)
			rvWaits(t, rres, "reader behind the write hold")
			w1.Unlock()
			rh := rvHeld(t, rres, "reader after the write hold's Unlock")
			awaitChildren(t, obs, path, 2)
			rvWaits(t, w2res, "writer behind the read hold")
			if rh.Err() != nil {
				t.Fatalf("read hold ended: %v", context.Cause(rh))
			}
			r.RUnlock()
			rvHeld(t, w2res, "writer after RUnlock")
			w2.Unlock()
			awaitChildren(t, obs, path, 0)
			r38NoWatches(t, path, obs)
		})
	}
}

// TestReviewR87DowngradeSessionExpires: the write holder's session is
// partitioned at its downgrade's transaction (not applied) and expires. The
// downgrade returns an error, not a read hold; the write hold's context is
// canceled; a writer of another session waiting behind takes the lock;
// Unlock afterwards returns; and the RWMutex works on the next session.
func TestReviewR87DowngradeSessionExpires(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p := zktest.NewProxy(t, shared.Addr())
	x := dsync.NewRWMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(4*time.Second)), path)
	wh, err := x.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := awaitChildren(t, obs, path, 1)[0]
	w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w2res := rvGo(ctx, w2.LockContext)
	awaitChildren(t, obs, path, 2)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/" + first}, zktest.BlackHole)
	dres := rvGo(wh, x.RLockContext)
	dres = r87Struck(t, f, dres)
	p.BlackHole() // every connection from here on: the session expires
	rvHeld(t, w2res, "writer 2 after the holder's session expired")
	p.Heal()
	r := reviewRecv(t, "downgrade", dres)
	if r.err == nil {
		t.Errorf("downgrade returned a read hold (ended: %v) after its session expired; children %v",
			r.held.Err(), children(t, obs, path))
	} else {
		t.Logf("downgrade = %v", r.err)
	}
	reviewRecv(t, "write hold canceled", wh.Done())
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Errorf("children = %v; want writer 2's only", kids)
	}
	unlocked := make(chan any, 1)
	go func() {
		defer func() { unlocked <- recover() }()
		x.Unlock()
	}()
	if v := reviewRecv(t, "Unlock after the loss", unlocked); v != nil {
		t.Fatalf("Unlock after the loss panicked: %v", v)
	}
	w2.Unlock()
	rh, err := x.RLockContext(ctx)
	if err != nil {
		t.Fatalf("RLockContext on the next session = %v", err)
	}
	if rh.Err() != nil {
		t.Fatalf("read hold on the next session ended: %v", context.Cause(rh))
	}
	x.RUnlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR87MultiLockRLockerGiveUp: a MultiLock of an RLocker (path a)
// and a Mutex (path b) holds a's read side and waits at b, held by another
// session; a writer of a third session waits behind that read node. The
// MultiLock gives up (ctx): its read node goes, the writer holds, b keeps
// only its holder, and the MultiLock's RWMutex is free in its own process
// (no read hold left to wait for: TryLock after the writer).
func TestReviewR87MultiLockRLockerGiveUp(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	ra, mb := dsync.NewRWMutex(s, path+"/a"), dsync.NewMutex(s, path+"/b")
	ob := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/b")
	if _, err := ob.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	ml := dsync.NewMultiLock(mb, ra.RLocker())
	mctx, mcancel := context.WithCancel(ctx)
	mres := rvGo(mctx, ml.LockContext)
	awaitChildren(t, obs, path+"/b", 2)
	awaitChildren(t, obs, path+"/a", 1)
	wa := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path+"/a")
	wres := rvGo(ctx, wa.LockContext)
	awaitChildren(t, obs, path+"/a", 2)
	rvWaits(t, wres, "writer behind the MultiLock's read node")
	mcancel()
	if r := reviewRecv(t, "MultiLock", mres); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("MultiLock = %v; want context.Canceled", r.err)
	}
	rvHeld(t, wres, "writer after the MultiLock gave up")
	awaitChildren(t, obs, path+"/a", 1)
	awaitChildren(t, obs, path+"/b", 1)
	wa.Unlock()
	awaitChildren(t, obs, path+"/a", 0)
	if !ra.TryLock() {
		t.Fatal("TryLock of the MultiLock's RWMutex after it gave up = false")
	}
	ra.Unlock()
	ob.Unlock()
	awaitChildren(t, obs, path+"/a", 0)
	awaitChildren(t, obs, path+"/b", 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR87MultiLockMemberFailsAfterOthers: a MultiLock whose last
// member's Session is closed takes the first members, fails at the last
// with ErrClosed, and releases the others: no node is left, and the
// members are free in the process (TryLock).
func TestReviewR87MultiLockMemberFailsAfterOthers(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	closed := dial(t, []string{shared.Addr()})
	closed.Close()
	ra, sb := dsync.NewRWMutex(s, path+"/a"), dsync.NewSemaphoreMutex(s, path+"/b")
	rc := dsync.NewRWMutex(s, path+"/c")
	md := dsync.NewMutex(closed, path+"/d")
	ml := dsync.NewMultiLock(md, rc.RLocker(), sb, ra)
	_, err := ml.LockContext(ctx)
	if !errors.Is(err, zkconn.ErrClosed) {
		t.Fatalf("MultiLock with a closed member = %v; want ErrClosed", err)
	}
	for _, p := range []string{"/a", "/b/leases", "/b/locks", "/c", "/d"} {
		awaitChildren(t, obs, path+p, 0)
	}
	if !ra.TryLock() || !sb.TryLock() || !rc.TryLock() {
		t.Fatal("a member's TryLock after the MultiLock failed = false")
	}
	ra.Unlock()
	sb.Unlock()
	rc.Unlock()
}

// TestReviewR87Misuse: Unlock and RUnlock misuse panics as sync's do, with
// dsync's prefix, and changes nothing: RUnlock with only a MultiLock's
// RLocker hold (which only the MultiLock ends), Unlock after a downgrade's
// Unlock, a MultiLock's second Unlock.
func TestReviewR87Misuse(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path+"/a")
	panics := func(what string, f func()) {
		t.Helper()
		var v any
		func() {
			defer func() { v = recover() }()
			f()
		}()
		if s, _ := v.(string); !strings.HasPrefix(s, "dsync: ") {
			t.Errorf("%s: panic %v; want one with the dsync: prefix", what, v)
		}
	}
	panics("RUnlock of an unlocked RWMutex", rw.RUnlock)
	panics("Unlock of an unlocked RWMutex", rw.Unlock)
	ml := dsync.NewMultiLock(rw.RLocker(), dsync.NewMutex(s, path+"/b"))
	held, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	panics("RUnlock with only a MultiLock's read hold", rw.RUnlock)
	panics("RLocker().Unlock with only a MultiLock's read hold", rw.RLocker().Unlock)
	if held.Err() != nil || len(children(t, obs, path+"/a")) != 1 {
		t.Fatalf("after RUnlock's panic: hold %v, children %v", context.Cause(held), children(t, obs, path+"/a"))
	}
	ml.Unlock()
	panics("MultiLock's second Unlock", ml.Unlock)
	wh, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.RLockContext(wh); err != nil {
		t.Fatal(err)
	}
	rw.Unlock()
	panics("Unlock after the downgrade's Unlock", rw.Unlock)
	rw.RUnlock()
	panics("RUnlock after the downgrade's RUnlock", rw.RUnlock)
	awaitChildren(t, obs, path+"/a", 0)
	awaitChildren(t, obs, path+"/b", 0)
}

// TestReviewR87OperatorDeletesWaitingNodes: an operator deletes a waiting
// node of an RWMutex's queue (a reader's, a writer's followed by a writer
// of another session): the one whose node went queues again at the back,
// and no two holders overlap: each holds in the new order once the ones
// ahead release.
func TestReviewR87OperatorDeletesWaitingNodes(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"reader", "writer"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			rw := func() *dsync.RWMutex { return dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path) }
			w1, x, w3 := rw(), rw(), rw()
			if _, err := w1.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			n1 := awaitChildren(t, obs, path, 1)[0]
			lock := x.LockContext
			if kind == "reader" {
				lock = x.RLockContext
			}
			xres := rvGo(ctx, lock)
			nx := r87Other(t, awaitChildren(t, obs, path, 2), n1)
			w3res := rvGo(ctx, w3.LockContext)
			r87Other(t, awaitChildren(t, obs, path, 3), n1, nx)
			if err := obs.Delete(path+"/"+nx, -1); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 3) // x queued again, behind w3
			rvWaits(t, xres, "x after its node's deletion")
			w1.Unlock()
			rvHeld(t, w3res, "w3 after w1's Unlock")
			rvWaits(t, xres, "x behind w3")
			w3.Unlock()
			rvHeld(t, xres, "x after w3's Unlock")
			if kind == "reader" {
				x.RUnlock()
			} else {
				x.Unlock()
			}
			awaitChildren(t, obs, path, 0)
			r38NoWatches(t, path, obs)
		})
	}
}

// TestReviewR87DowngradeWatchFault: a downgrade's transaction (its read
// node's create with the write to the write node), or its watch on the new
// read node (the getData after that transaction), is struck: Cut (not
// applied), Lose (applied, reply lost), Drop (applied, reply swallowed on a
// live connection); under either LossPolicy (LostOnExpiry: the downgrade
// succeeds). For the watch, two Pass faults armed first on the write node
// take the downgrade's read of it and the write hold's rewatch after the
// downgrade's write, so that the third strikes the read node's watch. Whatever the
// downgrade returns, no read node is left once it has failed or its hold
// has ended, and a writer of another session waiting behind holds once the
// write hold is unlocked (and the read hold, if any, RUnlocked).
func TestReviewR87DowngradeWatchFault(t *testing.T) {
	t.Parallel()
	type point struct {
		action zktest.Action
		policy dsync.LossPolicy
		multi  bool // strike the downgrade's transaction rather than its watch
	}
	var points []point
	for _, multi := range []bool{false, true} {
		for _, policy := range []dsync.LossPolicy{dsync.LostOnSuspension, dsync.LostOnExpiry} {
			for _, action := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop} {
				points = append(points, point{action, policy, multi})
			}
		}
	}
	for _, tc := range points {
		action := tc.action
		t.Run(fmt.Sprintf("%v/policy%d/multi=%v", action, tc.policy, tc.multi), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			p, sx := r87Proxied(t)
			x := dsync.NewRWMutex(sx, path,
				dsync.WithLossPolicy(tc.policy))
			wh, err := x.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first := awaitChildren(t, obs, path, 1)[0]
			w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			w2res := rvGo(ctx, w2.LockContext)
			second := r87Other(t, awaitChildren(t, obs, path, 2), first)
			var f *zktest.Fault
			if tc.multi {
				f = p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/" + first}, action)
			} else {
				p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/" + first}, zktest.Pass)
				p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/" + first}, zktest.Pass)
				f = p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}, action)
			}
			dres := rvGo(wh, x.RLockContext)
			dres = r87Struck(t, f, dres)
			r := reviewRecv(t, "downgrade", dres)
			t.Logf("downgrade = %v; write hold: %v", r.err, context.Cause(wh))
			if r.err == nil {
				t.Logf("read hold: %v", context.Cause(r.held))
			}
			rvWaits(t, w2res, "writer 2")
			x.Unlock()
			if r.err == nil {
				if r.held.Err() == nil {
					rvWaits(t, w2res, "writer 2 behind the downgrade's read hold")
				}
				x.RUnlock()
			}
			rvHeld(t, w2res, "writer 2")
			if kids := children(t, obs, path); len(kids) != 1 || kids[0] != second {
				t.Errorf("children while writer 2 holds = %v; want %s only", kids, second)
			}
			w2.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// r87Bound: the slack a call given a ctx with a deadline may take past it.
const r87Bound = 2 * time.Second

// TestReviewR87CtxBoundsBlackHoled: calls whose request is black-holed
// (the connection deaf from it on, not noticed within the test: a 20s
// session) return ctx's error within r87Bound of its deadline, and once the
// partition heals their nodes go: a reader's create (with its listing), a
// reader's listing again after the writer it followed gave up, a MultiLock's
// RLocker member's create after its write member was taken. Serial: it
// bounds durations.
func TestReviewR87CtxBoundsBlackHoled(t *testing.T) {
	for _, tc := range []string{"create", "relist", "multi"} {
		t.Run(tc, func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			p := zktest.NewProxy(t, shared.Addr())
			s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
			w1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path+"/r")
			if _, err := w1.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path+"/r", 1)
			x := dsync.NewRWMutex(s, path+"/r")
			var (
				f    *zktest.Fault
				call func(context.Context) (context.Context, error)
				keep = 1 // nodes left at path/r once the call has failed
			)
			switch tc {
			case "create":
				f = p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/r/", Prefix: true}, zktest.BlackHole)
				call = x.RLockContext
			case "relist":
				w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path+"/r")
				w2ctx, w2cancel := context.WithCancel(ctx)
				defer w2cancel()
				w2res := rvGo(w2ctx, w2.LockContext)
				awaitChildren(t, obs, path+"/r", 2)
				res := make(chan rvResult, 1)
				// The reader waits behind w1 and w2 (two writers: it
				// lists again when w2 goes).
				rctx, rcancel := context.WithCancel(context.Background())
				defer rcancel()
				go func() {
					held, err := x.RLockContext(rctx)
					res <- rvResult{held, err}
				}()
				awaitChildren(t, obs, path+"/r", 3)
				awaitWatchOf(t, shared, path+"/r/"+rvLastWriter(t, x).Node, s)
				f = p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/r"}, zktest.BlackHole)
				w2cancel()
				reviewRecv(t, "w2 gives up", w2res)
				reviewRecv(t, "the reader's listing black-holed", f.Struck())
				start := time.Now()
				time.AfterFunc(time.Second, rcancel)
				r := reviewRecv(t, "reader", res)
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("reader = %v; want context.Canceled", r.err)
				}
				if d := time.Since(start); d > time.Second+r87Bound {
					t.Errorf("reader returned %v after its listing was black-holed; its ctx ended after 1s", d)
				}
				p.Heal()
				awaitChildren(t, obs, path+"/r", keep)
				w1.Unlock()
				awaitChildren(t, obs, path+"/r", 0)
				return
			case "multi":
				wa := dsync.NewRWMutex(s, path+"/a")
				ml := dsync.NewMultiLock(x.RLocker(), wa)
				f = p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/r/", Prefix: true}, zktest.BlackHole)
				call = ml.LockContext
				defer awaitChildren(t, obs, path+"/a", 0)
			}
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			defer ccancel()
			start := time.Now()
			res := rvGo(cctx, call)
			reviewRecv(t, "the fault", f.Struck())
			r := reviewRecv(t, tc, res)
			if !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("%s = %v; want context.DeadlineExceeded", tc, r.err)
			}
			if d := time.Since(start); d > time.Second+r87Bound {
				t.Errorf("%s returned after %v; its ctx ended after 1s", tc, d)
			}
			p.Heal()
			awaitChildren(t, obs, path+"/r", keep)
			w1.Unlock()
			awaitChildren(t, obs, path+"/r", 0)
		})
	}
}

// TestReviewR87WriterGivesUpAtCreate: a writer's create (with its listing)
// is struck (Lose: applied, reply lost; Drop: applied, reply swallowed on a
// live connection; Cut: not applied) behind a read hold of another session,
// and the writer gives up (ctx) at once. A reader of a third session queued
// behind its node, if the node was made, holds once that node is deleted;
// no node of the writer is left, and the writer's RWMutex takes the write
// lock afterwards (once the read holds end).
func TestReviewR87WriterGivesUpAtCreate(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Lose, zktest.Drop, zktest.Cut} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			r0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			if _, err := r0.RLockContext(ctx); err != nil {
				t.Fatal(err)
			}
			n0 := awaitChildren(t, obs, path, 1)[0]
			p, sw := r87Proxied(t)
			w := dsync.NewRWMutex(sw, path)
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/", Prefix: true}, action)
			wctx, wcancel := context.WithCancel(ctx)
			wres := rvGo(wctx, w.LockContext)
			wres = r87Struck(t, f, wres)
			made := action != zktest.Cut
			var r1res <-chan rvResult
			r1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			if made {
				awaitChildren(t, obs, path, 2)
				r1res = rvGo(ctx, r1.RLockContext)
				awaitChildren(t, obs, path, 3)
				rvWaits(t, r1res, "reader behind the writer's node")
			}
			wcancel()
			if r := reviewRecv(t, "writer", wres); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("writer = %v; want context.Canceled", r.err)
			}
			if made {
				rvHeld(t, r1res, "reader once the writer gave up")
				awaitChildren(t, obs, path, 2)
				r1.RUnlock()
			}
			if kids := awaitChildren(t, obs, path, 1); kids[0] != n0 {
				t.Fatalf("children = %v; want the read hold's %s only", kids, n0)
			}
			wres = rvGo(ctx, w.LockContext)
			awaitChildren(t, obs, path, 2)
			rvWaits(t, wres, "writer behind the read hold")
			r0.RUnlock()
			rvHeld(t, wres, "writer after RUnlock")
			w.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewR87MultiLockCutWhileHeld: a MultiLock of an RWMutex's write
// side, another's RLocker and a SemaphoreMutex, all on one proxied Session,
// holds; its connection is cut. The hold context is canceled with a cause
// wrapping ErrLockLost; Unlock returns normally; every node goes once the
// Session reconnects; and the MultiLock, and each member on its own (the
// RLocker's RWMutex for writing too: no read hold of a MultiLock left), take
// the locks again.
func TestReviewR87MultiLockCutWhileHeld(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r87Proxied(t)
	wa, rb, sc := dsync.NewRWMutex(s, path+"/a"), dsync.NewRWMutex(s, path+"/b"), dsync.NewSemaphoreMutex(s, path+"/c")
	ml := dsync.NewMultiLock(sc, rb.RLocker(), wa)
	held, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	reviewRecv(t, "hold context canceled", held.Done())
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) {
		t.Errorf("cause = %v; want ErrLockLost", cause)
	}
	ml.Unlock()
	for _, q := range []string{"/a", "/b", "/c/leases", "/c/locks"} {
		awaitChildren(t, obs, path+q, 0)
	}
	if _, err := ml.LockContext(ctx); err != nil {
		t.Fatalf("MultiLock after the loss = %v", err)
	}
	ml.Unlock()
	if !wa.TryLock() || !rb.TryLock() || !sc.TryLock() {
		t.Fatal("a member's TryLock after the MultiLock's Unlock = false")
	}
	wa.Unlock()
	rb.Unlock()
	sc.Unlock()
	for _, q := range []string{"/a", "/b", "/c/leases", "/c/locks"} {
		awaitChildren(t, obs, path+q, 0)
	}
}

// TestReviewR87LocalWriterGivesUpLocalReadersProceed: within one process
// (one RWMutex), readers wait while its writer waits behind another
// session's read hold; the writer gives up (ctx): the readers then hold,
// beside that read hold, and a writer of another session queued meanwhile
// behind the writer's node holds only after every read hold ended.
func TestReviewR87LocalWriterGivesUpLocalReadersProceed(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	r0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := r0.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 1)
	x := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, wcancel := context.WithCancel(ctx)
	wres := rvGo(wctx, x.LockContext)
	awaitChildren(t, obs, path, 2)
	w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w2res := rvGo(ctx, w2.LockContext)
	awaitChildren(t, obs, path, 3)
	res1, res2 := rvGo(ctx, x.RLockContext), rvGo(ctx, x.RLockContext)
	if x.TryRLock() {
		t.Fatal("TryRLock while a writer of the process waits = true")
	}
	rvWaits(t, res1, "reader 1 behind the process's waiting writer")
	rvWaits(t, res2, "reader 2 behind the process's waiting writer")
	wcancel()
	if r := reviewRecv(t, "writer", wres); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("writer = %v; want context.Canceled", r.err)
	}
	// The readers queue behind w2 now (it came first): they wait for it.
	awaitChildren(t, obs, path, 4)
	rvWaits(t, res1, "reader 1 behind w2")
	r0.RUnlock()
	rvHeld(t, w2res, "w2 once r0 ended")
	rvWaits(t, res1, "reader 1 behind w2's hold")
	w2.Unlock()
	rvHeld(t, res1, "reader 1")
	rvHeld(t, res2, "reader 2")
	x.RUnlock()
	x.RUnlock()
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR87MultiLockMemberTokens: "Each member's Token gives its
// fencing token while the MultiLock holds it" (MultiLock's doc), for each
// kind of member: a Mutex, a SemaphoreMutex, an RWMutex's write side, an
// RWMutex's RLocker (through the RWMutex's Token, the only one it has).
// Likewise a revocation of a member is learnt through the member's
// Revoked ("ask its members", Revoked's doc): for the RLocker, the
// RWMutex's.
func TestReviewR87MultiLockMemberTokens(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	ma, sb := dsync.NewMutex(s, path+"/a"), dsync.NewSemaphoreMutex(s, path+"/b")
	wc, rd := dsync.NewRWMutex(s, path+"/c"), dsync.NewRWMutex(s, path+"/d", dsync.Revocable())
	ml := dsync.NewMultiLock(ma, sb, wc, rd.RLocker())
	if _, err := ml.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer ml.Unlock()
	for _, m := range []struct {
		name, node string
		token      func() int64
	}{
		{"Mutex", path + "/a", ma.Token},
		{"SemaphoreMutex", path + "/b/leases", sb.Token},
		{"RWMutex (write)", path + "/c", wc.Token},
		{"RWMutex (RLocker)", path + "/d", rd.Token},
	} {
		kids := children(t, obs, m.node)
		if len(kids) != 1 {
			t.Fatalf("%s: children %v", m.name, kids)
		}
		want := mustCzxid(t, obs, m.node+"/"+kids[0])
		if got := m.token(); got != want {
			t.Errorf("%s member's Token = %d; want its node's czxid %d", m.name, got, want)
		}
	}
	node := path + "/d/" + children(t, obs, path+"/d")[0]
	if err := dsync.Revoke(ctx, s, node); err != nil {
		t.Fatalf("Revoke(%s) = %v", node, err)
	}
	revoked := rd.Revoked()
	if revoked == nil {
		t.Fatal("RWMutex.Revoked while a MultiLock holds its RLocker = nil: a revocation request cannot be learnt")
	}
	reviewRecv(t, "the RLocker member's Revoked", revoked)
}

// TestReviewR87MultiLockGiveUpAtLease: a MultiLock of an RLocker (a) and a
// SemaphoreMutex (b) takes a, and at b (held by another session) its lease
// create is struck: Cut, Lose, Drop or BlackHole; its ctx ends then. It
// returns context.Canceled within r87Bound; once the partition heals, no
// node of it is left at a, b/leases or b/locks, and a writer of another
// session queued behind its read node at a holds; after b's release the
// MultiLock takes both. Serial: it bounds a duration.
func TestReviewR87MultiLockGiveUpAtLease(t *testing.T) {
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop, zktest.BlackHole} {
		t.Run(action.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			other := dial(t, []string{shared.Addr()})
			ob := dsync.NewSemaphoreMutex(other, path+"/b")
			if _, err := ob.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			holder := awaitChildren(t, obs, path+"/b/leases", 1)[0]
			p, s := r87Proxied(t)
			ra, sb := dsync.NewRWMutex(s, path+"/a"), dsync.NewSemaphoreMutex(s, path+"/b")
			ml := dsync.NewMultiLock(sb, ra.RLocker())
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/b/leases/", Prefix: true}, action)
			lctx, lcancel := context.WithCancel(ctx)
			res := rvGo(lctx, ml.LockContext)
			res = r87Struck(t, f, res)
			wa := dsync.NewRWMutex(other, path+"/a")
			wres := rvGo(ctx, wa.LockContext)
			awaitChildren(t, obs, path+"/a", 2)
			lcancel()
			start := time.Now()
			if r := reviewRecv(t, "MultiLock", res); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("MultiLock = %v; want context.Canceled", r.err)
			}
			if d := time.Since(start); d > r87Bound {
				t.Errorf("MultiLock returned %v after its ctx ended", d)
			}
			p.Heal()
			rvHeld(t, wres, "writer at a once the MultiLock gave up")
			awaitChildren(t, obs, path+"/a", 1)
			if kids := awaitChildren(t, obs, path+"/b/leases", 1); kids[0] != holder {
				t.Errorf("leases = %v; want the holder's %s only", kids, holder)
			}
			awaitChildren(t, obs, path+"/b/locks", 0)
			wa.Unlock()
			ob.Unlock()
			if _, err := ml.LockContext(ctx); err != nil {
				t.Fatalf("MultiLock after b's release = %v", err)
			}
			ml.Unlock()
			awaitChildren(t, obs, path+"/a", 0)
			awaitChildren(t, obs, path+"/b/leases", 0)
			awaitChildren(t, obs, path+"/b/locks", 0)
		})
	}
}

// TestReviewR87MultiLockGiveUpAtEachMember: a MultiLock of a Mutex (a), an
// RLocker (b), an RWMutex's write side (c) and a SemaphoreMutex (d) waits
// at each member in turn, held by another session (b by a writer), and
// gives up (ctx): it returns context.Canceled, and only the other
// session's node is left at every path; once that releases, the MultiLock
// takes all four.
func TestReviewR87MultiLockGiveUpAtEachMember(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"a", "b", "c", "d"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			s, other := dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()})
			ma, rb := dsync.NewMutex(s, path+"/a"), dsync.NewRWMutex(s, path+"/b")
			wc, sd := dsync.NewRWMutex(s, path+"/c"), dsync.NewSemaphoreMutex(s, path+"/d")
			ml := dsync.NewMultiLock(sd, wc, rb.RLocker(), ma)
			var unlock func()
			node := path + "/" + at
			switch at {
			case "a":
				m := dsync.NewMutex(other, node)
				_, err := m.LockContext(ctx)
				if err != nil {
					t.Fatal(err)
				}
				unlock = m.Unlock
			case "b", "c":
				m := dsync.NewRWMutex(other, node)
				_, err := m.LockContext(ctx)
				if err != nil {
					t.Fatal(err)
				}
				unlock = m.Unlock
			case "d":
				m := dsync.NewSemaphoreMutex(other, node)
				_, err := m.LockContext(ctx)
				if err != nil {
					t.Fatal(err)
				}
				unlock = m.Unlock
				node += "/leases"
			}
			lctx, lcancel := context.WithCancel(ctx)
			res := rvGo(lctx, ml.LockContext)
			if at == "d" {
				awaitChildren(t, obs, path+"/d/locks", 1) // its lock node: it waits for the lease
			} else {
				awaitChildren(t, obs, node, 2)
			}
			rvWaits(t, res, "MultiLock")
			lcancel()
			if r := reviewRecv(t, "MultiLock", res); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("MultiLock = %v; want context.Canceled", r.err)
			}
			for _, q := range []string{"/a", "/b", "/c", "/d/leases", "/d/locks"} {
				want := 0
				if path+q == node {
					want = 1
				}
				awaitChildren(t, obs, path+q, want)
			}
			unlock()
			if _, err := ml.LockContext(ctx); err != nil {
				t.Fatalf("MultiLock after the release = %v", err)
			}
			ml.Unlock()
			for _, q := range []string{"/a", "/b", "/c", "/d/leases", "/d/locks"} {
				awaitChildren(t, obs, path+q, 0)
			}
		})
	}
}

// TestReviewR87MultiLockMemberSessionClosed: a MultiLock over two Sessions
// (an RWMutex's write side on one, an RLocker and a SemaphoreMutex on the
// other). Closing the first Session while the MultiLock holds cancels the
// hold (ErrLockLost) and Unlock returns, leaving no node; a LockContext
// afterwards takes the other Session's members, fails at the closed one
// with ErrClosed, and leaves no node.
func TestReviewR87MultiLockMemberSessionClosed(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s1 := dial(t, []string{shared.Addr()})
	s2 := dial(t, []string{shared.Addr()})
	wa := dsync.NewRWMutex(s1, path+"/a")
	rb, sc := dsync.NewRWMutex(s2, path+"/b"), dsync.NewSemaphoreMutex(s2, path+"/c")
	ml := dsync.NewMultiLock(sc, rb.RLocker(), wa)
	held, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	reviewRecv(t, "hold canceled", held.Done())
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) {
		t.Errorf("cause = %v; want ErrLockLost", cause)
	}
	unlocked := make(chan any, 1)
	go func() {
		defer func() { unlocked <- recover() }()
		ml.Unlock()
	}()
	if v := reviewRecv(t, "Unlock", unlocked); v != nil {
		t.Fatalf("Unlock after a member's Session closed panicked: %v", v)
	}
	for _, q := range []string{"/a", "/b", "/c/leases", "/c/locks"} {
		awaitChildren(t, obs, path+q, 0)
	}
	if _, err := ml.LockContext(ctx); !errors.Is(err, zkconn.ErrClosed) {
		t.Errorf("LockContext with a member's Session closed = %v; want ErrClosed", err)
	}
	for _, q := range []string{"/a", "/b", "/c/leases", "/c/locks"} {
		awaitChildren(t, obs, path+q, 0)
	}
}

// TestReviewR87WriterGiveUpDeleteStruck: a writer of a proxied Session
// waits behind a read hold, with readers of other Sessions behind it, and
// gives up (ctx); the delete of its node is struck (Cut: not applied, sent
// again after the reconnect; Lose: applied, reply lost). The readers hold
// once the node is gone, and no node of the writer is left.
func TestReviewR87WriterGiveUpDeleteStruck(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			r0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			if _, err := r0.RLockContext(ctx); err != nil {
				t.Fatal(err)
			}
			n0 := awaitChildren(t, obs, path, 1)[0]
			p, sw := r87Proxied(t)
			w := dsync.NewRWMutex(sw, path)
			wctx, wcancel := context.WithCancel(ctx)
			wres := rvGo(wctx, w.LockContext)
			nw := r87Other(t, awaitChildren(t, obs, path, 2), n0)
			r1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			r1res := rvGo(ctx, r1.RLockContext)
			awaitChildren(t, obs, path, 3)
			f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/" + nw}, action)
			wcancel()
			if r := reviewRecv(t, "writer", wres); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("writer = %v; want context.Canceled", r.err)
			}
			reviewRecv(t, "the delete struck", f.Struck())
			rvHeld(t, r1res, "reader behind the writer that gave up")
			if kids := awaitChildren(t, obs, path, 2); slices.Contains(kids, nw) {
				t.Fatalf("children = %v: the writer's node %s is left", kids, nw)
			}
			r1.RUnlock()
			r0.RUnlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewR87DowngradeUnlockDeleteStruck: after a downgrade, the write
// hold's Unlock has the delete of the write node struck (Cut: not applied,
// sent again after the reconnect; Lose: applied, reply lost) while a
// writer of another session waits behind. The writer does not hold while
// the downgrade's read node is there (its hold lost with the connection or
// not), and holds once it is RUnlocked; nothing of the downgrader is left.
func TestReviewR87DowngradeUnlockDeleteStruck(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			p, sx := r87Proxied(t)
			x := dsync.NewRWMutex(sx, path)
			wh, err := x.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n1 := awaitChildren(t, obs, path, 1)[0]
			w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			w2res := rvGo(ctx, w2.LockContext)
			n2 := r87Other(t, awaitChildren(t, obs, path, 2), n1)
			rh, err := x.RLockContext(wh)
			if err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 3)
			f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/" + n1}, action)
			x.Unlock()
			reviewRecv(t, "the delete struck", f.Struck())
			awaitChildren(t, obs, path, 2) // the write node goes (again, after a Cut)
			rvWaits(t, w2res, "writer behind the downgrade's read node")
			t.Logf("read hold after the fault: %v", context.Cause(rh))
			x.RUnlock()
			rvHeld(t, w2res, "writer after RUnlock")
			if kids := awaitChildren(t, obs, path, 1); kids[0] != n2 {
				t.Fatalf("children = %v; want the writer's %s only", kids, n2)
			}
			w2.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}
