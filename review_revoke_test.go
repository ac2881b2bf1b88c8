package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Review of revocation (hold.go, revoke.go) and MultiLock (multilock.go, the
// members' unlock(held)).

// rrRecover runs f and returns what it panicked with, or nil.
func rrRecover(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// rrChildrenAtLeast returns a channel closed once path has at least n
// children (watched with obs, no polling). The goroutine ends with the test.
func rrChildrenAtLeast(t *testing.T, obs *zk.Conn, path string, n int) <-chan struct{} {
	out := make(chan struct{})
	stop := make(chan struct{})
	ended := make(chan struct{})
	t.Cleanup(func() { close(stop); <-ended })
	go func() {
		defer close(ended)
		for {
			ok, _, appeared, err := obs.ExistsW(path)
			if err != nil {
				return
			}
			var changed <-chan zk.Event
			var kids []string
			if ok {
				if kids, _, changed, err = obs.ChildrenW(path); errors.Is(err, zk.ErrNoNode) {
					continue
				} else if err != nil {
					return
				}
			}
			if len(kids) >= n {
				close(out)
				return
			}
			select {
			case <-appeared:
			case <-changed:
			case <-stop:
				return
			}
		}
	}()
	return out
}

// TestReviewRevokeMultiRLockerTakenByRUnlock pins an Unlock that releases
// someone else's hold: a goroutine's plain RUnlock releases the newest read
// hold of rw in the process, which is the read hold a MultiLock took through
// rw.RLocker(), not the goroutine's own. The MultiLock's hold context is
// canceled (cause context.Canceled, not a loss) while it believes it holds,
// its Unlock panics, and the goroutine's own read node is never deleted.
func TestReviewRevokeMultiRLockerTakenByRUnlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path+"/rw")
	ml := dsync.NewMultiLock(dsync.NewMutex(s, path+"/m"), rw.RLocker())

	rw.RLock() // a goroutine's own read hold
	own := awaitChildren(t, obs, path+"/rw", 1)[0]
	mlHeld, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kids := awaitChildren(t, obs, path+"/rw", 2)
	mlNode := slices.DeleteFunc(kids, func(k string) bool { return k == own })[0]

	rw.RUnlock() // that goroutine is done reading
	left := awaitChildren(t, obs, path+"/rw", 1)[0]
	if left != mlNode {
		t.Errorf("RUnlock deleted the MultiLock's read node %s and left the caller's own %s", mlNode, own)
	}
	if mlHeld.Err() != nil {
		t.Errorf("MultiLock hold context ended by another goroutine's RUnlock (cause %v)", context.Cause(mlHeld))
	}
	if r := rrRecover(ml.Unlock); r != nil {
		t.Errorf("MultiLock.Unlock panicked: %v", r)
		rw.RUnlock() // the orphaned read hold, for the cleanup
	}
	awaitChildren(t, obs, path+"/rw", 0)
	awaitChildren(t, obs, path+"/m", 0)
}

// TestReviewRevokeMultiReadOnlyTwice pins a MultiLock whose members are all
// read sides: nothing excludes a second hold of it (readers share), and the
// second overwrites the first in ml.cur. One Unlock releases the second; the
// next panics "unlock of unlocked multilock", and the first hold's read nodes
// and watches stay for as long as the session lives.
func TestReviewRevokeMultiReadOnlyTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw1, rw2 := dsync.NewRWMutex(s, path+"/a"), dsync.NewRWMutex(s, path+"/b")
	ml := dsync.NewMultiLock(rw1.RLocker(), rw2.RLocker())
	h1, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := ml.TryLockContext(ctx)
	if errors.Is(err, dsync.ErrWouldBlock) {
		ml.Unlock() // the MultiLock excludes itself: fine
		awaitChildren(t, obs, path+"/a", 0)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// Two holds, two Unlocks: both must end, nothing left.
	for i := range 2 {
		if r := rrRecover(ml.Unlock); r != nil {
			t.Errorf("Unlock %d of 2 panicked: %v", i+1, r)
		}
	}
	if h1.Err() == nil {
		t.Error("first hold never released: its read nodes stay until the session ends")
		rw1.RUnlock()
		rw2.RUnlock()
	}
	if h2.Err() == nil {
		t.Error("second hold never released")
	}
	awaitChildren(t, obs, path+"/a", 0)
	awaitChildren(t, obs, path+"/b", 0)
}

