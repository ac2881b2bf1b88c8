package dsync_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// r33Parents creates the persistent parents path/leases and path/locks (so
// that a create struck by a fault makes its node at once, rather than
// failing on a missing parent), removed when the test ends.
func r33Parents(t *testing.T, obs *zk.Conn, path string) {
	t.Helper()
	persistentParents(t, obs, path+"/leases")
	if _, err := obs.Create(path+"/locks", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
}

// TestReviewR33TryAcquireAfterAbandonedCreate: Acquire(ctx, 1) of a free
// max-1 Weighted; its lease multi (or its internal lock node's create) is
// applied and the reply swallowed (the connection stays up); ctx ends and
// Acquire returns ctx.Err(), as the contract says "leaving the semaphore
// unchanged". Then TryAcquire(1) on the same Weighted, with nothing held
// anywhere, must succeed (x/sync's does). It failed: the abandoned create's
// node is left to the request's goroutine, whose delete starts only when
// the reply comes, and it was not in Handle.Deleting, so the TryAcquire
// counted it as another holder's (a lease, or a lock node ahead of its own:
// queue.past did not wait for it, and it stayed until the connection
// dropped, blocking every other acquirer meanwhile). The give-up is now
// among the session's deletes under way (zkconn.Deletes) until that
// goroutine has deleted the node, and TryAcquire waits for it (the next
// reply comes out of turn and closes the connection, which fails the
// create).
func TestReviewR33TryAcquireAfterAbandonedCreate(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, tc := range []struct {
		name  string
		op    zktest.Op
		under string
	}{
		{"lease", zktest.OpMulti, "/leases"},
		{"lock", zktest.OpCreate, "/locks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			r33Parents(t, obs, path)
			p := zktest.NewProxy(t, shared.Addr())
			w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path, 1)
			f := p.Strike(zktest.Match{Op: tc.op, Path: path + tc.under + "/", Prefix: true}, zktest.Drop)
			defer f.Disarm()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- w.Acquire(ctx, 1) }()
			zktest.AwaitStruck(t, f) // applied, its reply swallowed
			orphan := awaitChildren(t, obs, path+tc.under, 1)
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire = %v; want context.Canceled", err)
			}
			ok := w.TryAcquire(1)
			nodes := children(t, obs, path+tc.under)
			if ok {
				w.Release(1)
			} else {
				t.Errorf("TryAcquire(1) = false on a free max-1 semaphore right after Acquire returned ctx.Err(); "+
					"%s nodes %v (%v: the abandoned create's node)", tc.name, nodes, orphan)
			}
			p.Cut()
			assertEmpty(t, path)
		})
	}
}

// TestReviewR33CountChangesPileLeaseWatches: an Acquire waits for room under
// a Count; each change of the count while it waits made grant list the
// leases again without a watch, then, finding no room, list them with a new
// watch, while the one set before had not fired: go-zookeeper keeps a
// channel for each until the leases change (the leak TestWeightedCountOneWatch
// pinned for the count's own watch). A count change now keeps the leases'
// listing and its watch while the watch has not fired. Each change is
// awaited until the acquirer has read the count again with a watch, which
// it does before it lists the leases: after the last one, every earlier
// change's listings are done.
func TestReviewR33CountChangesPileLeaseWatches(t *testing.T) {
	const changes = 10
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	leases := path + "/leases"
	maxPath := path + "-max"
	obs := observer(t, shared.Addr())
	t.Cleanup(func() { obs.Delete(maxPath, -1) })
	other := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	if err := other.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s := dial(t, []string{shared.Addr()})
	w := dsync.NewWeightedCount(s, path, dsync.NewCount(s, maxPath, 1))
	conn := connOf(t, s)
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	awaitClientWatch(t, conn, leases, res)
	setter := dsync.NewCount(dial(t, []string{shared.Addr()}), maxPath, 1)
	for i := 0; i < changes; i++ {
		if err := setter.Set(ctx, 1); err != nil { // a change, no room
			t.Fatal(err)
		}
		awaitWatch(t, shared, maxPath, conn.SessionID()) // w read the count again
	}
	if n := clientWatches(t, conn, leases); n != 1 {
		t.Errorf("go-zookeeper holds %d watch channels on %s after %d count changes during one wait; want 1", n, leases, changes)
	}
	select {
	case err := <-res:
		t.Fatalf("Acquire = %v with no room", err)
	default:
	}
	other.Release(1)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	w.Release(1)
	assertEmpty(t, path)
	if n := clientWatches(t, conn, leases); n != 0 {
		t.Errorf("go-zookeeper holds %d watch channels on %s after the wait", n, leases)
	}
}

