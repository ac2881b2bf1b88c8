package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 86: Value/Count and Once.

// TestReviewR86WatchCanceledLoopsShareWatch: Watch loops whose ctx ends
// while they wait for the shared watch (a request-scoped ctx, say) leave no
// watch behind beyond the one they shared: each such loop used to drop the
// shared read (forget) though its watch had not fired, so the next loop set
// another watch, and go-zookeeper held one channel per loop until the node
// next changed.
func TestReviewR86WatchCanceledLoopsShareWatch(t *testing.T) {
	t.Parallel()
	const loops = 50
	path := valuePath(t)
	s := dial(t, []string{shared.Addr()})
	c := dsync.NewCount(s, path, 1)
	conn := connOf(t, s)
	for i := 0; i < loops; i++ {
		ctx, cancel := context.WithCancel(valueCtx(t))
		n := 0
		for _, err := range c.Watch(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			cancel() // the loop goes on to wait, and its ctx is done
		}
		cancel()
		if n != 1 {
			t.Fatalf("loop %d yielded %d times; want 1", i, n)
		}
	}
	if n := clientWatches(t, conn, path); n != 1 {
		t.Fatalf("after %d Watch loops whose ctx ended as they waited, go-zookeeper holds %d watches on the node; want 1", loops, n)
	}
}

// r86Yield is what a Watch loop yielded.
type r86Yield struct {
	v   dsync.Versioned[int32]
	err error
}

// r86Loop runs a Watch loop of c on a goroutine until its ctx is canceled
// (cancel, which the test's cleanup calls too): every yield goes to seen;
// ended is closed when the loop has returned.
func r86Loop(t *testing.T, c *dsync.Count) (seen <-chan r86Yield, cancel func(), ended <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	t.Cleanup(cancel)
	ch := make(chan r86Yield, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v, err := range c.Watch(ctx) {
			ch <- r86Yield{v, err}
		}
	}()
	return ch, cancel, done
}

// r86Want receives the next yield from seen and fails unless it is value
// want at version (nil error).
func r86Want(t *testing.T, who string, seen <-chan r86Yield, want, version int32) {
	t.Helper()
	y := reviewRecv(t, who+"'s next yield", seen)
	if y.err != nil || y.v.Value != want || y.v.Version != version {
		t.Fatalf("%s yielded %+v, %v; want %d at version %d", who, y.v, y.err, want, version)
	}
}

// r86Then writes x over version through obs and checks that each loop's
// next yield is x at version+1: that none yielded anything else after what
// the test took from it.
func r86Then(t *testing.T, obs *zk.Conn, path string, x, version int32, seen ...<-chan r86Yield) {
	t.Helper()
	if _, err := obs.Set(path, []byte{0, 0, 0, byte(x)}, version); err != nil {
		t.Fatal(err)
	}
	for i, l := range seen {
		r86Want(t, fmt.Sprint("loop ", i), l, x, version+1)
	}
}

// r86Short returns a Count at a fresh path holding 1 at version 0 (as
// r38Count does) on a Session through a proxy with a 2s session timeout
// (r89Short), and a Subscription to that Session's states: for tests that
// end the session.
func r86Short(t *testing.T) (p *zktest.Proxy, s *zkconn.Session, sub *zkconn.Subscription, c *dsync.Count, obs *zk.Conn, path string) {
	t.Helper()
	path = valuePath(t) + "/count"
	obs = observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{0, 0, 0, 1})
	p, s = r89Short(t)
	sub = s.Subscribe()
	t.Cleanup(sub.Stop)
	return p, s, sub, dsync.NewCount(s, path, 1), obs, path
}

