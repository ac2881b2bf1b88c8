package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 34: the Mutex core (queue join, handoff signal, takeBack,
// hold, gate, Unlock, TryLock, re-entry).

// r34Gone waits until node is gone, for at most d (a bound for the failure
// only: it returns as soon as the deletion is seen), and reports whether it
// went.
func r34Gone(t *testing.T, obs *zk.Conn, node string, d time.Duration) bool {
	t.Helper()
	deadline := time.After(d)
	for {
		there, _, ch, err := obs.ExistsW(node)
		if err != nil {
			t.Fatal(err)
		}
		if !there {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// TestReviewR34CreateReplySwallowedThenCtxEnds: b joins while a holds; b's
// create is applied and its reply swallowed on a live connection (Drop), and
// b's ctx ends. LockContext returns ctx.Err() (callOr gives up on the
// create), but the undo (the abandoned callback of createProtected) runs
// only when the create's call returns, and go-zookeeper never fails a
// request on a connection that answers pings: b's node stayed in the queue
// for as long as that connection lived, and once a unlocked nobody could
// take the lock. The Session now closes the connection when the listing
// sent behind the create is answered out of turn: the create fails, and
// its node is found and deleted.
func TestReviewR34CreateReplySwallowedThenCtxEnds(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	p := zktest.NewProxy(t, shared.Addr())
	b := dsync.NewMutex(dial(t, []string{p.Addr()}), path)
	f := p.Strike(createOf(path), zktest.Drop)
	defer f.Disarm()
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	res := make(chan error, 1)
	go func() {
		_, err := b.LockContext(ctxB)
		res <- err
	}()
	zktest.AwaitStruck(t, f)
	kids := orderedNames(awaitChildren(t, obs, path, 2)) // b's create is applied
	nodeB := path + "/" + kids[1]
	cancelB()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("b.LockContext = %v; want context.Canceled", err)
	}
	a.Unlock()
	if !r34Gone(t, obs, nodeB, 10*time.Second) {
		c := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
		ctxC, cancelC := context.WithTimeout(ctx, 2*time.Second)
		defer cancelC()
		_, err := c.LockContext(ctxC)
		t.Fatalf("b gave up, but its node %s is still queued 10s later (children %v); a newcomer's LockContext = %v", nodeB, children(t, obs, path), err)
	}
}

// TestReviewR34AbandonedDeleteReplySwallowedBlocksGate: m waits behind a's
// hold and gives up (ctx); the delete of its node is applied and its reply
// swallowed on a live connection (Drop). The lock is then free (a unlocks).
// m's next LockContext waits in the gate for the abandoned node's delete to
// settle (lock: m.gate.leave(settled(undoing))). go-zookeeper would wait for
// the swallowed reply as long as the connection lives, so LockContext slept
// until its ctx ended, and Lock for ever; the Session now closes the
// connection when the next reply (a ping's) comes out of turn, the delete
// is sent again and settles, and m holds.
func TestReviewR34AbandonedDeleteReplySwallowedBlocksGate(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(3*time.Second)) // a ping each second
	m := dsync.NewMutex(s, path)
	ctxM, cancelM := context.WithCancel(ctx)
	defer cancelM()
	res := make(chan error, 1)
	go func() {
		_, err := m.LockContext(ctxM)
		res <- err
	}()
	nodeM := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]
	awaitWatchOf(t, shared, nodeM, s) // m waits (watches its node)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: nodeM}, zktest.Drop)
	defer f.Disarm()
	cancelM()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("m.LockContext = %v; want context.Canceled", err)
	}
	zktest.AwaitStruck(t, f) // applied, reply swallowed
	awaitChildren(t, obs, path, 1)
	a.Unlock()
	awaitChildren(t, obs, path, 0) // the lock is free

	if _, err := m.LockContext(ctx); err != nil {
		t.Fatalf("m.LockContext on a free lock = %v (queue %v): it waited for the settling of the abandoned node's delete, whose reply never comes", err, children(t, obs, path))
	}
	m.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR34ReleaseReplySwallowedNextLockProceeds pins the contrast:
// an Unlock whose delete's reply is swallowed hands on sent, and the next
// LockContext of the same Mutex holds at once (passes).
func TestReviewR34ReleaseReplySwallowedNextLockProceeds(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := zktest.NewProxy(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{p.Addr()}), path)
	if _, err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	node := path + "/" + awaitChildren(t, obs, path, 1)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.Drop)
	defer f.Disarm()
	m.Unlock()
	zktest.AwaitStruck(t, f)
	ctx2, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	held, err := m.LockContext(ctx2)
	if err != nil {
		t.Fatalf("LockContext after an Unlock whose reply is swallowed = %v", err)
	}
	if held.Err() != nil {
		t.Fatalf("hold lost: %v", context.Cause(held))
	}
	if kids := awaitChildren(t, obs, path, 1); path+"/"+kids[0] == node {
		t.Fatal("the released node is still there")
	}
	m.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR34ReentryWithLostHoldReturnsCause: LockContext(held) for a hold