// TestReviewR33CountDeletedDuringWait pins what a waiter does when the count
// node is deleted while it waits for room: it reads the count again,
// creating it with its seed (1: still no room), keeps waiting without
// taking a lease past the maximum, watches the new node (one watch), and is
// woken when the count is raised.
func TestReviewR33CountDeletedDuringWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	leases := path + "/leases"
	maxPath := path + "-max"
	obs := observer(t, shared.Addr())
	t.Cleanup(func() { obs.Delete(maxPath, -1) })
	other := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	if err := other.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	defer other.Release(1)
	s := dial(t, []string{shared.Addr()})
	w := dsync.NewWeightedCount(s, path, dsync.NewCount(s, maxPath, 1))
	conn := connOf(t, s)
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	awaitClientWatch(t, conn, leases, res)
	awaitWatch(t, shared, maxPath, conn.SessionID())
	if err := obs.Delete(maxPath, -1); err != nil {
		t.Fatal(err)
	}
	// w sees the deletion and makes the count again (its seed), watching it.
	for {
		there, _, ev, err := obs.ExistsW(maxPath)
		if err != nil {
			t.Fatal(err)
		}
		if there {
			break
		}
		select {
		case <-ev:
		case err := <-res:
			t.Fatalf("Acquire = %v after the count was deleted, with 1 lease of a seed of 1 held", err)
		case <-ctx.Done():
			t.Fatal("the count was never made again")
		}
	}
	awaitWatch(t, shared, maxPath, conn.SessionID())
	// The server holds the watch once it has served the read; go-zookeeper
	// once it has read the reply. A request of conn's answered after it:
	// the reply is read.
	if _, _, err := conn.Exists("/"); err != nil {
		t.Fatal(err)
	}
	data, _, err := obs.Get(maxPath)
	if err != nil || len(data) != 4 || data[3] != 1 {
		t.Fatalf("count made again = %v, %v; want the seed 1", data, err)
	}
	if got := children(t, obs, leases); len(got) != 2 {
		t.Fatalf("leases = %v; want the held one and the waiter's", got)
	}
	select {
	case err := <-res:
		t.Fatalf("Acquire = %v with no room", err)
	default:
	}
	if n := clientWatches(t, conn, maxPath); n != 1 {
		t.Errorf("go-zookeeper holds %d watches on the count; want 1", n)
	}
	if err := dsync.NewCount(dial(t, []string{shared.Addr()}), maxPath, 1).Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Acquire = %v once the count was raised", err)
	}
	w.Release(1)
}

// TestReviewR33WaitingLeaseDeleted pins an operator's deletion of one of the
// lease nodes of an acquirer that holds the internal lock and waits for
// room (Acquire(2), max 2, one held elsewhere): its next listing misses the
// node, it gives the other lease up and queues again, and gets its two
// leases once there is room, with nothing else left over.
func TestReviewR33WaitingLeaseDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	leases := path + "/leases"
	obs := observer(t, shared.Addr())
	other := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	if err := other.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	held := awaitChildren(t, obs, leases, 1)
	s := dial(t, []string{shared.Addr()})
	w := dsync.NewWeighted(s, path, 2)
	conn := connOf(t, s)
	res := make(chan []*dsync.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		ls, err := w.AcquireLeases(ctx, 2)
		errc <- err
		res <- ls
	}()
	awaitClientWatch(t, conn, leases, errc)
	kids := awaitChildren(t, obs, leases, 3)
	mine := slices.DeleteFunc(slices.Clone(kids), func(k string) bool { return k == held[0] })
	if err := obs.Delete(leases+"/"+mine[0], -1); err != nil {
		t.Fatal(err)
	}
	// It gives mine[1] up and makes two new nodes, which wait.
	for {
		k, _, ev, err := obs.ChildrenW(leases)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) == 3 && !slices.Contains(k, mine[1]) {
			break
		}
		select {
		case <-ev:
		case err := <-errc:
			t.Fatalf("AcquireLeases = %v with no room", err)
		}
	}
	other.Release(1)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	ls := <-res
	got := awaitChildren(t, obs, leases, 2)
	for _, l := range ls {
		if !slices.Contains(got, l.Node()) || slices.Contains(mine, l.Node()) {
			t.Errorf("lease %s: leases now %v, the first grant's %v", l.Node(), got, mine)
		}
		if err := l.Context().Err(); err != nil {
			t.Errorf("lease %s handed out done: %v", l.Node(), err)
		}
		l.Release()
	}
	assertEmpty(t, path)
}