// TestReviewRevokeMultiLockReturnsLostMember pins two live holders: Lock
// (untracked) takes member a, waits for member b, and a's session expires
// meanwhile; another process takes a. When b comes free, Lock returns as if
// it held both, while the other process holds a. LockContext would have
// seen the loss and started again; Lock never looks.
func TestReviewRevokeMultiLockReturnsLostMember(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	a := dsync.NewMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second)), path+"/a")
	b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/b")
	ml := dsync.NewMultiLock(a, b)

	holderB := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/b")
	holderB.Lock()
	done := make(chan struct{})
	go func() {
		ml.Lock()
		close(done)
	}()
	awaitChildren(t, obs, path+"/a", 1) // ml holds a
	awaitChildren(t, obs, path+"/b", 2) // and waits for b

	p.BlackHole()                       // a's session expires
	awaitChildren(t, obs, path+"/a", 0) // the server deleted ml's node of a
	x := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/a")
	xHeld, err := x.TryLockContext(ctx)
	if err != nil {
		t.Fatalf("another process could not take a after the expiry: %v", err)
	}
	requeued := rrChildrenAtLeast(t, obs, path+"/a", 2) // ml queues for a again
	holderB.Unlock()
	p.Heal() // a's Session starts a new ZooKeeper session
	select {
	case <-done:
		if xHeld.Err() == nil {
			t.Error("MultiLock.Lock returned holding a and b while another process holds a (two live holders of a)")
		}
	case <-requeued:
		select {
		case <-done:
			t.Error("MultiLock.Lock returned while another process holds a")
		default:
		}
	}
	x.Unlock()
	<-done
	ml.Unlock()
	awaitChildren(t, obs, path+"/a", 0)
	awaitChildren(t, obs, path+"/b", 0)
}

// TestReviewRevokeLostReplyThenReleased pins a guessed outcome: Revoke's
// write is applied but its reply never comes; the holder sees the request
// and releases; after the reconnect Revoke reads the node, finds none and
// returns ErrNoNode ("nobody to ask"), though its request was delivered and
// acted on. The outcome is unknown to Revoke: it must say so (or nil), not
// that nobody was there. RevokeHolders turns this ErrNoNode into "released
// before it was asked" and leaves the holder out; dsync revoke exits 1.
func TestReviewRevokeLostReplyThenReleased(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	revoker := dial(t, []string{p.Addr()})
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: node}, zktest.Drop)
	res := make(chan error, 1)
	go func() { res <- dsync.Revoke(ctx, revoker, node) }()
	zktest.AwaitStruck(t, f)
	awaitClosed(t, dsync.Revoked(held), "Revoked after the write whose reply was dropped")
	m.Unlock() // the holder complies
	awaitChildren(t, obs, path, 0)
	p.Cut() // Revoke learns its reply is lost
	err = <-res
	if errors.Is(err, dsync.ErrNoNode) && !errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Errorf("Revoke = %v; want nil or ErrOutcomeUnknown: the request was written and acted on, not \"no such node\"", err)
	} else if err != nil && !errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Errorf("Revoke = %v", err)
	}
}

