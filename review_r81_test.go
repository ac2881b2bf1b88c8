package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r81Line is an r66Line with a fourth waiter Y (session sy, through proxy
// py) behind W, following W as a deep waiter (W's node and its signal
// watched).
type r81Line struct {
	*r66Line
	nodeY string
	py    *zktest.Proxy
	sy    *zkconn.Session
	y     *dsync.Mutex
	ydone chan r66Res
	idY   int64
}

func r81Mutexes(t *testing.T, ctx context.Context, opts ...zkconn.Option) *r81Line {
	return r81MutexesOn(t, ctx, false, opts...)
}

// r81MutexesOn is r81Mutexes; with same set, Y is on W's session (its
// watch on W's node shared with W's own).
func r81MutexesOn(t *testing.T, ctx context.Context, same bool, opts ...zkconn.Option) *r81Line {
	l := &r81Line{r66Line: r66Mutexes(t, ctx, false, opts...)}
	if same {
		l.py, l.sy = l.p, l.sw
	} else {
		l.py = zktest.NewProxy(t, shared.Addr())
		l.sy = dial(t, []string{l.py.Addr()})
	}
	l.y = dsync.NewMutex(l.sy, l.path)
	l.ydone = make(chan r66Res, 1)
	go func() { h, err := l.y.LockContext(ctx); l.ydone <- r66Res{h, err} }()
	l.nodeY = l.path + "/" + orderedNames(awaitChildren(t, l.obs, l.path, 4))[3]
	l.idY = mustSessionOf(t, l.obs, l.nodeY)
	awaitWatch(t, shared, l.nodeW+".handoff", l.idY)
	awaitWatch(t, shared, l.nodeW, l.idY)
	awaitWatch(t, shared, l.nodeY, l.idY)
	return l
}

// yQuiet checks that Y has not returned, once what the server sent Y's
// session before now is in.
func (l *r81Line) yQuiet(t *testing.T, ctx context.Context, while string) {
	t.Helper()
	r66Flush(t, ctx, l.sy, l.path)
	select {
	case r := <-l.ydone:
		t.Fatalf("Y returned (%v) while %s", r.err, while)
	default:
	}
}

func (l *r81Line) yHolds(t *testing.T) r66Res {
	t.Helper()
	select {
	case r := <-l.ydone:
		if r.err != nil {
			t.Fatalf("Y: %v", r.err)
		}
		if r.held.Err() != nil {
			t.Fatalf("Y's hold ended at once: %v", context.Cause(r.held))
		}
		return r
	case <-time.After(45 * time.Second):
		t.Fatalf("Y never held; children %v, watches %v", children(t, l.obs, l.path), watchesUnder(t, l.path, l.obs))
	}
	return r66Res{}
}

// empty is r66Line's, with Y's session flushed too.
func (l *r81Line) empty(t *testing.T, ctx context.Context) {
	t.Helper()
	awaitChildren(t, l.obs, l.path, 0)
	r66Flush(t, ctx, l.sy, l.path)
	l.r66Line.empty(t, ctx)
}

// noWatchOnX fails if a session other than obs still watches X's node or
// its signal: X is gone, and its signal was sent with its delete.
func (l *r81Line) noWatchOnX(t *testing.T) {
	t.Helper()
	left := watchesUnder(t, l.path, l.obs)
	if slices.Contains(left, l.nodeX) || slices.Contains(left, l.nodeX+".handoff") {
		t.Errorf("X is gone, but watches on it are left: %v", left)
	}
}

// wThenY checks W's LockContext result rw: W holds, Y waits while it does,
// and no watch on X is left; then W releases, Y holds and releases, and
// nothing is left.
func (l *r81Line) wThenY(t *testing.T, ctx context.Context, rw r66Res) {
	t.Helper()
	if rw.err != nil {
		t.Fatalf("W: %v", rw.err)
	}
	if rw.held.Err() != nil {
		t.Fatalf("W's hold ended at once: %v", context.Cause(rw.held))
	}
	l.yQuiet(t, ctx, "W holds")
	r66Flush(t, ctx, l.sw, l.path)
	l.noWatchOnX(t)
	l.w.Unlock()
	l.yHolds(t)
	l.y.Unlock()
	l.empty(t, ctx)
}

// yThenW checks that W waits while Y holds (ry); then Y releases, W holds
// and releases, and nothing is left.
func (l *r81Line) yThenW(t *testing.T, ctx context.Context, ry r66Res) {
	t.Helper()
	r66Flush(t, ctx, l.sw, l.path)
	select {
	case r := <-l.wdone:
		t.Fatalf("W returned (%v) while Y holds (Y's hold err %v)", r.err, ry.held.Err())
	default:
	}
	l.y.Unlock()
	if rw := <-l.wdone; rw.err != nil {
		t.Fatalf("W: %v", rw.err)
	}
	l.w.Unlock()
	l.empty(t, ctx)
}

// r81RaceBehind: A released, X holds, W follows X as a deep waiter and Y
// follows W. A revocation request into X makes W take back X's signal (its
// multi struck with action) and X releases: at once (strikeFirst false, the
// release racing W's reading of the request) or once the take-back has
// struck. W must hold once X is gone, Y must not hold while W does, no
// watch on X may be left once W holds, and nothing is left at the end.
func r81RaceBehind(t *testing.T, action zktest.Action, strikeFirst, same bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r81MutexesOn(t, ctx, same)
	l.a.Unlock()
	if rx := <-l.xdone; rx.err != nil {
		t.Fatalf("X: %v", rx.err)
	}
	l.yQuiet(t, ctx, "X holds") // before the strike is armed
	f := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, action)
	if err := dsync.Revoke(ctx, l.sa, l.nodeX); err != nil {
		t.Fatal(err)
	}
	struck := false
	if strikeFirst {
		select {
		case <-f.Struck():
			struck = true
		case <-time.After(30 * time.Second):
			t.Fatalf("W's take-back never came")
		}
		select {
		case r := <-l.wdone:
			t.Fatalf("W returned (%v) while X holds", r.err)
		default:
		}
	}
	l.x.Unlock()
	var rw r66Res
	select {
	case rw = <-l.wdone:
	case <-time.After(45 * time.Second):
		t.Fatalf("W never held after X released; children %v, watches %v", children(t, l.obs, l.path), watchesUnder(t, l.path, l.obs))
	}
	if !strikeFirst {
		select {
		case <-f.Struck():
			struck = true
		default:
			f.Disarm()
		}
	}
	t.Logf("take-back struck: %v", struck)
	l.wThenY(t, ctx, rw)
}