// TestReviewR33TryAcquireAfterLostLeaseCreate is the same with a dropped
// connection instead of a swallowed reply: the lease multi is applied and
// the connection closes before its reply (Lose); ctx ends before the
// reconnect, so Acquire returns ctx.Err() and leaves the node to
// zkconn's forgetProtected, which lists the leases and deletes it after the
// reconnect. That guaranteed delete was not in Handle.Deleting: a
// TryAcquire of the same Weighted whose listing came before it (here
// forgetProtected's listing is held) counted the node as another holder's
// lease and failed on a free semaphore. It waits for it now.
func TestReviewR33TryAcquireAfterLostLeaseCreate(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	path := lockPath(t)
	leases := path + "/leases"
	obs := observer(t, shared.Addr())
	r33Parents(t, obs, path)
	p := zktest.NewProxy(t, shared.Addr()) // one server: go-zookeeper waits a second before it dials again
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)
	w := dsync.NewWeighted(s, path, 1)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, zktest.Lose)
	defer f.Disarm()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	zktest.AwaitStruck(t, f) // applied, the connection closed before its reply
	orphan := awaitChildren(t, obs, leases, 1)
	forget := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: leases}, zktest.Drop)
	defer forget.Disarm()
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v; want context.Canceled", err)
	}
	rlAwait(t, sub, zkconn.StateReconnected)
	zktest.AwaitStruck(t, forget) // forgetProtected's listing, the first of the leases after the reconnect
	ok := w.TryAcquire(1)
	got := children(t, obs, leases)
	if ok {
		w.Release(1)
	} else {
		t.Errorf("TryAcquire(1) = false on a free max-1 semaphore after Acquire returned ctx.Err(); "+
			"leases %v (%v: the lost create's node, being forgotten)", got, orphan)
	}
	p.Cut()
	assertEmpty(t, path)
}

// r33AwaitLeases blocks until the children of leases satisfy ok, failing if
// res delivers first.
func r33AwaitLeases(t *testing.T, obs *zk.Conn, leases string, res <-chan error, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		k, _, ev, err := obs.ChildrenW(leases)
		if err != nil {
			t.Fatal(err)
		}
		if ok(k) {
			return k
		}
		select {
		case <-ev:
		case err := <-res:
			t.Fatalf("Acquire = %v while waiting on %s (now %v)", err, leases, k)
		case <-deadline:
			t.Fatalf("leases stayed %v", k)
		}
	}
}

// TestReviewR33InteropCuratorHeadAfterDeletedLockNode pins usurped against
// a Curator peer: a dsync acquirer holds the internal lock and waits for
// room (max 1, held elsewhere); an operator deletes its lock node; a
// Curator InterProcessSemaphoreV2 becomes the head and makes its lease.
// The dsync acquirer sees that lease, gives its own up and queues again, so
// Curator is not kept waiting for it: Curator gets the lease when the
// holder releases, dsync after Curator, never two at once.
func TestReviewR33InteropCuratorHeadAfterDeletedLockNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	leases, locks := path+"/leases", path+"/locks"
	obs := observer(t, shared.Addr())
	other := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	if err := other.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	held := awaitChildren(t, obs, leases, 1)
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	w := dsync.NewWeighted(s, path, 1)
	// The acquirer's read of its own lock node, after its watched listing
	// and before it waits: the lock node is deleted only once that read is
	// answered. Deleted before, the read fails and the acquirer queues
	// again at once, ahead of Curator's node, which the test does not pin.
	vouched := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: locks + "/", Prefix: true}, zktest.Pass)
	defer vouched.Disarm()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	select {
	case <-vouched.Struck():
	case err := <-res:
		t.Fatalf("Acquire = %v while the only lease is held", err)
	}
	awaitClientWatch(t, connOf(t, s), leases, res) // waits for room
	first := slices.DeleteFunc(awaitChildren(t, obs, leases, 2), func(k string) bool { return k == held[0] })[0]
	lock := awaitChildren(t, obs, locks, 1)[0]
	if err := obs.Delete(locks+"/"+lock, -1); err != nil {
		t.Fatal(err)
	}
	jh, err := java.Hold(ctx, curator.Semaphore, shared.Addr(), path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer jh.Kill()
	// Curator's lease is made; dsync's first one goes.
	r33AwaitLeases(t, obs, leases, res, func(k []string) bool {
		return len(k) == 2 && slices.Contains(k, held[0]) && !slices.Contains(k, first)
	})
	select {
	case <-jh.Acquired():
		t.Fatal("Curator acquired while the only lease is held")
	default:
	}
	other.Release(1)
	select {
	case <-jh.Acquired():
	case err := <-res:
		t.Fatalf("dsync Acquire = %v before Curator, which was ahead", err)
	case <-ctx.Done():
		t.Fatalf("Curator never acquired (leases %v, locks %v)", children(t, obs, leases), children(t, obs, locks))
	}
	select {
	case err := <-res:
		t.Fatalf("dsync Acquire = %v while Curator holds the only lease", err)
	default:
	}
	if err := jh.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if got := awaitChildren(t, obs, leases, 1); zkconn.Kin(got[0], lock) {
		t.Errorf("lease %s is kin of the deleted lock node %s", got[0], lock)
	}
	w.Release(1)
	assertEmpty(t, path)
}