// TestReviewRevokeHoldersRacingHandoff pins a missed revocation: RevokeHolders
// lists holder A; before its request reaches A's node, A releases and B
// holds. Once took A's node gone for "nobody holds" and returned no holder
// and a nil error, while B held all along and was never asked.
//   - Read: Revoke's read of A's node (the second read there, after the
//     listing's) is black-holed, so no write is sent: A is gone for sure,
//     and RevokeHolders must list again and ask B.
//   - Write: the write into A's node is black-holed, so RevokeHolders cannot
//     know whether A was asked before it released: it must say so
//     (ErrOutcomeUnknown and ErrNoNode) rather than report nobody asked.
func TestReviewRevokeHoldersRacingHandoff(t *testing.T) {
	t.Parallel()
	for _, write := range []bool{false, true} {
		t.Run(map[bool]string{false: "Read", true: "Write"}[write], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			p := zktest.NewProxy(t, shared.Addr())
			admin := dial(t, []string{p.Addr()})
			a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
			b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
			if _, err := a.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			got := lockAsync(b)
			names := orderedNames(awaitChildren(t, obs, path, 2))
			aNode, bNode := path+"/"+names[0], path+"/"+names[1]
			var f *zktest.Fault
			if write {
				f = p.Strike(zktest.Match{Op: zktest.OpSetData, Path: aNode}, zktest.BlackHole)
			} else {
				p.Strike(zktest.Match{Op: zktest.OpGetData, Path: aNode}, zktest.Pass) // the listing's
				f = p.Strike(zktest.Match{Op: zktest.OpGetData, Path: aNode}, zktest.BlackHole)
			}
			type result struct {
				asked []dsync.Participant
				err   error
			}
			res := make(chan result, 1)
			go func() {
				asked, err := dsync.RevokeHolders(ctx, admin, path)
				res <- result{asked, err}
			}()
			zktest.AwaitStruck(t, f) // swallowed, not applied
			a.Unlock()               // handoff to B
			r := <-got
			if r.err != nil {
				t.Fatal(r.err)
			}
			p.Heal()
			out := <-res
			bAsked := nodeData(t, obs, bNode) == "__REVOKE__"
			if write {
				if len(out.asked) != 0 || !errors.Is(out.err, dsync.ErrOutcomeUnknown) || !errors.Is(out.err, dsync.ErrNoNode) || bAsked {
					t.Errorf("RevokeHolders = %v, %v (B asked: %v); want nobody asked and an error wrapping ErrOutcomeUnknown and ErrNoNode", out.asked, out.err, bAsked)
				}
			} else if out.err != nil || len(out.asked) != 1 || out.asked[0].Path == aNode || !bAsked {
				t.Errorf("RevokeHolders = %v, %v (B asked: %v); want B asked, alone, and a nil error", out.asked, out.err, bAsked)
			}
			b.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewRevokeHoldersParentPath pins RevokeHolders on a path that is not
// a lock's but the parent of one: its only child, the container of the lock
// at PATH/sub, has no lock- in its name and empty data, so it is taken for a
// mutex holder, "__REVOKE__" is written into it, and it is reported asked.
func TestReviewRevokeHoldersParentPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/sub")
	m.Lock()
	defer m.Unlock()
	asked, err := dsync.RevokeHolders(ctx, dial(t, []string{shared.Addr()}), path)
	if len(asked) != 0 {
		t.Errorf("RevokeHolders(parent of a lock) asked %+v (err %v); want nobody", asked, err)
	}
	if got := nodeData(t, obs, path+"/sub"); got != "" {
		t.Errorf("data of the container %s = %q; want it untouched", path+"/sub", got)
	}
}

// Areas that held: kept as regression tests.

// TestReviewRevokeUnlockWithRearmOut: the re-arm read of a revocable hold is
// out and its reply never comes; Unlock returns at once, deletes the node,
// and the watcher and the re-arm's goroutine end (goleak checks the package).
//
// Since the Session closes a connection at a reply out of turn, the
// swallowed reply fails the re-arm at the next ping's reply (a third of the
// timeout later), so an Unlock that waited for the re-arm's request would
// return then, within the bound: the test asks where Unlock's delete goes
// instead. It must be written on the connection the re-arm is still
// unanswered on, before that connection drops; it is black-holed there
// (nothing answered, the connection up, until Heal).
func TestReviewRevokeUnlockWithRearmOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	m := dsync.NewMutex(s, path, dsync.Revocable(), dsync.WithLossPolicy(dsync.LostOnExpiry))
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Drop)
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), node); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	h, err := s.Current(ctx) // the connection the re-arm is out on
	if err != nil {
		t.Fatal(err)
	}
	del := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.BlackHole)
	defer del.Disarm()
	unlocked := make(chan struct{})
	go func() { m.Unlock(); close(unlocked) }()
	select {
	case <-unlocked:
	case <-time.After(30 * time.Second):
		t.Fatal("Unlock waits on the re-arm read whose reply never comes")
	}
	zktest.AwaitStruck(t, del) // Unlock returned once its delete was written
	select {
	case <-h.Suspended():
		t.Fatal("Unlock's delete was written only once the connection the re-arm was out on had dropped: " +
			"Unlock waited for the re-arm's request")
	default:
	}
	if !errors.Is(context.Cause(held), context.Canceled) {
		t.Errorf("cause = %v; want context.Canceled", context.Cause(held))
	}
	p.Heal() // the delete goes again, on the next connection
	awaitChildren(t, obs, path, 0)
}