// TestReviewR86WatchSharedOneLoopExits: two Watch loops share the watch;
// B's ctx ends while both wait. A third loop that starts then joins the
// watch A waits on (it used to set a second one: B's exit dropped the
// shared read though its watch had not fired), and A and C yield the next
// writes, with one watch channel on the node throughout.
func TestReviewR86WatchSharedOneLoopExits(t *testing.T) {
	t.Parallel()
	_, s, c, obs, path := r38Count(t)
	conn := connOf(t, s)
	aSeen, _, _ := r86Loop(t, c)
	r86Want(t, "A", aSeen, 1, 0)
	bSeen, bCancel, bEnded := r86Loop(t, c)
	r86Want(t, "B", bSeen, 1, 0)
	bCancel()
	reviewRecv(t, "B's end", bEnded)
	cSeen, _, _ := r86Loop(t, c)
	r86Want(t, "C", cSeen, 1, 0)
	if n := clientWatches(t, conn, path); n != 1 {
		t.Errorf("with A and C watching after B ended, go-zookeeper holds %d watches on the node; want 1", n)
	}
	for i := int32(2); i <= 3; i++ {
		if _, err := obs.Set(path, []byte{0, 0, 0, byte(i)}, i-2); err != nil {
			t.Fatal(err)
		}
		r86Want(t, "A", aSeen, i, i-1)
		r86Want(t, "C", cSeen, i, i-1)
	}
	if n := clientWatches(t, conn, path); n != 1 {
		t.Errorf("after two writes, go-zookeeper holds %d watches on the node; want 1", n)
	}
}

// TestReviewR86WatchSharedDecodeErrorThenValid: two loops share the watch
// of a node the codec cannot decode: both yield ErrDecode with its version,
// and then the valid value written over it.
func TestReviewR86WatchSharedDecodeErrorThenValid(t *testing.T) {
	t.Parallel()
	path := valuePath(t) + "/count"
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, []byte("bad"))
	c := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 1)
	var seen [2]<-chan r86Yield
	for i := range seen {
		seen[i], _, _ = r86Loop(t, c)
		y := reviewRecv(t, "the first yield", seen[i])
		if !errors.Is(y.err, dsync.ErrDecode) || y.v.Version != 0 {
			t.Fatalf("loop %d yielded %+v, %v first; want version 0 with ErrDecode", i, y.v, y.err)
		}
	}
	if _, err := obs.Set(path, []byte{0, 0, 0, 5}, 0); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		r86Want(t, fmt.Sprint("loop ", i), seen[i], 5, 1)
	}
	r86Then(t, obs, path, 6, 1, seen[:]...)
}

// TestReviewR86WatchNodeDeletedWhileShared: an operator deletes the node
// while two loops share its watch: each yields the seed at version 0 (the
// node created again once), then a later write.
func TestReviewR86WatchNodeDeletedWhileShared(t *testing.T) {
	t.Parallel()
	path := valuePath(t) + "/count"
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{0, 0, 0, 7})
	if _, err := obs.Set(path, []byte{0, 0, 0, 8}, 0); err != nil {
		t.Fatal(err)
	}
	c := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 1)
	a, _, _ := r86Loop(t, c)
	r86Want(t, "A", a, 8, 1)
	b, _, _ := r86Loop(t, c)
	r86Want(t, "B", b, 8, 1)
	if err := obs.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
	r86Want(t, "A", a, 1, 0)
	r86Want(t, "B", b, 1, 0)
	if _, err := obs.Set(path, []byte{0, 0, 0, 9}, 0); err != nil {
		t.Fatal(err)
	}
	r86Want(t, "A", a, 9, 1)
	r86Want(t, "B", b, 9, 1)
}

// TestReviewR86WatchCtxEndsWhileOtherHoldsTurn: loop A's read (getData with
// a watch) is black-holed, so A holds the turn; loop B, waiting for it,
// returns as soon as its ctx ends. Once the connection is back A yields.
func TestReviewR86WatchCtxEndsWhileOtherHoldsTurn(t *testing.T) {
	t.Parallel()
	p, _, c, _, path := r38Count(t)
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path}, zktest.BlackHole)
	defer f.Disarm()
	a, _, _ := r86Loop(t, c)
	r38Struck(t, f, a)
	b, bCancel, bEnded := r86Loop(t, c)
	bCancel()
	reviewRecv(t, "B's end after its ctx, A holding the turn", bEnded)
	select {
	case y := <-b:
		t.Fatalf("B yielded %+v, %v; want nothing", y.v, y.err)
	default:
	}
	p.Heal()
	r86Want(t, "A", a, 1, 0)
}