// that was lost (its node deleted) must return the hold context's cause,
// which wraps ErrLockLost ("If that hold has ended, it returns the hold
// context's cause"). LockContext checked ctx.Err() first, and a hold
// context that ended is done: it returned context.Canceled instead.
func TestReviewR34ReentryWithLostHoldReturnsCause(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + awaitChildren(t, obs, path, 1)[0]
	if err := obs.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, held, "deleted")
	_, err = m.LockContext(held)
	m.Unlock()
	if !errors.Is(err, dsync.ErrLockLost) {
		t.Fatalf("LockContext(lost hold's context) = %v; want the hold's cause %v", err, context.Cause(held))
	}
}

// r34Line queues h (holding) and then a and w behind it on path, a through
// a proxy of its own, and returns once w watches a's node and a's handoff
// signal (w is third: a's signal is what hands it the lock). a and w wait
// with LockContext(ctx); their results come on ares and wres.
type r34Line struct {
	path, nodeH, nodeA, nodeW string
	obs                       *zk.Conn
	p                         *zktest.Proxy
	sa, sw                    *zkconn.Session
	h, a, w                   *dsync.Mutex
	ares, wres                chan rvResult
}

func r34Queue(t *testing.T, ctx context.Context) *r34Line {
	t.Helper()
	l := &r34Line{path: lockPath(t), obs: observer(t, shared.Addr())}
	l.h = dsync.NewMutex(dial(t, []string{shared.Addr()}), l.path)
	if _, err := l.h.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	l.p = zktest.NewProxy(t, shared.Addr())
	l.sa = dial(t, []string{l.p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	l.a = dsync.NewMutex(l.sa, l.path)
	l.ares = make(chan rvResult, 1)
	go func() { held, err := l.a.LockContext(ctx); l.ares <- rvResult{held, err} }()
	l.nodeA = l.path + "/" + orderedNames(awaitChildren(t, l.obs, l.path, 2))[1]
	l.sw = dial(t, []string{shared.Addr()})
	l.w = dsync.NewMutex(l.sw, l.path)
	l.wres = make(chan rvResult, 1)
	go func() { held, err := l.w.LockContext(ctx); l.wres <- rvResult{held, err} }()
	line := orderedNames(awaitChildren(t, l.obs, l.path, 3))
	l.nodeH, l.nodeW = l.path+"/"+line[0], l.path+"/"+line[2]
	awaitWatchOf(t, shared, l.nodeA, l.sw)
	awaitWatchOf(t, shared, l.nodeA+".handoff", l.sw)
	awaitWatchOf(t, shared, l.nodeW, l.sw)
	return l
}

// TestReviewR34HandoffMultiStruck: a head that waited (a) releases; its
// delete, which sends its handoff signal in the same transaction, is applied
// with its reply lost (Lose), or not applied (Cut), and sent again after the
// reconnect. Either way w, which watched a's signal, holds exactly once a's
// node is gone, alone; no .handoff node and no watch is left; and a's next
// LockContext queues behind w (passes).
func TestReviewR34HandoffMultiStruck(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Lose, zktest.Cut} {
		t.Run(action.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l := r34Queue(t, ctx)
			sub := l.sa.Subscribe()
			defer sub.Stop()
			l.h.Unlock()
			rvHeld(t, l.ares, "a")
			f := l.p.Strike(zktest.Match{Op: zktest.OpDelete, Path: l.nodeA}, action)
			defer f.Disarm()
			l.a.Unlock()
			zktest.AwaitStruck(t, f)
			if action == zktest.Cut {
				rvWaits(t, l.wres, "w while a's release is not applied")
			}
			held := rvHeld(t, l.wres, "w")
			if held.Err() != nil {
				t.Fatalf("w's hold lost: %v", context.Cause(held))
			}
			if kids := awaitChildren(t, l.obs, l.path, 1); l.path+"/"+kids[0] != l.nodeW {
				t.Fatalf("children %v; want w's node only", kids)
			}
			rlAwait(t, sub, zkconn.StateReconnected)
			ares := rvGo(ctx, l.a.LockContext)
			awaitChildren(t, l.obs, l.path, 2)
			rvWaits(t, ares, "a while w holds")
			if held.Err() != nil {
				t.Fatalf("w's hold lost: %v", context.Cause(held))
			}
			l.w.Unlock()
			rvHeld(t, ares, "a again")
			l.a.Unlock()
			awaitChildren(t, l.obs, l.path, 0)
			if left := watchesUnder(t, l.path, l.obs); len(left) > 0 {
				t.Fatalf("watches left: %v", left)
			}
		})
	}
}