// TestReviewR33RevokedWhileWaitingForRoom pins a revocation request written
// (as Curator's Revoker does, by node path) into a revocable
// SemaphoreMutex's lease while it waits for room: the hold sees it as it
// starts, LockContext returns with Revoked closed and the hold live.
func TestReviewR33RevokedWhileWaitingForRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	leases := path + "/leases"
	obs := observer(t, shared.Addr())
	a := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path)
	a.Lock()
	aLease := awaitChildren(t, obs, leases, 1)[0]
	s := dial(t, []string{shared.Addr()})
	b := dsync.NewSemaphoreMutex(s, path, dsync.Revocable())
	type result struct {
		held context.Context
		err  error
	}
	got := make(chan result, 1)
	errc := make(chan error, 1)
	go func() {
		held, err := b.LockContext(ctx)
		got <- result{held, err}
		errc <- err
	}()
	awaitClientWatch(t, connOf(t, s), leases, errc)
	bLease := slices.DeleteFunc(awaitChildren(t, obs, leases, 2), func(k string) bool { return k == aLease })[0]
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), leases+"/"+bLease); err != nil {
		t.Fatalf("Revoke(waiting lease) = %v", err)
	}
	a.Unlock()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !isClosed(dsync.Revoked(r.held)) || !isClosed(b.Revoked()) {
		t.Error("Revoked not closed for a request written while the lease waited for room")
	}
	if err := r.held.Err(); err != nil {
		t.Errorf("hold context ended: %v", context.Cause(r.held))
	}
	b.Unlock()
	assertEmpty(t, path)
}

// TestReviewR33ReleaseManyBlocksWhileAuthResent: Weighted.Release, "like
// Mutex.Unlock", must not wait on a silent network
// (TestReviewReleaseUnlockBlocksWhileAuthResent's state: the connection
// reported up, go-zookeeper's send loop held by the re-sent credentials).
// Release(n) ended each lease in turn, and each Handle.Release waited up to
// releaseWait (10 ms) for its delete to be written: n × 10 ms in all, 2 s
// for 200 leases (one weighted Acquire(ctx, 200), as an x/sync user
// weighting by size would). It now sends every delete, then waits once.
func TestReviewR33ReleaseManyBlocksWhileAuthResent(t *testing.T) {
	const n = 200
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithDigestAuth("rr", "pw"), zkconn.WithSessionTimeout(6*time.Second))
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	w := dsync.NewWeighted(s, path, n)
	if err := w.Acquire(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.BlackHole)
	defer f.Disarm()
	p.Cut()
	rlAwait(t, sub, zkconn.StateSuspended)
	rlAwait(t, sub, zkconn.StateReconnected)
	zktest.AwaitStruck(t, f) // the re-sent credentials went into the black hole

	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Release(n)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		<-done
		t.Errorf("Release(%d) blocked %v on a silent network", n, time.Since(start).Round(time.Millisecond))
	}
	awaitChildren(t, obs, path+"/leases", 0)
}