// TestReviewR86WatchSharedAcrossExpiry: two loops share the watch when the
// session is lost (the connection black-holed past the session timeout) and
// the node is written meanwhile: both yield the write on the next session,
// once, without an error, and nothing more.
func TestReviewR86WatchSharedAcrossExpiry(t *testing.T) {
	t.Parallel()
	p, s, sub, c, obs, path := r86Short(t)
	a, _, _ := r86Loop(t, c)
	r86Want(t, "A", a, 1, 0)
	b, _, _ := r86Loop(t, c)
	r86Want(t, "B", b, 1, 0)
	p.BlackHole()
	awaitState(t, sub, zkconn.StateLost)
	if _, err := obs.Set(path, []byte{0, 0, 0, 2}, 0); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	r86Want(t, "A", a, 2, 1)
	r86Want(t, "B", b, 2, 1)
	r86Then(t, obs, path, 3, 1, a, b)
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("go-zookeeper holds %d watches on the node in the new session; want 1", n)
	}
}

// TestReviewR86WatchSeedCreateFaults: the create of the seed by a Watch
// loop (the node missing) is cut, or applied with its reply lost: the loop
// yields the seed at version 0, once, and the node holds it.
func TestReviewR86WatchSeedCreateFaults(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			root := valuePath(t)
			path := root + "/count"
			obs := observer(t, shared.Addr())
			createRaw(t, obs, root, nil) // the parent only
			p := zktest.NewProxy(t, shared.Addr())
			c := dsync.NewCount(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), path, 1)
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path}, action)
			defer f.Disarm()
			a, _, _ := r86Loop(t, c)
			r38Struck(t, f, a)
			r86Want(t, "A", a, 1, 0)
			assertNode(t, obs, path, 1, 0)
			r86Then(t, obs, path, 2, 0, a)
		})
	}
}

// An r86Onces is a fresh path, an observer, a Once there on a Session
// through a proxy (a session timeout no test step reaches), a Once on the
// same path on a Session straight to the server, and a run for them that
// counts its calls.
type r86Onces struct {
	path string
	obs  *zk.Conn
	p    *zktest.Proxy
	a, b *dsync.Once
	runs atomic.Int32
}

func r86Once(t *testing.T) *r86Onces {
	t.Helper()
	o := &r86Onces{path: lockPath(t), obs: observer(t, shared.Addr()), p: zktest.NewProxy(t, shared.Addr())}
	o.a = dsync.NewOnce(dial(t, []string{o.p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), o.path)
	o.b = dsync.NewOnce(dial(t, []string{shared.Addr()}), o.path)
	return o
}

// f is the run: it counts its calls and succeeds.
func (o *r86Onces) f(context.Context) error { o.runs.Add(1); return nil }

// TestReviewR86OnceRecordFaults: the record's multi is cut (not applied:
// sent again once decided) or applied with its reply lost (decided
// written): Do returns nil, f ran once, the record is there, and o.a second
// Do does not run f.
func TestReviewR86OnceRecordFaults(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx := valueCtx(t)
			o := r86Once(t)
			fault := o.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: o.path + "/done"}, action)
			defer fault.Disarm()
			res := make(chan error, 1)
			go func() { res <- o.a.Do(ctx, o.f) }()
			reStruck(t, fault, res)
			if err := reviewRecv(t, "Do", res); err != nil {
				t.Fatalf("Do with its record %s = %v; want nil", action, err)
			}
			if err := o.b.Do(ctx, o.f); err != nil || o.runs.Load() != 1 {
				t.Fatalf("another Do = %v, f ran %d times; want nil, once", err, o.runs.Load())
			}
			if done, err := o.b.Done(ctx); err != nil || !done {
				t.Fatalf("Done = %v, %v; want true", done, err)
			}
			awaitChildren(t, o.obs, o.path+"/lock", 0)
		})
	}
}

