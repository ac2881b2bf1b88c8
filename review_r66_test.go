package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// r66Flush makes one round trip on s's current connection, so that every
// event ZooKeeper sent it before is handled.
func r66Flush(t *testing.T, ctx context.Context, s *zkconn.Session, path string) {
	t.Helper()
	h, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Do(ctx, func(c *zk.Conn) error { _, err := c.Sync(path); return err }); err != nil {
		t.Fatal(err)
	}
}

// r66Ordered sorts an RWMutex's writer node names by sequence.
func r66Ordered(names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	return out
}

type r66Res struct {
	held context.Context
	err  error
}

// r66Line is a Mutex's queue of three: A holds, X (revocable) waits, W
// (session sw, through proxy p) waits third, following X as a deep waiter
// (X's node and its signal watched), and its own node.
type r66Line struct {
	path, nodeX, nodeW string
	obs                *zk.Conn
	p                  *zktest.Proxy
	sa, sw             *zkconn.Session
	a, x, w            *dsync.Mutex
	xdone, wdone       chan r66Res
	wcancel            context.CancelFunc // ends W's LockContext
	idW                int64
}

// r66Mutexes sets up an r66Line; with elsewhere set, W's session watches
// many nodes elsewhere too (see watchElsewhere). opts are W's session's.
func r66Mutexes(t *testing.T, ctx context.Context, elsewhere bool, opts ...zkconn.Option) *r66Line {
	l := &r66Line{path: lockPath(t), obs: observer(t, shared.Addr()), p: zktest.NewProxy(t, shared.Addr())}
	l.sa = dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	l.sw = dial(t, []string{l.p.Addr()}, opts...)
	if elsewhere {
		watchElsewhere(t, ctx, l.sw)
	}
	l.a = dsync.NewMutex(l.sa, l.path)
	if _, err := l.a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	l.x = dsync.NewMutex(sx, l.path, dsync.Revocable())
	l.xdone = make(chan r66Res, 1)
	go func() { h, err := l.x.LockContext(ctx); l.xdone <- r66Res{h, err} }()
	l.nodeX = l.path + "/" + orderedNames(awaitChildren(t, l.obs, l.path, 2))[1]
	l.w = dsync.NewMutex(l.sw, l.path)
	l.wdone = make(chan r66Res, 1)
	var wctx context.Context
	wctx, l.wcancel = context.WithCancel(ctx)
	go func() { h, err := l.w.LockContext(wctx); l.wdone <- r66Res{h, err} }()
	l.nodeW = l.path + "/" + orderedNames(awaitChildren(t, l.obs, l.path, 3))[2]
	l.idW = mustSessionOf(t, l.obs, l.nodeW)
	awaitWatch(t, shared, l.nodeX+".handoff", l.idW)
	awaitWatch(t, shared, l.nodeX, l.idW)
	awaitWatch(t, shared, l.nodeW, l.idW)
	return l
}

// revokeHeldX releases A, waits for X to hold, arms action on W's
// take-back of X's signal and writes a revocation request into X; it
// returns X's hold and the fault.
func (l *r66Line) revokeHeldX(t *testing.T, ctx context.Context, action zktest.Action) (r66Res, *zktest.Fault) {
	t.Helper()
	l.a.Unlock()
	rx := <-l.xdone
	if rx.err != nil {
		t.Fatalf("X: %v", rx.err)
	}
	f := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, action)
	if err := dsync.Revoke(ctx, l.sa, l.nodeX); err != nil {
		t.Fatal(err)
	}
	return rx, f
}

// waiting checks that W has not returned while A holds and X waits, once
// what the server sent W's session before now is in.
func (l *r66Line) waiting(t *testing.T, ctx context.Context) {
	t.Helper()
	r66Flush(t, ctx, l.sw, l.path)
	select {
	case r := <-l.wdone:
		t.Fatalf("W returned (%v) while A holds and X waits", r.err)
	default:
	}
}

// inTurn releases A, then X: W must not hold while X does, must hold once
// X releases, and nothing is left after W's release.
func (l *r66Line) inTurn(t *testing.T, ctx context.Context) {
	t.Helper()
	l.a.Unlock()
	rx := <-l.xdone
	if rx.err != nil {
		t.Fatalf("X: %v", rx.err)
	}
	r66Flush(t, ctx, l.sw, l.path)
	awaitWatch(t, shared, l.nodeX, l.idW)
	select {
	case r := <-l.wdone:
		t.Fatalf("W returned (%v) while X holds (X's hold err %v)", r.err, rx.held.Err())
	default:
	}
	l.x.Unlock()
	rw := <-l.wdone
	if rw.err != nil {
		t.Fatalf("W: %v", rw.err)
	}
	l.w.Unlock()
	l.empty(t, ctx)
}

// canceled checks that W's LockContext, its ctx ended (wcancel), returns
// context.Canceled.
func (l *r66Line) canceled(t *testing.T) {
	t.Helper()
	if r := <-l.wdone; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("W: %v; want context.Canceled", r.err)
	}
}

