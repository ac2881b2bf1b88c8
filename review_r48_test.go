package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 48: the failure paths of the waiting, granting and holding
// code that no other test reached, each driven by a fault at an exact
// request or by an operator's write, and checked for what its doc promises.

// r48Nth arms faults on the requests of op at or below prefix (a path
// prefix): Pass on the first n-1 of them, then a on the nth. It returns the
// last fault.
func r48Nth(p *zktest.Proxy, op zktest.Op, prefix string, n int, a zktest.Action) *zktest.Fault {
	m := zktest.Match{Op: op, Path: prefix, Prefix: true}
	for range n - 1 {
		p.Strike(m, zktest.Pass)
	}
	return p.Strike(m, a)
}

// TestReviewR48WeightedLeasesLostBeforeHandedOut pins weighted.go's
// acquire, leases lost before they are handed out: AcquireLeases(2) is
// granted both leases, watches the first, and the connection drops as it
// watches the second (Lose on that getData: applied, reply never read), so
// the first lease's hold is lost (LostOnSuspension) before AcquireLeases
// returns. It must give both back and start again: it returns two live
// leases, and the nodes under leases are exactly theirs (none of the first
// round orphaned); after their release nothing is left.
func TestReviewR48WeightedLeasesLostBeforeHandedOut(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r45Proxied(t)
	w := dsync.NewWeighted(s, path, 2)
	f := r48Nth(p, zktest.OpGetData, path+"/leases/", 2, zktest.Lose)
	ls, err := w.AcquireLeases(ctx, 2)
	if err != nil {
		t.Fatalf("AcquireLeases = %v", err)
	}
	zktest.AwaitStruck(t, f)
	var mine []string
	for _, l := range ls {
		if l.Context().Err() != nil {
			t.Errorf("lease %s handed out ended: %v", l.Node(), context.Cause(l.Context()))
		}
		mine = append(mine, l.Node())
	}
	got := awaitChildren(t, obs, path+"/leases", 2)
	slices.Sort(got)
	slices.Sort(mine)
	if !slices.Equal(got, mine) {
		t.Errorf("lease nodes %v; want the leases handed out, %v", got, mine)
	}
	for _, l := range ls {
		l.Release()
	}
	assertEmpty(t, path)
}

// TestReviewR48WeightedWatchFailsDuringGrant pins weighted.go's start
// failing to watch a lease: AcquireLeases(3) is granted three leases, and
// ctx ends while the watch on the second is out (its reply dropped). It
// must return ctx.Err() within its ctx (plus slack), having given back the
// first lease, already a hold, and deleted the other two: nothing is left
// under leases or locks.
func TestReviewR48WeightedWatchFailsDuringGrant(t *testing.T) {
	ctx, path, _ := r45Start(t)
	p, s := r45Proxied(t)
	w := dsync.NewWeighted(s, path, 3)
	f := r48Nth(p, zktest.OpGetData, path+"/leases/", 2, zktest.Drop)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		ls, err := w.AcquireLeases(actx, 3)
		if err == nil {
			for _, l := range ls {
				l.Release()
			}
		}
		res <- err
	}()
	zktest.AwaitStruck(t, f)
	cancel()
	start := time.Now()
	if err := reviewRecv(t, "AcquireLeases", res); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireLeases = %v; want context.Canceled", err)
	}
	if d := time.Since(start); d > slack {
		t.Errorf("AcquireLeases returned %v after its ctx ended; want within %v", d, slack)
	}
	assertEmpty(t, path)
}