// TestReviewR86OnceRecordLostThenReset: the record's multi is applied and
// its reply held back; meanwhile another process's Reset deletes the record.
// Do decides its run written (the path's data version moved) and returns nil
// without sending it again, so the record stays deleted, and the next Do
// runs f again: f ran twice, for two successes with a Reset between.
func TestReviewR86OnceRecordLostThenReset(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	o := r86Once(t)
	fault := o.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: o.path + "/done"}, zktest.Drop)
	defer fault.Disarm()
	res := make(chan error, 1)
	go func() { res <- o.a.Do(ctx, o.f) }()
	reStruck(t, fault, res)
	if err := o.b.Reset(ctx); err != nil {
		t.Fatalf("Reset = %v", err)
	}
	o.p.Cut() // the Do's reply can no longer come
	if err := reviewRecv(t, "Do", res); err != nil {
		t.Fatalf("Do = %v; want nil (its record was written, then deleted by the Reset)", err)
	}
	if done, err := o.b.Done(ctx); err != nil || done {
		t.Fatalf("Done after the Reset = %v, %v; want false (the record not written again)", done, err)
	}
	if err := o.b.Do(ctx, o.f); err != nil || o.runs.Load() != 2 {
		t.Fatalf("Do after the Reset = %v, f ran %d times; want nil, twice", err, o.runs.Load())
	}
}

// TestReviewR86OnceCtxEndsAtCatchUp: Do's ctx ends while its catch-up sync,
// under the lock, is black-holed: Do returns ctx's error at once, f has not
// run, and once the connection is back the lock node goes and another
// process's Do runs f, once.
func TestReviewR86OnceCtxEndsAtCatchUp(t *testing.T) {
	t.Parallel()
	o := r86Once(t)
	fault := o.p.Strike(zktest.Match{Op: zktest.OpSync, Path: o.path}, zktest.BlackHole)
	defer fault.Disarm()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- o.a.Do(ctx, o.f) }()
	reStruck(t, fault, res)
	cancel()
	if err := reviewRecv(t, "Do after its ctx ended", res); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v; want context.Canceled", err)
	}
	if n := o.runs.Load(); n != 0 {
		t.Fatalf("f ran %d times; want 0", n)
	}
	o.p.Heal()
	if err := o.b.Do(valueCtx(t), o.f); err != nil || o.runs.Load() != 1 {
		t.Fatalf("the other Do = %v, f ran %d times; want nil, once", err, o.runs.Load())
	}
	awaitChildren(t, o.obs, o.path+"/lock", 0)
}

// TestReviewR86OnceResetDeleteFaultsThenDo: Reset's delete is cut (sent
// again) or applied with its reply lost (decided by the read after it):
// Reset returns nil, the record is gone, and the next Do runs f again.
func TestReviewR86OnceResetDeleteFaultsThenDo(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx := valueCtx(t)
			o := r86Once(t)
			if err := o.b.Do(ctx, o.f); err != nil {
				t.Fatal(err)
			}
			fault := o.p.Strike(zktest.Match{Op: zktest.OpDelete, Path: o.path + "/done"}, action)
			defer fault.Disarm()
			res := make(chan error, 1)
			go func() { res <- o.a.Reset(ctx) }()
			reStruck(t, fault, res)
			if err := reviewRecv(t, "Reset", res); err != nil {
				t.Fatalf("Reset with its delete %s = %v; want nil", action, err)
			}
			if done, err := o.b.Done(ctx); err != nil || done {
				t.Fatalf("Done after Reset = %v, %v; want false", done, err)
			}
			if err := o.b.Do(ctx, o.f); err != nil || o.runs.Load() != 2 {
				t.Fatalf("Do after Reset = %v, f ran %d times; want nil, twice", err, o.runs.Load())
			}
			awaitChildren(t, o.obs, o.path+"/lock", 0)
		})
	}
}

// TestReviewR86WatchSharedSessionClosed: the Session is closed while two
// loops share the watch: each yields one error wrapping ErrClosed and ends.
func TestReviewR86WatchSharedSessionClosed(t *testing.T) {
	t.Parallel()
	_, s, c, _, _ := r38Count(t)
	a, _, aEnded := r86Loop(t, c)
	r86Want(t, "A", a, 1, 0)
	b, _, bEnded := r86Loop(t, c)
	r86Want(t, "B", b, 1, 0)
	s.Close()
	for who, l := range map[string]struct {
		seen  <-chan r86Yield
		ended <-chan struct{}
	}{"A": {a, aEnded}, "B": {b, bEnded}} {
		reviewRecv(t, who+"'s end after Close", l.ended)
		var errs []error
		for len(l.seen) > 0 {
			errs = append(errs, (<-l.seen).err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], zkconn.ErrClosed) {
			t.Errorf("%s yielded %v after Close; want one error wrapping ErrClosed", who, errs)
		}
	}
}