// TestReviewR34TakeBackStruck: w, third, follows x's signal; x gives up
// (no signal); w's takeBack (a transaction that checks w's node and sends
// x's signal) is applied with its reply lost (Lose) or not applied (Cut),
// and sent again. w lists again, follows h, holds only after h's Unlock,
// and no watch is left (passes).
func TestReviewR34TakeBackStruck(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Lose, zktest.Cut} {
		t.Run(action.String(), func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
			if _, err := h.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			x := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
			ctxX, cancelX := context.WithCancel(ctx)
			defer cancelX()
			xres := rvGo(ctxX, x.LockContext)
			nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]
			p := zktest.NewProxy(t, shared.Addr())
			sw := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
			w := dsync.NewMutex(sw, path)
			wres := rvGo(ctx, w.LockContext)
			nodeH := path + "/" + orderedNames(awaitChildren(t, obs, path, 3))[0]
			awaitWatchOf(t, shared, nodeX+".handoff", sw)
			f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: nodeX + ".handoff"}, action)
			defer f.Disarm()
			cancelX()
			if r := <-xres; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("x = %v; want context.Canceled", r.err)
			}
			zktest.AwaitStruck(t, f)
			awaitWatchOf(t, shared, nodeH, sw) // w follows h now
			rvWaits(t, wres, "w while h holds")
			h.Unlock()
			held := rvHeld(t, wres, "w")
			if held.Err() != nil {
				t.Fatalf("w's hold lost: %v", context.Cause(held))
			}
			w.Unlock()
			awaitChildren(t, obs, path, 0)
			if left := watchesUnder(t, path, obs); len(left) > 0 {
				t.Fatalf("watches left: %v", left)
			}
		})
	}
}

// TestReviewR34OperatorDeletesWaitingPredecessor: an operator deletes x, a
// waiter second in line, while w, third, follows x's signal. x queues again
// at the tail; w lists again and takes its watch on x's signal back, and
// holds only after h's Unlock; x holds after w; no watch is left (passes).
func TestReviewR34OperatorDeletesWaitingPredecessor(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := h.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	sx := dial(t, []string{shared.Addr()})
	x := dsync.NewMutex(sx, path)
	xres := rvGo(ctx, x.LockContext)
	nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]
	sw := dial(t, []string{shared.Addr()})
	w := dsync.NewMutex(sw, path)
	wres := rvGo(ctx, w.LockContext)
	line := orderedNames(awaitChildren(t, obs, path, 3))
	nodeH, nodeW := path+"/"+line[0], path+"/"+line[2]
	awaitWatchOf(t, shared, nodeX+".handoff", sw)
	awaitWatchOf(t, shared, nodeX, sx) // x watches its own node
	if err := obs.Delete(nodeX, -1); err != nil {
		t.Fatal(err)
	}
	again := orderedNames(awaitChildren(t, obs, path, 3))
	if again[1] != line[2] || path+"/"+again[2] == nodeX {
		t.Fatalf("queue %v after x's node was deleted; want h, w, then x's new node", again)
	}
	nodeX2 := path + "/" + again[2]
	awaitWatchOf(t, shared, nodeH, sw)
	awaitWatchOf(t, shared, nodeW+".handoff", sx)
	if ids := watches(t, shared)[nodeX+".handoff"]; len(ids) > 0 {
		t.Fatalf("sessions %v still watch the deleted x's signal", ids)
	}
	rvWaits(t, wres, "w while h holds")
	rvWaits(t, xres, "x while h holds")
	h.Unlock()
	heldW := rvHeld(t, wres, "w")
	rvWaits(t, xres, "x while w holds")
	w.Unlock()
	heldX := rvHeld(t, xres, "x")
	if heldW.Err() == nil || heldX.Err() != nil {
		t.Fatalf("w's hold %v after Unlock, x's %v", heldW.Err(), context.Cause(heldX))
	}
	if kids := children(t, obs, path); len(kids) != 1 || path+"/"+kids[0] != nodeX2 {
		t.Fatalf("children %v; want x's new node", kids)
	}
	x.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left: %v", left)
	}
}