// TestReviewR81RaceBehind runs r81RaceBehind. Serial, as
// r67TakeBackRacesHandoff is: load makes X's release win its race more often.
func TestReviewR81RaceBehind(t *testing.T) {
	for _, a := range []zktest.Action{zktest.Pass, zktest.Cut, zktest.Lose} { // Drop waits ~11 s for a ping: Lose covers an applied, unanswered take-back
		for _, sf := range []bool{false, true} {
			for _, same := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v-strikeFirst%v-same%v", a, sf, same), func(t *testing.T) { r81RaceBehind(t, a, sf, same) })
			}
		}
	}
}

// r81GiveUpMidTakeBack: as r81RaceBehind, but W's ctx ends the moment its
// take-back has struck (action), while X holds. W returns ctx.Err(); Y,
// now behind X only, must not hold while X does, and holds once X
// releases; nothing is left.
func r81GiveUpMidTakeBack(t *testing.T, action zktest.Action) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r81Mutexes(t, ctx)
	rx, f := l.revokeHeldX(t, ctx, action)
	select {
	case <-f.Struck():
	case <-time.After(30 * time.Second):
		t.Fatalf("W's take-back never came")
	}
	start := time.Now()
	l.wcancel()
	select {
	case r := <-l.wdone:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("W: %v; want context.Canceled", r.err)
		}
	case <-time.After(5 * time.Second): // a ping's reply is some 6 s away: an overrun waits for it
		t.Fatalf("W's LockContext still running 5 s after its ctx ended")
	}
	t.Logf("W returned %v after its ctx ended", time.Since(start))
	l.p.Heal()
	awaitChildren(t, l.obs, l.path, 2) // X and Y
	l.yQuiet(t, ctx, "X holds")
	if rx.held.Err() != nil {
		t.Fatalf("X's hold ended: %v", context.Cause(rx.held))
	}
	l.x.Unlock()
	l.yHolds(t)
	l.y.Unlock()
	l.empty(t, ctx)
}

// TestReviewR81GiveUpMidTakeBack runs r81GiveUpMidTakeBack; serial, as it
// bounds how long W takes to return.
func TestReviewR81GiveUpMidTakeBack(t *testing.T) {
	for _, a := range []zktest.Action{zktest.Pass, zktest.Cut, zktest.Lose, zktest.Drop, zktest.BlackHole} {
		t.Run(a.String(), func(t *testing.T) { r81GiveUpMidTakeBack(t, a) })
	}
}

// TestReviewR81OwnNodeDeletedBehind: W's take-back of X's signal is
// black-holed; an operator deletes W's node, and X releases, while it is
// out. Y (behind W) must hold next, alone: W, queued again behind Y, must
// not hold while Y does; nothing is left.
func TestReviewR81OwnNodeDeletedBehind(t *testing.T) {
	t.Parallel()
	for _, same := range []bool{false, true} {
		t.Run(fmt.Sprintf("same%v", same), func(t *testing.T) { r81OwnNodeDeletedBehind(t, same) })
	}
}