// gaveUp, once W has given up: its node goes, A then X hold and release,
// and nothing is left.
func (l *r66Line) gaveUp(t *testing.T, ctx context.Context) {
	t.Helper()
	awaitChildren(t, l.obs, l.path, 2)
	l.a.Unlock()
	rx := <-l.xdone
	if rx.err != nil {
		t.Fatalf("X: %v", rx.err)
	}
	l.x.Unlock()
	l.empty(t, ctx)
}

// empty waits until no node is left under the lock's path, and checks that
// no watch is left there either.
func (l *r66Line) empty(t *testing.T, ctx context.Context) { r66Empty(t, ctx, l.obs, l.sw, l.path) }

// r66Empty waits until no node is left under path, and checks, once sw's
// session has handled what the server sent it, that no watch is left
// there either (but obs's).
func r66Empty(t *testing.T, ctx context.Context, obs *zk.Conn, sw *zkconn.Session, path string) {
	t.Helper()
	awaitChildren(t, obs, path, 0)
	r66Flush(t, ctx, sw, path)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Errorf("no node left under %s, but watches are: %v", path, left)
	}
}

// r66TakeBackLive: a revocation request into X makes W take back X's signal
// while X still exists (its takeBack multi struck with action), and follow
// X again. W must not hold while A or X does, and must hold once X
// releases.
func r66TakeBackLive(t *testing.T, action zktest.Action) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r66Mutexes(t, ctx, true)
	f := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, action)
	if err := dsync.Revoke(ctx, l.sa, l.nodeX); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitWatch(t, shared, l.nodeX, l.idW) // W follows X again
	awaitWatch(t, shared, l.nodeX+".handoff", l.idW)
	l.waiting(t, ctx)
	l.inTurn(t, ctx)
}

func TestReviewR66TakeBackLivePass(t *testing.T) { r66TakeBackLive(t, zktest.Pass) }
func TestReviewR66TakeBackLiveLose(t *testing.T) { r66TakeBackLive(t, zktest.Lose) }
func TestReviewR66TakeBackLiveCut(t *testing.T)  { r66TakeBackLive(t, zktest.Cut) }
func TestReviewR66TakeBackLiveDrop(t *testing.T) { r66TakeBackLive(t, zktest.Drop) }

// r66Queue is an RWMutex's queue of three writers: W0 held, then released;
// W1 (x, its write hold xheld) holding after it; W2 (w, session sw, through
// proxy p), third, followed W1 as a deep waiter (W1's node and its signal
// watched).
type r66Queue struct {
	path, node1 string
	obs         *zk.Conn
	p           *zktest.Proxy
	sw          *zkconn.Session
	x, w        *dsync.RWMutex
	xheld       context.Context
	wdone       chan r66Res
	idW         int64
}

// r66Writers sets up an r66Queue; with elsewhere set, W2's session watches
// many nodes elsewhere too (see watchElsewhere).
func r66Writers(t *testing.T, ctx context.Context, elsewhere bool) *r66Queue {
	q := &r66Queue{path: lockPath(t), obs: observer(t, shared.Addr()), p: zktest.NewProxy(t, shared.Addr())}
	sa := dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	q.sw = dial(t, []string{q.p.Addr()})
	if elsewhere {
		watchElsewhere(t, ctx, q.sw)
	}
	a := dsync.NewRWMutex(sa, q.path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	q.x = dsync.NewRWMutex(sx, q.path)
	xdone := make(chan r66Res, 1)
	go func() { h, err := q.x.LockContext(ctx); xdone <- r66Res{h, err} }()
	q.node1 = q.path + "/" + r66Ordered(awaitChildren(t, q.obs, q.path, 2))[1]
	q.w = dsync.NewRWMutex(q.sw, q.path)
	q.wdone = make(chan r66Res, 1)
	go func() { h, err := q.w.LockContext(ctx); q.wdone <- r66Res{h, err} }()
	node2 := q.path + "/" + r66Ordered(awaitChildren(t, q.obs, q.path, 3))[2]
	q.idW = mustSessionOf(t, q.obs, node2)
	awaitWatch(t, shared, q.node1+".handoff", q.idW)
	awaitWatch(t, shared, q.node1, q.idW)
	a.Unlock()
	rx := <-xdone
	if rx.err != nil {
		t.Fatalf("W1: %v", rx.err)
	}
	q.xheld = rx.held
	return q
}

// readNode returns the path of W1's read node, once W2 follows it.
func (q *r66Queue) readNode(t *testing.T) string {
	t.Helper()
	var rnode string
	for _, k := range children(t, q.obs, q.path) {
		if strings.Contains(k, "__READ__") {
			rnode = q.path + "/" + k
		}
	}
	awaitWatch(t, shared, rnode, q.idW)
	return rnode
}

// readHoldFirst checks, once W1's write node is gone and W1 holds for
// reading (rctx), that W2 holds only after RUnlock, and that nothing is left.
func (q *r66Queue) readHoldFirst(t *testing.T, ctx, rctx context.Context) {
	t.Helper()
	r66Flush(t, ctx, q.sw, q.path)
	select {
	case r := <-q.wdone:
		t.Fatalf("W2 returned (%v) while W1's downgrade holds for reading (%v)", r.err, rctx.Err())
	default:
	}
	q.x.RUnlock()
	rw := <-q.wdone
	if rw.err != nil {
		t.Fatalf("W2: %v", rw.err)
	}
	q.w.Unlock()
	r66Empty(t, ctx, q.obs, q.sw, q.path)
}

// r66Downgrade: W1 of an r66Queue downgrades: W2 takes back W1's signal
// while W1 holds (its multi struck with action), lists, and follows the read
// node. W1 releases its write hold (its signal sent with the delete): W2
// must not hold until the read hold ends.
func r66Downgrade(t *testing.T, action zktest.Action) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := r66Writers(t, ctx, true)
	f := q.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: q.node1 + ".handoff"}, action)
	before := q.p.Requests()
	rctx, err := q.x.RLockContext(q.xheld) // downgrade
	if err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitChildren(t, q.obs, q.path, 3)
	q.readNode(t) // W2 follows the read node
	t.Logf("W2's requests from the downgrade until it follows the read node: %d", q.p.Requests()-before)
	q.x.Unlock() // write hold: node1 and its signal
	awaitChildren(t, q.obs, q.path, 2)
	q.readHoldFirst(t, ctx, rctx)
}