// TestReviewR34LockAfterUnlockCut: the delete of m's Unlock is written and
// cut before it reaches the server; the next LockContext of m, through the
// same Session, may create its node before the delete is sent again. It
// must hold only once the old node is gone, with one node (passes).
func TestReviewR34LockAfterUnlockCut(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	m := dsync.NewMutex(s, path)
	for range 5 {
		if _, err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		node := path + "/" + awaitChildren(t, obs, path, 1)[0]
		f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.Cut)
		m.Unlock()
		zktest.AwaitStruck(t, f)
		held, err := m.LockContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held.Err() != nil {
			t.Fatalf("hold lost: %v", context.Cause(held))
		}
		if ok, _, err := obs.Exists(node); err != nil || ok {
			t.Fatalf("holds while its released node %s is still there (%v)", node, err)
		}
		if kids := children(t, obs, path); len(kids) != 1 {
			t.Fatalf("children %v; want one", kids)
		}
		m.Unlock()
		awaitChildren(t, obs, path, 0)
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left: %v", left)
	}
}

// TestReviewR34DeadlineAtEachJoinRequest: w joins third in line (behind
// holder h and waiter x) with a deadline, and the network of w's session
// goes silent (BlackHole) at one request of the join: the create, the
// listing, the exists watch on x's signal, a getData watch (x's or its own),
// or the takeBack of x's signal after x gives up. LockContext returns
// DeadlineExceeded by its deadline (go-zookeeper would notice the silence
// only after two thirds of the 10s session timeout); once the network heals
// no node of w's and no watch is left (passes).
func TestReviewR34DeadlineAtEachJoinRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(path, nodeX string) zktest.Match
		xLeft bool // x gives up once w waits: w's takeBack is struck
	}{
		{"create", func(path, _ string) zktest.Match { return createOf(path) }, false},
		{"listing", func(path, _ string) zktest.Match { return zktest.Match{Op: zktest.OpGetChildren2, Path: path} }, false},
		{"signal exists", func(_, nodeX string) zktest.Match {
			return zktest.Match{Op: zktest.OpExists, Path: nodeX + ".handoff"}
		}, false},
		{"getData", func(path, _ string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}
		}, false},
		{"takeBack", func(_, nodeX string) zktest.Match {
			return zktest.Match{Op: zktest.OpMulti, Path: nodeX + ".handoff"}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // beside the other requests' cases only: this test is serial
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			bg, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
			if _, err := h.LockContext(bg); err != nil {
				t.Fatal(err)
			}
			x := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
			ctxX, cancelX := context.WithCancel(bg)
			defer cancelX()
			xres := rvGo(ctxX, x.LockContext)
			nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]
			p := zktest.NewProxy(t, shared.Addr())
			sw := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
			w := dsync.NewMutex(sw, path)
			f := p.Strike(tc.match(path, nodeX), zktest.BlackHole)
			defer f.Disarm()
			ctx, cancelW := context.WithTimeout(bg, 2*time.Second)
			defer cancelW()
			res := make(chan error, 1)
			go func() {
				_, err := w.LockContext(ctx)
				if err == nil {
					w.Unlock()
				}
				res <- err
			}()
			if tc.xLeft {
				awaitWatchOf(t, shared, nodeX+".handoff", sw)
				cancelX()
				<-xres
			}
			zktest.AwaitStruck(t, f)
			err := <-res
			deadline, _ := ctx.Deadline()
			if late := time.Since(deadline); late > slack {
				t.Errorf("LockContext returned %v after its deadline", late)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("LockContext = %v; want DeadlineExceeded", err)
			}
			p.Heal()
			want := 2
			if tc.xLeft {
				want = 1
			}
			awaitChildren(t, obs, path, want) // h's (and x's)
			h.Unlock()
			if !tc.xLeft {
				rvHeld(t, xres, "x")
				x.Unlock()
			}
			awaitChildren(t, obs, path, 0)
			// w's session may still be reconnecting: its watches go with
			// the black-holed connection, or fire on the deletes.
			ctxW, cancel := context.WithTimeout(bg, 30*time.Second)
			defer cancel()
			if err := shared.AwaitWatches(ctxW, func(m map[string][]int64) bool {
				for p, ids := range m {
					if (p == path || len(p) > len(path) && p[:len(path)+1] == path+"/") && len(ids) > 0 {
						for _, id := range ids {
							if id != obs.SessionID() {
								return false
							}
						}
					}
				}
				return true
			}); err != nil {
				t.Fatalf("watches left: %v", watchesUnder(t, path, obs))
			}
		})
	}
}