func r81OwnNodeDeletedBehind(t *testing.T, same bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r81MutexesOn(t, ctx, same, zkconn.WithSessionTimeout(20*time.Second))
	_, f := l.revokeHeldX(t, ctx, zktest.BlackHole)
	zktest.AwaitStruck(t, f)
	if err := l.obs.Delete(l.nodeW, -1); err != nil {
		t.Fatal(err)
	}
	l.x.Unlock()
	if same {
		awaitChildren(t, l.obs, l.path, 1) // Y's, deaf as W is
		l.p.Heal()
	}
	ry := l.yHolds(t)
	l.p.Heal()
	kids := awaitChildren(t, l.obs, l.path, 2) // Y, and W queued again
	if slices.Contains(kids, l.nodeW[len(l.path)+1:]) {
		t.Fatalf("W's node is back: %v", kids)
	}
	// No watch is left either: the one the design allows per operator
	// deletion (W's on X's signal) was set on the connection Heal closed.
	l.yThenW(t, ctx, ry)
}

// TestReviewR81ReleaseWhileTakeBackDeaf: as r81RaceBehind, but W's
// take-back is black-holed (W deaf, its connection up), and X releases and
// is gone before W's connection is closed (Heal): W learns of X's release
// only on the next connection, where its watch on X's signal is not set
// again. W must hold, Y only after W, and nothing is left.
func TestReviewR81ReleaseWhileTakeBackDeaf(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r81Mutexes(t, ctx, zkconn.WithSessionTimeout(20*time.Second))
	_, f := l.revokeHeldX(t, ctx, zktest.BlackHole)
	zktest.AwaitStruck(t, f)
	l.x.Unlock()
	awaitChildren(t, l.obs, l.path, 2) // W and Y
	l.yQuiet(t, ctx, "W is first")
	l.p.Heal()
	var rw r66Res
	select {
	case rw = <-l.wdone:
	case <-time.After(45 * time.Second):
		t.Fatalf("W never held; children %v, watches %v", children(t, l.obs, l.path), watchesUnder(t, l.path, l.obs))
	}
	l.wThenY(t, ctx, rw)
}

// r81ReleaseThenGiveUp: W's take-back of X's signal gets action; X
// releases, and W's ctx ends, both while it is out. W either holds or
// returns ctx.Err(); Y must not hold while W does, and holds after; nothing
// is left.
func r81ReleaseThenGiveUp(t *testing.T, action zktest.Action) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r81Mutexes(t, ctx, zkconn.WithSessionTimeout(20*time.Second))
	_, f := l.revokeHeldX(t, ctx, action)
	zktest.AwaitStruck(t, f)
	l.x.Unlock()
	awaitChildren(t, l.obs, l.path, 2) // W and Y
	l.wcancel()
	l.p.Heal()
	rw := <-l.wdone
	switch {
	case rw.err == nil:
		t.Logf("W held")
		if rw.held.Err() != nil {
			t.Fatalf("W's hold ended at once: %v", context.Cause(rw.held))
		}
		l.yQuiet(t, ctx, "W holds")
		l.w.Unlock()
	case errors.Is(rw.err, context.Canceled):
		t.Logf("W gave up")
	default:
		t.Fatalf("W: %v", rw.err)
	}
	l.yHolds(t)
	l.y.Unlock()
	l.empty(t, ctx)
}

func TestReviewR81ReleaseThenGiveUp(t *testing.T) {
	t.Parallel()
	for _, a := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop, zktest.BlackHole} {
		t.Run(a.String(), func(t *testing.T) { r81ReleaseThenGiveUp(t, a) })
	}
}

// TestReviewR81TakeBackAfterOwnNodeDeletedFiresNobody: A holds, X waits, W
// follows X as a deep waiter, Y follows W. A revocation request into X makes
// W take back X's signal; its multi is black-holed, and an operator deletes
// W's node meanwhile. Y lists again and follows X as a deep waiter itself,
// watching X's signal. W's take-back, sent again after Heal, must not send
// the signal (its node is gone): Y must not hold while A or X does.
func TestReviewR81TakeBackAfterOwnNodeDeletedFiresNobody(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r81Mutexes(t, ctx, zkconn.WithSessionTimeout(20*time.Second))
	f := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, zktest.BlackHole)
	if err := dsync.Revoke(ctx, l.sa, l.nodeX); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	if err := l.obs.Delete(l.nodeW, -1); err != nil {
		t.Fatal(err)
	}
	awaitWatch(t, shared, l.nodeX+".handoff", l.idY) // Y follows X now
	awaitWatch(t, shared, l.nodeX, l.idY)
	resent := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, zktest.Pass)
	l.p.Heal()
	select {
	case <-resent.Struck():
	case <-time.After(30 * time.Second):
		t.Fatalf("W never sent its take-back again; watches %v", watchesUnder(t, l.path, l.obs))
	}
	awaitChildren(t, l.obs, l.path, 4) // W queued again
	l.yQuiet(t, ctx, "A holds and X waits")
	l.a.Unlock()
	rx := <-l.xdone
	if rx.err != nil {
		t.Fatalf("X: %v", rx.err)
	}
	l.yQuiet(t, ctx, "X holds")
	l.x.Unlock()
	ry := l.yHolds(t)
	l.yThenW(t, ctx, ry)
}