func TestReviewR66DowngradePass(t *testing.T) { r66Downgrade(t, zktest.Pass) }
func TestReviewR66DowngradeLose(t *testing.T) { r66Downgrade(t, zktest.Lose) }
func TestReviewR66DowngradeCut(t *testing.T)  { r66Downgrade(t, zktest.Cut) }

// TestReviewR66RevokeLeaseNodeAfterWrap: a Weighted (SemaphoreMutex) at the
// longest path dsync takes, 4096 bytes, has lease nodes at
// PATH/leases/_c_<uuid>-lease-<seq>: 64 bytes more with a 10-digit sequence,
// 65 once the leases parent's cversion is past 2^31 (ZooKeeper writes
// "%010d": "-2147483648"). Revoke allowed 64, so it refused such a holder's
// node. The node is made by hand (a cversion cannot be moved 2^31
// in a test), with the name ZooKeeper would give it.
func TestReviewR66RevokeLeaseNodeAfterWrap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base, path := lockPath(t), longestPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	for _, p := range []string{base, path, path + "/leases"} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	for _, seq := range []string{"0000000042", "-2147483648"} {
		node := path + "/leases/" + zkconn.ProtectedName("lease-"+seq)
		if _, err := obs.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if err := dsync.Revoke(ctx, s, node); err != nil {
			t.Errorf("Revoke of a lease node (%d bytes, sequence %s) under a %d-byte path dsync takes = %v; want nil",
				len(node), seq, len(path), err)
		}
		obs.Delete(node, -1)
	}
	for _, p := range []string{path + "/leases", path, base} {
		obs.Delete(p, -1)
	}
}

// TestReviewR66DowngradeAcrossReconnect: as r66Downgrade, but W2 hears
// nothing from the downgrade until W1 has released its write hold, and then
// only on a new connection (a deletion, no write): W2 must list again (its
// link closed), take back W1's signal, and wait for the read hold.
func TestReviewR66DowngradeAcrossReconnect(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := r66Writers(t, ctx, false)
	q.p.DropReplies()
	rctx, err := q.x.RLockContext(q.xheld) // downgrade
	if err != nil {
		t.Fatal(err)
	}
	q.x.Unlock() // the write node goes, with its signal
	awaitChildren(t, q.obs, q.path, 2)
	q.p.Heal()
	q.readNode(t)
	q.readHoldFirst(t, ctx, rctx)
}

// TestReviewR66TakeBackOwnNodeDeleted: W's takeBack of X's signal (X
// written to) is black-holed; an operator deletes W's node meanwhile. The
// takeBack sent again fails its check; W queues again. No two holders, no
// watch left.
func TestReviewR66TakeBackOwnNodeDeleted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r66Mutexes(t, ctx, false, zkconn.WithSessionTimeout(20*time.Second))
	f := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, zktest.BlackHole)
	if err := dsync.Revoke(ctx, l.sa, l.nodeX); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	if err := l.obs.Delete(l.nodeW, -1); err != nil {
		t.Fatal(err)
	}
	l.p.Heal()
	kids := awaitChildren(t, l.obs, l.path, 3) // W queued again
	if orderedNames(kids)[2] == l.nodeW[len(l.path)+1:] {
		t.Fatal("same node")
	}
	awaitWatch(t, shared, l.nodeX, l.idW)
	awaitWatch(t, shared, l.nodeX+".handoff", l.idW)
	l.inTurn(t, ctx)
}