// TestReviewRevokeLoseReplyWritesOnce: Revoke's write is applied and its
// reply lost with the connection; Revoke reads again after the reconnect,
// sees its own write and returns nil without writing twice.
func TestReviewRevokeLoseReplyWritesOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: node}, zktest.Lose)
	if err := dsync.Revoke(ctx, dial(t, []string{p.Addr()}), node); err != nil {
		t.Fatalf("Revoke with its reply lost = %v; want nil (it reads its write back)", err)
	}
	zktest.AwaitStruck(t, f)
	awaitClosed(t, dsync.Revoked(held), "Revoked")
	if _, st, err := obs.Get(node); err != nil || st.Version != 1 {
		t.Fatalf("node version = %v (err %v); want 1: one write", st, err)
	}
}

// TestReviewRevokeMultiCanceledMidCreate pins an orphaned node on a
// canceled acquisition: a MultiLock holds member a (a Mutex) and creates its
// lease for member b (a SemaphoreMutex, same Session) when the create's
// reply is lost with the connection (Lose: the proxy closes both sides), and
// ctx is canceled at that moment. LockContext returns ctx.Err(), giving back
// b's internal lock node and then a's node: two guaranteed deletes written
// back to back on the dying socket before go-zookeeper has noticed. The
// first draws a reset, the second fails with a raw net error ("write: broken
// pipe"), which zkconn's transient() does not count as a dropped connection:
// the delete is logged and given up, and the node stays first in line for as
// long as the session lives. The race is with go-zookeeper's reader noticing
// the close, so the test runs the interleaving up to 8 times and stops at the
// first orphan. When nothing is orphaned, it also checks that no watch is
// left and the MultiLock can be taken again.
func TestReviewRevokeMultiCanceledMidCreate(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	obs := observer(t, shared.Addr())
	for attempt := range 8 {
		path := fmt.Sprintf("%s/%d", lockPath(t), attempt)
		p := zktest.NewProxy(t, shared.Addr())
		log := &rrFailLog{failed: make(chan struct{})}
		s := dial(t, []string{p.Addr()}, zkconn.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
		a, b := dsync.NewMutex(s, path+"/a", dsync.Revocable()), dsync.NewSemaphoreMutex(s, path+"/b", dsync.Revocable())
		ml := dsync.NewMultiLock(b, a)
		f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/b/leases/", Prefix: true}, zktest.Lose)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() {
			_, err := ml.LockContext(ctx)
			res <- err
		}()
		zktest.AwaitStruck(t, f)
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d: LockContext = %v; want context.Canceled", attempt, err)
		}
		gone := []<-chan struct{}{
			rrChildrenNone(t, obs, path+"/a"), rrChildrenNone(t, obs, path+"/b/leases"), rrChildrenNone(t, obs, path+"/b/locks"),
		}
		for _, g := range gone {
			select {
			case <-g:
			case <-log.failed:
				t.Fatalf("attempt %d: a delete of the canceled acquisition was given up; node orphaned while its session (0x%x) lives: a %v, b/locks %v, b/leases %v; log:\n%s",
					attempt, sessionID(t, s), children(t, obs, path+"/a"), children(t, obs, path+"/b/locks"), children(t, obs, path+"/b/leases"), log)
			}
		}
		if w := watchesUnder(t, path, obs); len(w) > 0 {
			t.Errorf("attempt %d: watches left: %v", attempt, w)
		}
		if _, err := ml.TryLockContext(context.Background()); err != nil {
			t.Fatalf("attempt %d: TryLockContext afterwards = %v", attempt, err)
		}
		ml.Unlock()
	}
}

