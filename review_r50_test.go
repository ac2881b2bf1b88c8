package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 50: failure paths that round 48 left unreached, each driven
// at an exact request, by an operator's write, or by a ctx ending while
// the code waits at a known place.

// r50Blocked waits until a goroutine of this process is blocked in a
// select in the function named fn (as a stack trace spells it, e.g.
// `dsync.(*queue).past`): a wait no request marks.
func r50Blocked(t *testing.T, fn string) { t.Helper(); blockedIn(t, fn, "", 1) }

// blockedIn waits until n goroutines of this process whose stacks name
// caller (any, if caller is empty) are blocked in a select in the function
// named fn.
func blockedIn(t *testing.T, fn, caller string, n int) {
	t.Helper()
	re := regexp.MustCompile(`^goroutine \d+ \[select[^\]]*\]:\n[^\n]*` + regexp.QuoteMeta(fn) + `\(`)
	buf := make([]byte, 1<<20)
	deadline := time.After(reviewBound)
	for {
		blocked := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if re.MatchString(g) && strings.Contains(g, caller) {
				blocked++
			}
		}
		if blocked >= n {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%d goroutines of %q waited in %s within %v; want %d", blocked, caller, fn, reviewBound, n)
		case <-time.After(time.Millisecond): // poll the goroutines' state
		}
	}
}