// TestReviewR48ForgedSignalAfterDrop pins queue.go's follow where a node
// other than a handoff signal shows at a predecessor's signal path. Writers
// of an RWMutex: A holds, X and W wait behind it, W (third) following X and
// X's handoff signal. W's connection drops and comes back (its watches set
// again), and an operator then creates a node at X's signal path: W's
// exists watch fires, but its watches were set on a connection gone since,
// when a downgrade's write to X may have been lost, so W must not claim: it
// lists again (the signal taken with the link closed), and finds a node at
// the signal's path, which is no signal (it takes it out of what its delete
// sends). W must then get the lock only after X's release, and its own
// release must send its own signal, so that Y, a writer following W deeper
// in line, gets the lock without listing. No node and no watch is left.
func TestReviewR48ForgedSignalAfterDrop(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	pw, sw := r45Proxied(t)
	py, sy := r45Proxied(t)
	a := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	x := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w := dsync.NewRWMutex(sw, path)
	y := dsync.NewRWMutex(sy, path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	xres := lockRW(ctx, x.LockContext)
	nodeX := path + "/" + r38BySequence(awaitChildren(t, obs, path, 2))[1]
	wres := lockRW(ctx, w.LockContext)
	nodeW := path + "/" + r38BySequence(awaitChildren(t, obs, path, 3))[2]
	idW := sessionID(t, sw)
	awaitWatch(t, shared, nodeX+".handoff", idW)
	awaitWatch(t, shared, nodeX, idW)
	awaitWatch(t, shared, nodeW, idW)

	pw.Cut()
	// Once the session is back on a new connection (the server closes
	// the old one as it does), the watches it holds are that one's.
	hw, err := sw.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hw.Do(ctx, func(c *zk.Conn) error { _, err := c.Sync(path); return err }); err != nil {
		t.Fatal(err)
	}
	awaitWatch(t, shared, nodeX+".handoff", idW)
	if _, err := obs.Create(nodeX+".handoff", nil, 0, zk.WorldACL(zk.PermAll)); err != nil { // an operator
		t.Fatal(err)
	}
	// W lists again and follows X, watching the node at its signal path.
	awaitWatch(t, shared, nodeX+".handoff", idW)
	goWaits(t, wres, "W after a node was created at X's signal path")

	yres := lockRW(ctx, y.LockContext)
	nodeY := path + "/" + r38BySequence(slices.DeleteFunc(awaitChildren(t, obs, path, 5),
		func(c string) bool { return strings.HasSuffix(c, ".handoff") }))[3]
	idY := sessionID(t, sy)
	awaitWatch(t, shared, nodeW+".handoff", idY)
	awaitWatch(t, shared, nodeW, idY)
	awaitWatch(t, shared, nodeY, idY)
	listed := py.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path}, zktest.Pass)
	defer listed.Disarm()

	a.Unlock()
	awaitLocked(t, xres, "X after A")
	goWaits(t, wres, "W while X holds")
	x.Unlock()
	awaitLocked(t, wres, "W after X")
	goWaits(t, yres, "Y while W holds")
	w.Unlock()
	awaitLocked(t, yres, "Y after W")
	select {
	case <-listed.Struck():
		t.Error("Y listed the queue to get the lock after W's release; want W's handoff signal")
	default:
	}
	y.Unlock()
	if err := obs.Delete(nodeX+".handoff", -1); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// TestReviewR48OwnNodeRewatchHonoursCtx pins queue.go's follow when the
// watch on the waiter's own node must be set again (an operator wrote to
// the node) and ctx ends while that request is out (its reply dropped): the
// LockContext must return ctx.Err() within its ctx (plus slack), its node
// deleted, and leave no node or watch once the holder releases.
func TestReviewR48OwnNodeRewatchHonoursCtx(t *testing.T) {
	ctx, path, obs := r45Start(t)
	pw, sw := r45Proxied(t)
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wres := lockRW(wctx, dsync.NewMutex(sw, path).LockContext)
	nodeW := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]
	awaitWatchOf(t, shared, nodeW, sw)
	f := pw.Strike(zktest.Match{Op: zktest.OpGetData, Path: nodeW}, zktest.Drop)
	if _, err := obs.Set(nodeW, []byte("operator"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	cancel()
	start := time.Now()
	r := reviewRecv(t, "LockContext", wres)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("LockContext = %v; want context.Canceled", r.err)
	}
	if d := time.Since(start); d > slack {
		t.Errorf("LockContext returned %v after its ctx ended; want within %v", d, slack)
	}
	awaitChildren(t, obs, path, 1)
	a.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// TestReviewR48DowngradeBornLost pins rwmutex.go's downgrade when its read
// hold is born lost (and hold.go's newHold seeing its link closed as it
// starts): a revocable RWMutex's write holder downgrades, and the
// connection drops as the new read hold reads its node (Lose on that
// getData). The write hold is lost too (LostOnSuspension). RLockContext
// must fail, with ctx.Err() given the write hold's context (which ended
// meanwhile), or else with the read hold's cause, ErrLockLost; and the read
// node must not be left behind.
func TestReviewR48DowngradeBornLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctx  func(held context.Context) context.Context
		want error
	}{
		{"write hold's ctx", func(held context.Context) context.Context { return held }, context.Canceled},
		{"ctx that does not end", context.WithoutCancel, dsync.ErrLockLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			p, s := r45Proxied(t)
			rw := dsync.NewRWMutex(s, path, dsync.Revocable())
			held, err := rw.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			nodeW := path + "/" + awaitChildren(t, obs, path, 1)[0]
			// The downgrade reads the write node, writes it (its hold
			// then reads it again, with a watch, at a moment of its
			// own), watches the read node, and the read hold reads it.
			exact := zktest.Match{Op: zktest.OpGetData, Path: nodeW}
			p.Strike(exact, zktest.Pass)
			p.Strike(exact, zktest.Pass)
			f := r48Nth(p, zktest.OpGetData, path+"/", 2, zktest.Lose)
			if _, err := rw.RLockContext(tc.ctx(held)); !errors.Is(err, tc.want) {
				t.Fatalf("RLockContext(write hold) = %v; want %v", err, tc.want)
			}
			zktest.AwaitStruck(t, f)
			awaitLost(t, held, "suspended")
			rw.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}