// TestReviewRevokeMultiMemberUnlockedBehindBack: a member released behind
// the MultiLock's back and taken again by another goroutine keeps that new
// hold: the MultiLock's Unlock panics for it, releases the other members,
// and never releases the newcomer's hold.
func TestReviewRevokeMultiMemberUnlockedBehindBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	m := dsync.NewMutex(s, path+"/m")
	sm := dsync.NewSemaphoreMutex(s, path+"/sm")
	rw := dsync.NewRWMutex(s, path+"/rw")
	ml := dsync.NewMultiLock(m, sm, rw)
	if _, err := ml.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	m.Unlock()
	sm.Unlock()
	rw.Unlock()
	nm, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nsm, err := sm.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nrw, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rrRecover(ml.Unlock); r == nil {
		t.Error("MultiLock.Unlock after its members were released behind its back did not panic")
	}
	for what, h := range map[string]context.Context{"Mutex": nm, "SemaphoreMutex": nsm, "RWMutex": nrw} {
		if h.Err() != nil {
			t.Errorf("%s: the newcomer's hold ended by the MultiLock's Unlock: %v", what, context.Cause(h))
		}
	}
	if m.Token() == 0 || sm.Token() == 0 || rw.Token() == 0 {
		t.Error("a newcomer's hold was released")
	}
	m.Unlock()
	sm.Unlock()
	rw.Unlock()
	awaitChildren(t, obs, path+"/m", 0)
	awaitChildren(t, obs, path+"/rw", 0)
	awaitChildren(t, obs, path+"/sm/leases", 0)
}

// TestReviewRevokeMultiRLockerIdentity: a MultiLock's read side releases
// exactly its own read hold, with read holds of the same RWMutex taken
// before and after it in the process (RLockContext), which stay.
func TestReviewRevokeMultiRLockerIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path)
	ml := dsync.NewMultiLock(rw.RLocker())
	before, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mlHeld, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 3)
	ml.Unlock()
	if !errors.Is(context.Cause(mlHeld), context.Canceled) {
		t.Errorf("MultiLock hold cause = %v; want context.Canceled", context.Cause(mlHeld))
	}
	if before.Err() != nil || after.Err() != nil {
		t.Fatalf("MultiLock.Unlock ended another read hold: before %v, after %v", context.Cause(before), context.Cause(after))
	}
	awaitChildren(t, obs, path, 2)
	rw.RUnlock()
	rw.RUnlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRevokeMultiMemberLostWhileWaiting: LockContext holds member a,
// waits for b; a's node is deleted meanwhile. Once b is free it does not
// hand out the lost a: it starts again, and returns a live hold whose a is
// a new node.
func TestReviewRevokeMultiMemberLostWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	ml := dsync.NewMultiLock(dsync.NewMutex(s, path+"/a", dsync.Revocable()), dsync.NewMutex(s, path+"/b"))
	holderB := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/b")
	holderB.Lock()
	res := make(chan rvResult, 1)
	go func() {
		held, err := ml.LockContext(ctx)
		res <- rvResult{held, err}
	}()
	first := awaitChildren(t, obs, path+"/a", 1)[0]
	awaitChildren(t, obs, path+"/b", 2)
	if err := obs.Delete(path+"/a/"+first, -1); err != nil {
		t.Fatal(err)
	}
	holderB.Unlock()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.held.Err() != nil {
		t.Fatalf("hold handed out lost: %v", context.Cause(r.held))
	}
	if now := children(t, obs, path+"/a"); len(now) != 1 || now[0] == first {
		t.Fatalf("a's nodes = %v; want one new node, not %s", now, first)
	}
	ml.Unlock()
	awaitChildren(t, obs, path+"/a", 0)
	awaitChildren(t, obs, path+"/b", 0)
}

// TestReviewRevokeRearmAcrossReconnectSeesEveryRequest: under LostOnExpiry
// a revocable hold's re-arm read is cut, a second request is written while
// the connection is down, and the hold sees a request; the hold stays.
// Then one more round on the new connection: still seen (Revoked stays
// closed), the watch is set again (a third write fires it: the observer
// sees the hold read).
func TestReviewRevokeRearmAcrossReconnectSeesEveryRequest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	hs := dial(t, []string{p.Addr()})
	m := dsync.NewMutex(hs, path, dsync.Revocable(), dsync.WithLossPolicy(dsync.LostOnExpiry))
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.BlackHole)
	// A plain write first (not a request): the hold re-arms, the read is
	// swallowed; then the request is written while it is out.
	if _, err := obs.Set(node, nil, -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), node); err != nil {
		t.Fatal(err)
	}
	if isClosed(dsync.Revoked(held)) {
		t.Fatal("Revoked closed while the re-arm read was swallowed")
	}
	p.Heal()
	awaitClosed(t, dsync.Revoked(held), "Revoked after the reconnect")
	if held.Err() != nil {
		t.Fatalf("hold lost under LostOnExpiry: %v", context.Cause(held))
	}
	awaitWatchOf(t, shared, node, hs)
	m.Unlock()
	awaitChildren(t, obs, path, 0)
	if w := watchesUnder(t, path, obs); len(w) > 0 {
		t.Errorf("watches left: %v", w)
	}
}