// TestReviewR50DowngradeWriteRefused pins rwmutex.go's downgrade when its
// transaction (the read node's create with the write to the write node)
// fails with an error other than zk.ErrBadVersion: an operator has taken
// the create permission off the lock path. RLockContext with the write
// hold's context must return that error (wrapping zk.ErrNoAuth) at once,
// not retry until its ctx ends; no read node is made, the write hold goes
// on, and after Unlock nothing is left.
func TestReviewR50DowngradeWriteRefused(t *testing.T) {
	ctx, path, obs := r45Start(t)
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	held, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodeW := awaitChildren(t, obs, path, 1)[0]
	if _, err := obs.SetACL(path, zk.WorldACL(zk.PermAll&^zk.PermCreate), -1); err != nil { // an operator
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(held, 5*time.Second)
	defer cancel()
	if _, err := rw.RLockContext(dctx); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("RLockContext(write hold) with creates refused = %v; want an error wrapping zk.ErrNoAuth", err)
	}
	if got := awaitChildren(t, obs, path, 1); got[0] != nodeW {
		t.Errorf("children of %s = %v; want only the write node %s", path, got, nodeW)
	}
	if held.Err() != nil {
		t.Errorf("write hold ended by a refused downgrade: %v", context.Cause(held))
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR50DowngradeWatchCtxEnds pins rwmutex.go's downgrade when the
// watch on its new read node fails (its reply dropped, and ctx ends): the
// read node, made, must be deleted (e.remove), and RLockContext must return
// ctx.Err() within its ctx plus slack; after Unlock no node and no watch
// is left. (The Session closes the connection whose reply is missing, so
// the write hold, LostOnSuspension, is lost meanwhile; its node stays
// until Unlock.)
func TestReviewR50DowngradeWatchCtxEnds(t *testing.T) {
	ctx, path, obs := r45Start(t)
	p, s := r45Proxied(t)
	rw := dsync.NewRWMutex(s, path)
	held, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodeW := path + "/" + awaitChildren(t, obs, path, 1)[0]
	// The write node is read by the downgrade, and again by its hold (its
	// watch fired by the downgrade's write); the first read of another
	// node there is the watch on the read node.
	exact := zktest.Match{Op: zktest.OpGetData, Path: nodeW}
	p.Strike(exact, zktest.Pass)
	p.Strike(exact, zktest.Pass)
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}, zktest.Drop)
	dctx, cancel := context.WithCancel(held)
	defer cancel()
	res := lockRW(dctx, rw.RLockContext)
	zktest.AwaitStruck(t, f)
	cancel()
	start := time.Now()
	if r := reviewRecv(t, "RLockContext", res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("RLockContext(write hold) = %v; want context.Canceled", r.err)
	}
	if d := time.Since(start); d > slack {
		t.Errorf("RLockContext returned %v after its ctx ended; want within %v", d, slack)
	}
	if got := awaitChildren(t, obs, path, 1); path+"/"+got[0] != nodeW {
		t.Errorf("children of %s = %v; want only the write node (the read node orphaned)", path, got)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// r50OwnTry starts tc's Try as startOwnTry does (the session's own node
// ahead, its delete held back), with a ctx the test ends by the returned
// cancel.
func r50OwnTry(t *testing.T, tc ownTry, path string) (p *zktest.Proxy, res <-chan tryResult, open func(), settled <-chan struct{}, cancel context.CancelFunc) {
	t.Helper()
	cancels := make(chan context.CancelFunc, 1)
	try := tc.try
	tc.try = func(ctx context.Context, s *zkconn.Session, path string) (func(), error) {
		ctx, cancel := context.WithCancel(ctx)
		cancels <- cancel
		return try(ctx, s, path)
	}
	p, res, open, settled = startOwnTry(t, tc, path)
	return p, res, open, settled, <-cancels
}

// r50TryCanceled checks that a Try returned ctx.Err() (context.Canceled)
// within slack of start.
func r50TryCanceled(t *testing.T, res <-chan tryResult, start time.Time) {
	t.Helper()
	r := reviewRecv(t, "the Try", res)
	if r.err == nil {
		r.release()
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Try = %v; want context.Canceled", r.err)
	}
	if d := time.Since(start); d > slack {
		t.Errorf("the Try returned %v after its ctx ended; want within %v", d, slack)
	}
}

// TestReviewR50TryCtxEndsWaitingOwnDelete pins queue.go's past and
// weighted.go's grant when ctx ends while a Try waits for its session's
// own delete of the node ahead (see own_delete_test.go): the Try must
// return ctx.Err() within its ctx plus slack, and once that delete goes
// out nothing is left (the Try's own node deleted).
func TestReviewR50TryCtxEndsWaitingOwnDelete(t *testing.T) {
	for _, tc := range ownTries {
		t.Run(tc.name, func(t *testing.T) {
			obs := observer(t, shared.Addr())
			path := lockPath(t)
			_, res, open, settled, cancel := r50OwnTry(t, tc, path)
			if tc.parent == "" {
				r50Blocked(t, "dsync.(*queue).past")
			} else {
				r50Blocked(t, "dsync.(*Weighted).grant")
			}
			cancel()
			r50TryCanceled(t, res, time.Now())
			open()
			reviewRecv(t, "the held-back delete", settled)
			awaitChildren(t, obs, path+tc.parent, 0)
		})
	}
}

// TestReviewR50TryRelistFails pins queue.go's past (and weighted.go's
// grant) when the listing after the session's own delete settled fails:
// its reply is dropped and ctx ends (the Try returns ctx.Err() within its
// ctx plus slack), or an operator has taken the read permission off the
// parent meanwhile (the Try returns that error, wrapping zk.ErrNoAuth, and
// does not take the lock on a listing it never got). Either way nothing is
// left behind.
func TestReviewR50TryRelistFails(t *testing.T) {
	for _, refused := range []bool{false, true} {
		for _, tc := range ownTries {
			t.Run(fmt.Sprintf("%s/refused=%v", tc.name, refused), func(t *testing.T) {
				obs := observer(t, shared.Addr())
				path := lockPath(t)
				p, res, open, settled, cancel := r50OwnTry(t, tc, path)
				defer cancel()
				if !refused {
					f := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path + tc.parent}, zktest.Drop)
					open()
					zktest.AwaitStruck(t, f)
					cancel()
					r50TryCanceled(t, res, time.Now())
					reviewRecv(t, "the held-back delete", settled)
					awaitChildren(t, obs, path+tc.parent, 0)
					return
				}
				if _, err := obs.SetACL(path+tc.parent, zk.WorldACL(zk.PermAll&^zk.PermRead), -1); err != nil { // an operator
					t.Fatal(err)
				}
				open()
				r := reviewRecv(t, "the Try", res)
				if r.err == nil {
					r.release()
				}
				if !errors.Is(r.err, zk.ErrNoAuth) {
					t.Fatalf("Try = %v with the listing again refused; want an error wrapping zk.ErrNoAuth", r.err)
				}
				reviewRecv(t, "the held-back delete", settled)
				if _, err := obs.SetACL(path+tc.parent, zk.WorldACL(zk.PermAll), -1); err != nil {
					t.Fatal(err)
				}
				awaitChildren(t, obs, path+tc.parent, 0)
			})
		}
	}
}