// TestReviewR34RWReentryWithLostHoldReturnsCause is the same for an
// RWMutex: RLockContext given a lost read hold's context (re-entry), and
// given a lost write hold's context (a downgrade), returns the hold's cause,
// which wraps ErrLockLost, and sends nothing.
func TestReviewR34RWReentryWithLostHoldReturnsCause(t *testing.T) {
	for _, kind := range []string{"read", "write"} {
		t.Run(kind, func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			lock, unlock := rw.RLockContext, rw.RUnlock
			if kind == "write" {
				lock, unlock = rw.LockContext, rw.Unlock
			}
			held, err := lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			node := path + "/" + awaitChildren(t, obs, path, 1)[0]
			if err := obs.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			awaitLost(t, held, "deleted")
			_, err = rw.RLockContext(held)
			unlock()
			if !errors.Is(err, dsync.ErrLockLost) {
				t.Fatalf("RLockContext(lost %s hold's context) = %v; want the hold's cause %v", kind, err, context.Cause(held))
			}
			assertEmpty(t, path)
		})
	}
}

// TestReviewR34ReentryWithCanceledDerivedCtx: a context derived from a live
// hold's context and canceled re-enters nothing: LockContext and
// RLockContext (re-entry, and a downgrade) return ctx.Err(), as a ctx
// already done must, and the hold is as it was (one Unlock ends it).
func TestReviewR34ReentryWithCanceledDerivedCtx(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path+"-rw")
	mheld, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wheld, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rheld, err := rw.RLockContext(wheld) // a downgrade: both held
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Mutex.LockContext":             func() error { _, err := m.LockContext(canceledFrom(mheld)); return err },
		"RWMutex.RLockContext re-entry": func() error { _, err := rw.RLockContext(canceledFrom(rheld)); return err },
		"RWMutex.RLockContext downgrade": func() error {
			_, err := rw.RLockContext(canceledFrom(wheld))
			return err
		},
	} {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s(a canceled context derived from a live hold's) = %v; want context.Canceled", name, err)
		}
	}
	if n := len(children(t, obs, path+"-rw")); n != 2 {
		t.Errorf("%d nodes at the RWMutex; want its write node and one read node", n)
	}
	m.Unlock()
	rw.RUnlock()
	rw.Unlock()
	if mheld.Err() == nil || rheld.Err() == nil || wheld.Err() == nil {
		t.Error("a hold outlived its one Unlock: the canceled call re-entered it")
	}
	assertEmpty(t, path)
	assertEmpty(t, path+"-rw")
}

// canceledFrom returns a context derived from parent, already canceled.
func canceledFrom(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx
}