// rrFailLog is a log sink that closes failed when a line reports a failed
// guaranteed operation ("zkconn: … failed").
type rrFailLog struct {
	mu     sync.Mutex
	lines  []string
	failed chan struct{}
}

func (l *rrFailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	if strings.Contains(string(p), " failed") && !isClosed(l.failed) {
		close(l.failed)
	}
	return len(p), nil
}

func (l *rrFailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

// rrChildrenNone returns a channel closed once path has no children
// (watched with obs). The goroutine ends with the test.
func rrChildrenNone(t *testing.T, obs *zk.Conn, path string) <-chan struct{} {
	out := make(chan struct{})
	stop := make(chan struct{})
	ended := make(chan struct{})
	t.Cleanup(func() { close(stop); <-ended })
	go func() {
		defer close(ended)
		for {
			kids, _, changed, err := obs.ChildrenW(path)
			if errors.Is(err, zk.ErrNoNode) || err == nil && len(kids) == 0 {
				close(out)
				return
			}
			if err != nil {
				return
			}
			select {
			case <-changed:
			case <-stop:
				return
			}
		}
	}()
	return out
}

// TestReviewRevokeUnlockAsConnectionDropsOrphansNode pins an orphaned node:
// a MultiLock of two revocable Mutexes (LostOnExpiry) on one Session is
// unlocked as soon as a member is asked, and the connection drops at that
// moment (the reply to the member's re-arm read is lost, the proxy closes
// both sides). Unlock's two guaranteed deletes are written on the dying
// socket before go-zookeeper has noticed: the first write draws a reset,
// the second fails with a raw net error ("write: broken pipe"), which
// zkconn's transient() does not count as a dropped connection, so that
// delete is not retried: it is logged and given up. The node stays, first
// in line, for as long as the session lives (under LostOnExpiry: across
// reconnects, indefinitely), and nobody else ever gets that lock. The race
// is with go-zookeeper's reader noticing the close, so the test runs the
// interleaving up to 12 times and stops at the first orphan.
func TestReviewRevokeUnlockAsConnectionDropsOrphansNode(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	revoker := dial(t, []string{shared.Addr()})
	for attempt := range 12 {
		path := fmt.Sprintf("%s/%d", lockPath(t), attempt)
		p := zktest.NewProxy(t, shared.Addr())
		log := &rrFailLog{failed: make(chan struct{})}
		s := dial(t, []string{p.Addr()}, zkconn.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
		opts := []dsync.Option{dsync.Revocable(), dsync.WithLossPolicy(dsync.LostOnExpiry)}
		ml := dsync.NewMultiLock(dsync.NewMutex(s, path+"/a", opts...), dsync.NewMutex(s, path+"/b", opts...))
		if _, err := ml.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		node := path + "/b/" + children(t, obs, path+"/b")[0]
		f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Lose)
		if err := dsync.Revoke(ctx, revoker, node); err != nil {
			t.Fatal(err)
		}
		zktest.AwaitStruck(t, f)
		ml.Unlock() // the holder complies at once
		goneA, goneB := rrChildrenNone(t, obs, path+"/a"), rrChildrenNone(t, obs, path+"/b")
		for range 2 {
			select {
			case <-goneA:
				goneA = nil
			case <-goneB:
				goneB = nil
			case <-log.failed:
				// The session reconnects and lives on; the lock stays taken.
				probe := dsync.NewMutex(s, path+"/probe")
				if _, err := probe.TryLockContext(ctx); err != nil {
					t.Fatalf("probe after the reconnect: %v", err)
				}
				probe.Unlock()
				for _, sub := range []string{"/a", "/b"} {
					other := dsync.NewMutex(revoker, path+sub)
					if _, err := other.TryLockContext(ctx); err == nil {
						other.Unlock()
					} else if errors.Is(err, dsync.ErrWouldBlock) {
						t.Errorf("attempt %d: %s still taken by the released MultiLock after its session reconnected", attempt, path+sub)
					}
				}
				t.Fatalf("attempt %d: an Unlock delete was given up; node orphaned while its session (0x%x) lives: a %v, b %v; log:\n%s",
					attempt, sessionID(t, s), children(t, obs, path+"/a"), children(t, obs, path+"/b"), log)
			}
		}
	}
}

// TestReviewRevokeMultiHoldRevokedIsOuterHold pins Revoked on a MultiLock's
// hold context: the MultiLock's hold has no revocation channel of its own,
// so Revoked(held) falls through to whatever hold context ctx was derived
// from — here an unrelated outer Mutex's — and reports that lock's
// revocation as the MultiLock's, while a request to a revocable member is
// never seen through it. "The innermost hold counts" is not what happens.
func TestReviewRevokeMultiHoldRevokedIsOuterHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	outer := dsync.NewMutex(s, path+"/outer", dsync.Revocable())
	outerHeld, err := outer.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock()
	member := dsync.NewMutex(s, path+"/m", dsync.Revocable())
	ml := dsync.NewMultiLock(member)
	mlHeld, err := ml.LockContext(outerHeld)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Unlock()
	if rv := dsync.Revoked(mlHeld); rv != nil && rv == dsync.Revoked(outerHeld) {
		t.Error("Revoked(MultiLock hold context) is the outer Mutex's channel: a request to the outer lock reads as one to the MultiLock")
	}
	node := path + "/m/" + children(t, obs, path+"/m")[0]
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), node); err != nil {
		t.Fatal(err)
	}
	awaitClosed(t, member.Revoked(), "member's Revoked")
	if rv := dsync.Revoked(mlHeld); rv == nil || !isClosed(rv) {
		t.Logf("note: a request to a revocable member is not visible through Revoked(MultiLock hold context) (nil: %v)", rv == nil)
	}
}

