package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewSignalWatchTakenBack: a waiter B third in line sets an exists
// watch on its predecessor X's handoff signal. X gives up (it never held: no
// signal), and B lists again and follows the holder A. B takes its watch on
// X's signal back then, before it follows A: the watch used to stay set
// until B's own delete sent the signal, and when an operator deleted B's
// node that delete could not (the node was gone), so the watch stayed for
// the life of B's session.
func TestReviewSignalWatchTakenBack(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	sa := dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	sb := dial(t, []string{shared.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a := dsync.NewMutex(sa, path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	nodeA := path + "/" + children(t, obs, path)[0]

	x := dsync.NewMutex(sx, path)
	ctxX, cancelX := context.WithCancel(ctx)
	defer cancelX()
	xdone := make(chan error, 1)
	go func() { _, err := x.LockContext(ctxX); xdone <- err }()
	nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]

	b := dsync.NewMutex(sb, path)
	type res struct {
		held context.Context
		err  error
	}
	bdone := make(chan res, 1)
	go func() { h, err := b.LockContext(ctx); bdone <- res{h, err} }()
	nodeB := path + "/" + orderedNames(awaitChildren(t, obs, path, 3))[2]
	idB := mustSessionOf(t, obs, nodeB)
	awaitWatch(t, shared, nodeX+".handoff", idB) // B follows X, waiting for its signal
	awaitWatch(t, shared, nodeB, idB)            // and watches its own node

	cancelX() // X gives up: it never held, it sends no signal
	if err := <-xdone; err == nil {
		t.Fatal("X acquired")
	}
	awaitWatch(t, shared, nodeA, idB) // B listed again and follows A
	// B set that watch once its signal was sent: the watch on X's is gone.
	if slices.Contains(watches(t, shared)[nodeX+".handoff"], idB) {
		t.Fatalf("B follows A and still watches %s.handoff", nodeX)
	}

	if err := obs.Delete(nodeB, -1); err != nil { // an operator
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 2) // B queued again behind A
	a.Unlock()
	r := <-bdone
	if r.err != nil {
		t.Fatal(r.err)
	}
	b.Unlock()
	awaitChildren(t, obs, path, 0)
	hb, err := sb.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hb.Conn().Sync(path); err != nil {
		t.Fatal(err)
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// TestReviewSignalWatchOutAtGiveUp: a waiter deep in line that gives up
// (ctx ends) while its exists watch on its predecessor's handoff signal is
// being set left that watch set for the life of its session. follow adds
// the signal to e.fire before it sends the request, so that the delete that
// removes the waiter sends it; but the request goes out from a goroutine
// zkconn.Handle.Do leaves running when ctx ends, and it could be queued on
// the connection only after the delete had sent the signal. ZooKeeper then
// set the watch after the signal, on a path that only the predecessor could
// still signal, and it does not when it gives up too. The delete now waits
// for that request (entry.remove).
//
// No fault can force the order (it is decided inside the process, before
// anything is written), so waiters give up at random moments, many times,
// behind a holder A and a waiter B that stay put; B then gives up (it never
// held: no signal) and A unlocks.
func TestReviewSignalWatchOutAtGiveUp(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	ctx := context.Background()
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	bdone := make(chan error, 1)
	go func() { _, err := b.LockContext(ctxB); bdone <- err }()
	awaitChildren(t, obs, path, 2)

	var sess []*zkconn.Session
	var wg sync.WaitGroup
	stop := time.Now().Add(5 * time.Second)
	for i := 0; i < 3; i++ {
		s := dial(t, []string{shared.Addr()})
		sess = append(sess, s)
		wg.Go(func() {
			m := dsync.NewMutex(s, path)
			for time.Now().Before(stop) {
				// Give up while follow sets its watches: a little after
				// the create, whose round trip is about as long.
				ctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
				if _, err := m.LockContext(ctx); err == nil {
					t.Error("a third waiter acquired while A holds")
					m.Unlock()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	cancelB() // B never held: it sends no signal
	if err := <-bdone; err == nil {
		t.Fatal("B acquired")
	}
	a.Unlock()
	awaitChildren(t, obs, path, 0)
	for _, s := range sess {
		h, err := s.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Conn().Sync(path); err != nil { // every event read
			t.Fatal(err)
		}
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// TestReviewGiveUpDeleteAfterLostReply: a waiter W third in line (behind
// holder A and waiter X) sets an exists watch on X's handoff signal; the
// reply to that request never comes (Drop), while the connection stays up
// and answers pings. W gives up. Its delete must go at once: it waits for
// that request to have been written (see TestReviewSignalWatchOutAtGiveUp),
// not answered, and a delete that waited for the reply left W's node in the
// queue for as long as W's session lived, so that nobody could take the
// lock once A and X were gone.
//
// Since the Session closes a connection at a reply out of turn, the lost
// reply fails the request at the next ping's reply (a third of the timeout
// later), and a delete that waited for it goes then: W's node no longer
// stays for the session's life, only until that ping. So the test asks
// where the delete goes: it must be written on the connection the exists
// request is still unanswered on, before that connection drops. It is
// black-holed there (the connection then stays up, nothing answered, until
// Heal), and W's Handle of that connection must not be suspended by then.
// W sends its reads of X's node and of its own beside the exists request,
// in any order: their replies are swallowed too, else one that came after
// the exists request's would close the connection at once.
func TestReviewGiveUpDeleteAfterLostReply(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	sa := dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	p := zktest.NewProxy(t, shared.Addr())
	sw := dial(t, []string{p.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a := dsync.NewMutex(sa, path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	x := dsync.NewMutex(sx, path)
	xdone := make(chan error, 1)
	go func() { _, err := x.LockContext(ctx); xdone <- err }()
	nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]

	// Armed in this order, the last matches only W's read of its own node.
	follow := []*zktest.Fault{
		p.Strike(zktest.Match{Op: zktest.OpExists, Path: nodeX + ".handoff"}, zktest.Drop),
		p.Strike(zktest.Match{Op: zktest.OpGetData, Path: nodeX}, zktest.Drop),
		p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}, zktest.Drop),
	}
	w := dsync.NewMutex(sw, path)
	ctxW, cancelW := context.WithCancel(ctx)
	defer cancelW()
	wdone := make(chan error, 1)
	go func() { _, err := w.LockContext(ctxW); wdone <- err }()
	nodeW := path + "/" + orderedNames(awaitChildren(t, obs, path, 3))[2]
	for _, f := range follow {
		r38Struck(t, f, wdone) // the watches are set; their replies are gone
	}
	// The Handle of the connection the exists request is out on.
	hw, err := sw.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	del := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: nodeW}, zktest.BlackHole)
	defer del.Disarm()
	cancelW()
	if err := <-wdone; !errors.Is(err, context.Canceled) {
		t.Fatalf("W's LockContext = %v; want context.Canceled", err)
	}

	// W gave up: its delete must go at once, as it did before (a guaranteed
	// delete needs no reply to an earlier read), behind the exists request.
	select {
	case <-del.Struck():
	case <-ctx.Done():
		t.Fatalf("W gave up, but its delete of %s was never written", nodeW)
	}
	select {
	case <-hw.Suspended():
		t.Fatalf("W's delete of %s was written only once the connection its exists request was out on "+
			"had dropped: it waited for that request's reply", nodeW)
	default:
	}
	p.Heal() // the delete goes again, on the next connection
	there, _, gone, err := obs.ExistsW(nodeW)
	if err != nil {
		t.Fatal(err)
	}
	if there {
		select {
		case <-gone:
		case <-ctx.Done():
			t.Fatalf("W gave up, but its node %s is still queued", nodeW)
		}
	}
	a.Unlock()
	if err := <-xdone; err != nil {
		t.Fatal(err)
	}
	x.Unlock()
	// Nobody holds now; a newcomer must get the lock.
	z := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	ctxZ, cancelZ := context.WithTimeout(ctx, 5*time.Second)
	defer cancelZ()
	if _, err := z.LockContext(ctxZ); err != nil {
		t.Fatalf("with A and X gone and W given up, Z's LockContext = %v; queue: %v", err, children(t, obs, path))
	}
	z.Unlock()
	awaitChildren(t, obs, path, 0)
}

// signalSetup queues A (holding), X (waiting, revocable) and W (third,
// through a proxy of its own) on one Mutex, and returns once W watches X's
// handoff signal, X's node and its own. X and W wait with ctxs of their own
// (cancelX, cancelW); their LockContext errors come on xdone and wdone.
type signalSetup struct {
	path, nodeX, nodeW string
	obs                *zk.Conn
	p                  *zktest.Proxy
	sa, sw             *zkconn.Session
	a, w               *dsync.Mutex
	idW                int64
	cancelX, cancelW   context.CancelFunc
	xdone, wdone       chan error
}

func setupSignal(t *testing.T, ctx context.Context, elsewhere bool) *signalSetup {
	t.Helper()
	st := &signalSetup{path: lockPath(t), obs: observer(t, shared.Addr())}
	st.sa = dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	st.p = zktest.NewProxy(t, shared.Addr())
	st.sw = dial(t, []string{st.p.Addr()})
	if elsewhere {
		watchElsewhere(t, ctx, st.sw)
	}
	st.a = dsync.NewMutex(st.sa, st.path)
	if _, err := st.a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	x := dsync.NewMutex(sx, st.path, dsync.Revocable())
	ctxX, cancelX := context.WithCancel(ctx)
	st.cancelX, st.xdone = cancelX, make(chan error, 1)
	go func() { _, err := x.LockContext(ctxX); st.xdone <- err }()
	st.nodeX = st.path + "/" + orderedNames(awaitChildren(t, st.obs, st.path, 2))[1]
	st.w = dsync.NewMutex(st.sw, st.path)
	ctxW, cancelW := context.WithCancel(ctx)
	st.cancelW, st.wdone = cancelW, make(chan error, 1)
	go func() { _, err := st.w.LockContext(ctxW); st.wdone <- err }()
	st.nodeW = st.path + "/" + orderedNames(awaitChildren(t, st.obs, st.path, 3))[2]
	st.idW = mustSessionOf(t, st.obs, st.nodeW)
	awaitWatch(t, shared, st.nodeX+".handoff", st.idW) // W waits for X's signal
	awaitWatch(t, shared, st.nodeX, st.idW)            // and for X to leave
	awaitWatch(t, shared, st.nodeW, st.idW)            // and watches its own node
	t.Cleanup(func() { cancelX(); cancelW() })
	return st
}

// giveUpX makes X give up: it never held, so it sends no signal.
func (st *signalSetup) giveUpX(t *testing.T) {
	t.Helper()
	st.cancelX()
	if err := <-st.xdone; !errors.Is(err, context.Canceled) {
		t.Fatalf("X's LockContext = %v; want context.Canceled", err)
	}
}

// giveUpW makes W give up.
func (st *signalSetup) giveUpW(t *testing.T) {
	t.Helper()
	st.cancelW()
	if err := <-st.wdone; !errors.Is(err, context.Canceled) {
		t.Fatalf("W's LockContext = %v; want context.Canceled", err)
	}
}

// checkNoWatch fails if W's session still watches X's signal, or anyone
// anything under the lock, once the queue is empty.
func (st *signalSetup) checkNoWatch(t *testing.T) {
	t.Helper()
	awaitChildren(t, st.obs, st.path, 0)
	if slices.Contains(watches(t, shared)[st.nodeX+".handoff"], st.idW) {
		t.Errorf("the queue is empty, and W's session still watches %s.handoff: "+
			"set for as long as the session lives", st.nodeX)
	}
	if left := watchesUnder(t, st.path, st.obs); len(left) > 0 {
		t.Errorf("no node left under %s, but watches are: %v", st.path, left)
	}
}

// elsewhere is where watchElsewhere sets its watches.
const elsewhere, elsewhereWatches = "/dsync-test-elsewhere/", 4000

// watchElsewhere gives s's session many exists watches on long paths with
// no node, as any long-lived Session of an application may have, so that
// go-zookeeper sets its watches again on a new connection in many
// setWatches requests (128 KiB each), each sent after the other's reply: a
// request sent right after the reconnect reaches the server before most of
// them.
func watchElsewhere(t *testing.T, ctx context.Context, s *zkconn.Session) {
	t.Helper()
	h, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prefix := elsewhere + strings.Repeat("x", 900)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < elsewhereWatches; i += 8 {
				if _, _, _, err := h.Conn().ExistsW(fmt.Sprintf("%s%d", prefix, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// awaitElsewhere returns once session id watches all of watchElsewhere's
// paths again.
func awaitElsewhere(t *testing.T, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err := shared.AwaitWatches(ctx, func(m map[string][]int64) bool {
		n = 0
		for p, ids := range m {
			if strings.HasPrefix(p, elsewhere) && slices.Contains(ids, id) {
				n++
			}
		}
		return n == elsewhereWatches
	})
	if err != nil {
		t.Fatalf("session %#x watches %d of its %d other paths again: %v", id, n, elsewhereWatches, err)
	}
}

// TestReviewGiveUpSignalLostWithConnection: W, third in line, watches X's
// handoff signal and gives up. Its delete sends that signal, which fires
// W's watch on the server, but the notification is lost with the
// connection. go-zookeeper still has the watch in its table (it never saw
// the event), so it sets it again on the next connection (setWatches);
// ZooKeeper sets an exists watch on a path with no node without looking at
// zxids. The delete, sent again, finds W's node gone and sends no signal;
// X then gives up without one (it never held), and W's session watched X's
// signal path for as long as it lived. W now says it no longer wants the
// watch (zkconn.ExistsWatch.Unwatch) before its delete, and the wire leaves
// it out of setWatches.
func TestReviewGiveUpSignalLostWithConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := setupSignal(t, ctx, false)
	there, _, gone, err := st.obs.ExistsW(st.nodeW)
	if err != nil || !there {
		t.Fatalf("ExistsW(%s) = %v, %v", st.nodeW, there, err)
	}
	st.p.DropReplies() // from now on nothing reaches W's client
	st.giveUpW(t)      // its delete sends X's signal
	<-gone             // applied: W's watch on X's signal fired on the server
	resent := st.p.Strike(zktest.Match{Op: zktest.OpSetWatches}, zktest.Drop)
	st.p.Heal() // W's connection closes; the notification is lost
	zktest.AwaitStruck(t, resent)
	st.giveUpX(t)
	st.a.Unlock()
	st.checkNoWatch(t)
}

// TestReviewGiveUpSignalBeforeSetWatches: the same with nothing lost. W
// gives up; its delete (which sends X's signal) is cut before it reaches
// the server, and sent again on the next connection as soon as the Session
// has its session back, before go-zookeeper's setWatches chunk that carries
// X's signal (see watchElsewhere): the signal fires nothing, and that chunk
// set the watch again.
func TestReviewGiveUpSignalBeforeSetWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := setupSignal(t, ctx, true)
	cut := st.p.Strike(zktest.Match{Op: zktest.OpDelete, Path: st.nodeW}, zktest.Cut)
	st.giveUpW(t)
	zktest.AwaitStruck(t, cut)
	awaitChildren(t, st.obs, st.path, 2) // sent again, and applied
	st.giveUpX(t)
	st.a.Unlock()
	awaitElsewhere(t, st.idW)
	st.checkNoWatch(t)
}

// TestReviewTakeBackAfterRevokedPredecessor: a revocation request written
// into the waiting X makes W list again and follow X a second time: two
// ExistsW on X's signal. X gives up without its signal and W takes its
// watch back; that must give up both calls' wants (one per path was
// counted once). takeBack's signal is cut, and sent again on the next
// connection before the setWatches chunk that carries X's signal.
func TestReviewTakeBackAfterRevokedPredecessor(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := setupSignal(t, ctx, true)
	if err := dsync.Revoke(ctx, st.sa, st.nodeX); err != nil {
		t.Fatal(err)
	}
	awaitWatch(t, shared, st.nodeX, st.idW) // set again by W's second follow
	cut := st.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: st.nodeX + ".handoff"}, zktest.Cut)
	st.giveUpX(t)
	zktest.AwaitStruck(t, cut) // W's takeBack: cut, sent again on the next connection
	awaitChildren(t, st.obs, st.path, 2)
	st.a.Unlock()
	if err := <-st.wdone; err != nil {
		t.Fatalf("W's LockContext = %v", err)
	}
	st.w.Unlock()
	awaitElsewhere(t, st.idW)
	st.checkNoWatch(t)
}

// TestReviewFailedExistsKeepsUnwanted: W follows X's signal twice (a
// revocation request into X), and the second request's reply never comes
// (Drop). W gives up; its delete's signal fires its watch, but the
// notification is lost with the connection, and the second request then
// fails. That failure must not make the first request's watch, still in
// go-zookeeper's table, wanted again (a count per path did).
func TestReviewFailedExistsKeepsUnwanted(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	// About 30s alone: the bound is for a stall.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := setupSignal(t, ctx, false)
	// The Session now closes a connection whose reply comes out of turn, so
	// the connection may drop before DropReplies, and W's session expire
	// while replies are dropped: then nothing is set again, and no
	// setWatches comes (checkNoWatch still checks what is left).
	sub := st.sw.Subscribe()
	defer sub.Stop()
	lost := make(chan struct{})
	go func() {
		for ev := range sub.C() {
			if ev.State == zkconn.StateLost {
				close(lost)
				return
			}
		}
	}()
	second := st.p.Strike(zktest.Match{Op: zktest.OpExists, Path: st.nodeX + ".handoff"}, zktest.Drop)
	if err := dsync.Revoke(ctx, st.sa, st.nodeX); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, second) // W follows X again; that request's reply is gone
	there, _, gone, err := st.obs.ExistsW(st.nodeW)
	if err != nil || !there {
		t.Fatalf("ExistsW(%s) = %v, %v", st.nodeW, there, err)
	}
	st.p.DropReplies()
	st.giveUpW(t)
	<-gone
	resent := st.p.Strike(zktest.Match{Op: zktest.OpSetWatches}, zktest.Drop)
	st.p.Heal()
	select {
	case <-resent.Struck():
	case <-lost:
		resent.Disarm()
	}
	st.giveUpX(t)
	st.a.Unlock()
	st.checkNoWatch(t)
}