// TestReviewR50CheckedWaiterNodeDeleted pins queue.go's ahead finding the
// waiter's own node gone (errNodeGone) in a checked queue, a Weighted's
// internal lock, whose waiters set no watch on their own node. Max 1: H
// holds the lease, A holds the internal lock waiting for it, B waits
// behind A and W behind B. An operator deletes W's node, then B gives up:
// W, deeper in line and with no handoff signal, lists again and must not
// find its node. It must queue again (a new node behind A's), make no lease
// meanwhile (H's and A's, made and waiting to fit, are the only ones), and get its lease only after A has had and released its own;
// nothing is left afterwards.
func TestReviewR50CheckedWaiterNodeDeleted(t *testing.T) {
	ctx, path, obs := r45Start(t)
	locks := path + "/locks"
	weighted := func(s *zkconn.Session) *dsync.Weighted { return dsync.NewWeighted(s, path, 1) }
	acquire := func(ctx context.Context, w *dsync.Weighted) <-chan error {
		res := make(chan error, 1)
		go func() { res <- w.Acquire(ctx, 1) }()
		return res
	}
	h := weighted(dial(t, []string{shared.Addr()}))
	if err := h.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	lease := awaitChildren(t, obs, path+"/leases", 1)[0]
	a := weighted(dial(t, []string{shared.Addr()}))
	ares := acquire(ctx, a)
	nodeA := awaitChildren(t, obs, locks, 1)[0]
	leaseA := r45Only(t, obs, path+"/leases", 2, lease) // made, waiting to fit
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	bres := acquire(bctx, weighted(dial(t, []string{shared.Addr()})))
	nodeB := r45Only(t, obs, locks, 2, nodeA)
	pw, sw := r45Proxied(t)
	w := weighted(sw)
	wres := acquire(ctx, w)
	nodeW := r45Only(t, obs, locks, 3, nodeA, nodeB)
	idW := sessionID(t, sw)
	awaitWatch(t, shared, locks+"/"+nodeB+".handoff", idW)
	awaitWatch(t, shared, locks+"/"+nodeB, idW)

	if err := obs.Delete(locks+"/"+nodeW, -1); err != nil { // an operator
		t.Fatal(err)
	}
	listed := pw.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: locks}, zktest.Pass)
	defer listed.Disarm()
	cancelB()
	if err := reviewRecv(t, "B's Acquire", bres); !errors.Is(err, context.Canceled) {
		t.Fatalf("B's Acquire = %v; want context.Canceled", err)
	}
	zktest.AwaitStruck(t, listed)
	r45Only(t, obs, locks, 2, nodeA) // W queued again
	if got := r45Only(t, obs, path+"/leases", 2, lease); got != leaseA {
		t.Fatalf("leases besides H's = %s; want only A's %s", got, leaseA)
	}
	select {
	case err := <-wres:
		t.Fatalf("W's Acquire returned (%v) while A holds the internal lock; want it waiting", err)
	case err := <-ares:
		t.Fatalf("A's Acquire returned (%v) while H holds the lease; want it waiting", err)
	default:
	}
	h.Release(1)
	if err := reviewRecv(t, "A's Acquire", ares); err != nil {
		t.Fatalf("A's Acquire = %v", err)
	}
	select {
	case err := <-wres:
		t.Fatalf("W's Acquire returned (%v) while A holds the lease; want it waiting", err)
	default:
	}
	a.Release(1)
	if err := reviewRecv(t, "W's Acquire", wres); err != nil {
		t.Fatalf("W's Acquire = %v", err)
	}
	w.Release(1)
	assertEmpty(t, path)
}