// TestReviewRevokeDeadlineInPartition: Revoke, RevokeHolders and a
// MultiLock's LockContext return by their deadline when the network goes
// silent at their write (Revoke's setData, a member's create), with an
// unknown outcome said so for Revoke; nothing is left once it heals.
func TestReviewRevokeDeadlineInPartition(t *testing.T) {
	const slack = time.Second
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), lockPath(t)+"/held", dsync.Revocable())
	if _, err := holder.LockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock()
	node := lockPath(t) + "/held/" + children(t, obs, lockPath(t)+"/held")[0]
	for _, tc := range []struct {
		name  string
		match zktest.Match
		call  func(ctx context.Context, s *zkconn.Session) error
		want  []error
	}{
		{"Revoke", zktest.Match{Op: zktest.OpSetData, Path: node}, func(ctx context.Context, s *zkconn.Session) error {
			return dsync.Revoke(ctx, s, node)
		}, []error{context.DeadlineExceeded, dsync.ErrOutcomeUnknown}},
		{"RevokeHolders", zktest.Match{Op: zktest.OpSetData, Path: node}, func(ctx context.Context, s *zkconn.Session) error {
			_, err := dsync.RevokeHolders(ctx, s, lockPath(t)+"/held")
			return err
		}, []error{context.DeadlineExceeded, dsync.ErrOutcomeUnknown}},
		{"MultiLock", zktest.Match{Op: zktest.OpCreate, Path: lockPath(t) + "/multi/b/", Prefix: true}, func(ctx context.Context, s *zkconn.Session) error {
			ml := dsync.NewMultiLock(dsync.NewMutex(s, lockPath(t)+"/multi/a", dsync.Revocable()), dsync.NewSemaphoreMutex(s, lockPath(t)+"/multi/b"))
			_, err := ml.LockContext(ctx)
			return err
		}, []error{context.DeadlineExceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := zktest.NewProxy(t, shared.Addr())
			s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
			f := p.Strike(tc.match, zktest.BlackHole)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := tc.call(ctx, s)
			deadline, _ := ctx.Deadline()
			if late := time.Since(deadline); late > slack {
				t.Errorf("returned %v after its deadline", late)
			}
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("err = %v; want it to wrap %v", err, want)
				}
			}
			if !isClosed(f.Struck()) {
				t.Fatalf("the fault never struck (err %v)", err)
			}
			p.Heal()
		})
	}
	for _, sub := range []string{"/multi/a", "/multi/b/locks", "/multi/b/leases"} {
		awaitChildren(t, obs, lockPath(t)+sub, 0)
	}
}