// TestReviewR50WriterRetakesAfterReads pins rwmutex.go's awaitNoReads
// reading the write node once the process's read holds have ended (the
// read's error). A read hold of the process is lost (an operator deletes
// its node) but not yet ended by RUnlock; a writer of the same RWMutex then
// holds in ZooKeeper and waits for that read hold to end. Meanwhile:
//   - node deleted: an operator deletes the writer's node too (Lock: the
//     hold is untracked, so nothing tells it). After RUnlock the read finds
//     the node gone: the writer must take the lock again, not hand out a
//     hold without a node: another client's TryLock fails while it holds,
//     and after Unlock nothing is left.
//   - ctx ends: the read's reply is dropped and ctx ends (LockContext).
//     It must return ctx.Err() within its ctx plus slack, its node deleted.
func TestReviewR50WriterRetakesAfterReads(t *testing.T) {
	for _, deleted := range []bool{true, false} {
		t.Run(map[bool]string{true: "node deleted", false: "ctx ends"}[deleted], func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			p, s := r45Proxied(t)
			rw := dsync.NewRWMutex(s, path)
			rheld, err := rw.RLockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := obs.Delete(path+"/"+awaitChildren(t, obs, path, 1)[0], -1); err != nil { // an operator
				t.Fatal(err)
			}
			awaitLost(t, rheld, "deleted")
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wres := lockRW(wctx, func(ctx context.Context) (context.Context, error) {
				if deleted {
					rw.Lock()
					return nil, nil
				}
				return rw.LockContext(ctx)
			})
			nodeW := path + "/" + awaitChildren(t, obs, path, 1)[0]
			r50Blocked(t, "dsync.(*RWMutex).awaitNoReads")
			if deleted {
				if err := obs.Delete(nodeW, -1); err != nil { // an operator
					t.Fatal(err)
				}
				rw.RUnlock()
				if r := reviewRecv(t, "Lock", wres); r.err != nil {
					t.Fatal(r.err)
				}
				if _, err := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path).TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
					t.Fatalf("another client's TryLockContext while the writer holds = %v; want ErrWouldBlock", err)
				}
				rw.Unlock()
				awaitChildren(t, obs, path, 0)
				return
			}
			f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: nodeW}, zktest.Drop)
			rw.RUnlock()
			zktest.AwaitStruck(t, f)
			cancel()
			start := time.Now()
			if r := reviewRecv(t, "LockContext", wres); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("LockContext = %v; want context.Canceled", r.err)
			}
			if d := time.Since(start); d > slack {
				t.Errorf("LockContext returned %v after its ctx ended; want within %v", d, slack)
			}
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewR50TryRLockWriterHolds pins rwmutex.go's rlock giving back a
// read hold taken without waiting (TryRLockContext) because a writer of the
// same RWMutex holds meanwhile, its node lost: the reader passed the gate
// first and waits for its session's own delete of a write node X ahead
// (see own_delete_test.go). An operator deletes X and the reader's node;
// the writer (Lock) gets the lock, and the operator deletes its node too.
// The reader, let go, finds its node gone and queues again, first in
// ZooKeeper now: it must give that node back and return ErrWouldBlock, not
// hold beside the writer of its process; no node is left.
func TestReviewR50TryRLockWriterHolds(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	rws := make(chan *dsync.RWMutex, 1)
	tc := ownTry{"RWMutex reader behind a write node", "", "__WRIT__", func(ctx context.Context, s *zkconn.Session, path string) (func(), error) {
		rw := dsync.NewRWMutex(s, path)
		rws <- rw
		_, err := rw.TryRLockContext(ctx)
		return rw.RUnlock, err
	}}
	_, res, open, settled := startOwnTry(t, tc, path)
	rw := <-rws
	for _, n := range awaitChildren(t, obs, path, 2) { // X and the reader's
		if err := obs.Delete(path+"/"+n, -1); err != nil { // an operator
			t.Fatal(err)
		}
	}
	wres := lockRW(context.Background(), func(context.Context) (context.Context, error) { rw.Lock(); return nil, nil })
	reviewRecv(t, "Lock", wres)
	if err := obs.Delete(path+"/"+awaitChildren(t, obs, path, 1)[0], -1); err != nil { // an operator
		t.Fatal(err)
	}
	open()
	r := reviewRecv(t, "TryRLockContext", res)
	if r.err == nil {
		r.release()
	}
	if !errors.Is(r.err, dsync.ErrWouldBlock) {
		t.Fatalf("TryRLockContext while a writer of its RWMutex holds = %v; want ErrWouldBlock", r.err)
	}
	reviewRecv(t, "the held-back delete", settled)
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}
