package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestWeightedNextAcquireNeedsNoLockReply: an Acquire after another of the
// same Weighted comes after the first one's internal lock delete because that
// delete went out first on the session's connection, not because its reply
// came back (an Acquire that waited for it cost a round trip more per cycle).
//
// The delete's reply is swallowed (Drop). The Session closes that connection
// at the next reply on it, out of turn, and sends the delete again on the
// next one, where it settles: an Acquire that waited for the reply would
// proceed then (at the ping's reply, a third of the timeout later), so the
// test does not ask whether the second Acquire succeeds but where its first
// request goes: its lock node's create must be written on the connection the
// delete is still unanswered on, before the delete is sent again. That create
// is black-holed (the connection then stays up, nothing answered, until
// Heal), so nothing but the Session's own timeouts could send the delete
// again before the test looks.
func TestWeightedNextAcquireNeedsNoLockReply(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}), path, 2)
	locks := zktest.Match{Op: zktest.OpDelete, Path: path + "/locks/", Prefix: true}
	f := p.Strike(locks, zktest.Drop)
	defer f.Disarm()
	if err := w.Acquire(context.Background(), 1); err != nil {
		t.Fatalf("first Acquire = %v", err)
	}
	zktest.AwaitStruck(t, f) // the internal lock's delete is applied; its reply never comes
	// The delete, sent again on the next connection.
	again := p.Strike(locks, zktest.Pass)
	defer again.Disarm()
	create := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/locks/", Prefix: true}, zktest.BlackHole)
	defer create.Disarm()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 1) }()
	select {
	case <-create.Struck():
	case err := <-res:
		t.Fatalf("second Acquire = %v before its lock node's create was written", err)
	}
	select {
	case <-again.Struck():
		t.Fatal("the second Acquire wrote its lock node's create only once the first one's internal lock delete " +
			"had been answered (sent again on the next connection): it waited for the reply, not for the delete to go out")
	default: // the create went out behind the unanswered delete
	}
	p.Heal() // the connection closes: the delete goes again, the create is recovered
	if err := <-res; err != nil {
		t.Fatalf("second Acquire = %v; want nil", err)
	}
	obs := observer(t, shared.Addr())
	if got := children(t, obs, path+"/leases"); len(got) != 2 {
		t.Fatalf("leases = %v; want the 2 acquired", got)
	}
	awaitChildren(t, obs, path+"/locks", 0) // Acquire does not wait for the internal lock's delete
	w.Release(2)
	assertEmpty(t, path)
}

// TestWeightedGrantWatchesOnlyWhenWaiting: an acquirer whose leases fit at
// once leaves no watch (a watch on the leases set then only fires for
// nothing at the next lease's coming or going); one that must wait lists
// again with a watch, a release wakes it, and once granted it leaves no
// watch either (the release fired it; see
// TestReviewWeightedWatchLeftWhenRoomBetweenListings for room found by the
// watched listing itself). The server is the test's own, so that its count of watches
// (data and child watches alike: wchp lists only the former) is the test's.
func TestWeightedGrantWatchesOnlyWhenWaiting(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	path := lockPath(t)
	holder := dsync.NewWeighted(dial(t, []string{srv.Addr()}), path, 2)
	if err := holder.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if n := watchCount(t, srv); n != 0 {
		t.Fatalf("after an Acquire that fit at once, the server holds %d watches; want 0", n)
	}

	waiter := dsync.NewWeighted(dial(t, []string{srv.Addr()}), path, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- waiter.Acquire(ctx, 1) }()
	// Its watch on the leases, the only one: its internal lock node was
	// first in line, and it watches nothing else.
	for watchCount(t, srv) != 1 {
		select {
		case err := <-res:
			t.Fatalf("Acquire of a full semaphore returned %v before a release", err)
		case <-ctx.Done():
			t.Fatalf("the waiting Acquire set no watch; the server holds %d", watchCount(t, srv))
		case <-time.After(5 * time.Millisecond): // no event tells of a watch set
		}
	}
	holder.Release(1)
	if err := <-res; err != nil {
		t.Fatalf("Acquire after a release = %v", err)
	}
	if n := watchCount(t, srv); n != 0 {
		t.Fatalf("after a waiting Acquire was granted, the server holds %d watches; want 0", n)
	}
	holder.Release(1)
	waiter.Release(1)
}

// watchCount returns the number of watches srv holds, of every kind.
func watchCount(t testing.TB, srv *zktest.Server) int {
	t.Helper()
	m, err := srv.Mntr(context.Background())
	if err != nil {
		t.Fatalf("mntr: %v", err)
	}
	n, err := strconv.Atoi(m["zk_watch_count"])
	if err != nil {
		t.Fatalf("mntr zk_watch_count %q: %v", m["zk_watch_count"], err)
	}
	return n
}

// refusingLeases makes path (world ACL) with path/leases refusing deletes
// (rfNoDeleteParent), for a Weighted at path, and removes them at the end.
func refusingLeases(t *testing.T, obs *zk.Conn, path string) {
	t.Helper()
	if _, err := obs.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after rfNoDeleteParent's (LIFO)
		kids, _, _ := obs.Children(path + "/locks")
		for _, k := range kids {
			obs.Delete(path+"/locks/"+k, -1)
		}
		obs.Delete(path+"/locks", -1)
		obs.Delete(path, -1)
	})
	rfNoDeleteParent(t, obs, path+"/leases")
}

// releaseRefused acquires n leases on w (its Session connected through p1
// or p2), then releases them with their deletes refused (see
// refusingLeases) and their replies swallowed on a live connection: the
// nodes stay, their deletes under way in the session until the next reply
// comes out of turn and closes the connection; sent again, they are refused
// again and settle. It returns the released nodes' paths.
func releaseRefused(t *testing.T, obs *zk.Conn, p1, p2 *zktest.Proxy, w *dsync.Weighted, leases string, n int) []string {
	t.Helper()
	if err := w.Acquire(context.Background(), int64(n)); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var deletes []zktest.Match
	for _, c := range awaitChildren(t, obs, leases, n) {
		paths = append(paths, leases+"/"+c)
		deletes = append(deletes, zktest.Match{Op: zktest.OpDelete, Path: leases + "/" + c})
	}
	strikeEach(p1, p2, zktest.Drop, func() { w.Release(int64(n)) }, deletes...)
	return paths
}

// strikeEach arms a on the first request matching each of ms on both
// proxies (a Session reaches the server through one of them), runs f, waits
// until each has struck on one of them, and disarms the rest, so that a
// request sent again after a reconnect passes.
func strikeEach(p1, p2 *zktest.Proxy, a zktest.Action, f func(), ms ...zktest.Match) {
	var fs [][2]*zktest.Fault
	for _, m := range ms {
		fs = append(fs, [2]*zktest.Fault{p1.Strike(m, a), p2.Strike(m, a)})
	}
	f()
	for _, pair := range fs {
		select {
		case <-pair[0].Struck():
		case <-pair[1].Struck():
		}
		pair[0].Disarm()
		pair[1].Disarm()
	}
}

// liveProxy returns the one of p1, p2 that holds the connection of a
// Session connected through them.
func liveProxy(t *testing.T, p1, p2 *zktest.Proxy) *zktest.Proxy {
	t.Helper()
	switch {
	case p1.Conns() > 0:
		return p1
	case p2.Conns() > 0:
		return p2
	}
	t.Fatal("no connection on either proxy")
	return nil
}

// TestWeightedLockWaiterWhoseNodeWasDeletedCreatesNoLease pins the checked
// internal lock (see queue and Weighted.grant): a max-1 Weighted; A holds
// the lease, B holds the internal lock and waits for room, V waits for the
// internal lock behind B, watching B's node and not its own. An operator
// deletes V's node; W queues behind B. A releases: B is granted and lets go
// of the internal lock, and both V and W believe themselves first. V's lease
// create checks V's lock node in its transaction, fails, and V queues again:
// only W creates a lease, and the three get the lease one at a time.
func TestWeightedLockWaiterWhoseNodeWasDeletedCreatesNoLease(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	newW := func() *dsync.Weighted { return dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1) }
	a, b, v, w := newW(), newW(), newW(), newW()
	if err := a.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	// A's internal lock goes without waiting for the network: gone before
	// B's lock node is picked out below as the only one.
	awaitChildren(t, obs, path+"/locks", 0)
	var inside atomic.Int32
	granted := make(chan string, 3)
	release := make(chan struct{})
	var wg sync.WaitGroup
	enter := func(name string, s *dsync.Weighted) {
		wg.Go(func() {
			if err := s.Acquire(context.Background(), 1); err != nil {
				t.Errorf("%s: Acquire = %v", name, err)
				return
			}
			if n := inside.Add(1); n > 1 {
				t.Errorf("%s granted with %d inside", name, n)
			}
			granted <- name
			<-release
			inside.Add(-1)
			s.Release(1)
		})
	}
	enter("B", b)
	bLock := path + "/locks/" + awaitChildren(t, obs, path+"/locks", 1)[0]
	awaitChildren(t, obs, path+"/leases", 2) // A's, and B's waiting for room
	enter("V", v)
	kids := orderedNames(awaitChildren(t, obs, path+"/locks", 2))
	vLock := path + "/locks/" + kids[1]
	vSID := mustSessionOf(t, obs, vLock)
	awaitWatch(t, shared, bLock, vSID)
	if ids := watches(t, shared)[vLock]; slices.Contains(ids, vSID) {
		t.Errorf("V watches its own lock node %s; a checked queue's waiter does not", vLock)
	}
	if err := obs.Delete(vLock, -1); err != nil {
		t.Fatal(err)
	}
	enter("W", w)
	kids = orderedNames(awaitChildren(t, obs, path+"/locks", 2)) // B, W
	wSID := mustSessionOf(t, obs, path+"/locks/"+kids[1])
	awaitWatch(t, shared, bLock, wSID)

	there, _, bGone, err := obs.ExistsW(bLock)
	if err != nil || !there {
		t.Fatalf("ExistsW(%s) = %v, %v; want B's lock node there", bLock, there, err)
	}
	a.Release(1)
	if got := <-granted; got != "B" {
		t.Fatalf("%s granted first; want B", got)
	}
	<-bGone // B let go of the internal lock (its delete goes on after Acquire returns)
	// W holds the internal lock and waits for room with its lease; V queued
	// again behind it, without a lease.
	locks := orderedNames(awaitChildren(t, obs, path+"/locks", 2))
	if got := mustSessionOf(t, obs, path+"/locks/"+locks[0]); got != wSID {
		t.Errorf("internal lock head owned by %#x; want W's session %#x", got, wSID)
	}
	if got := mustSessionOf(t, obs, path+"/locks/"+locks[1]); got != vSID {
		t.Errorf("internal lock's second node owned by %#x; want V's session %#x", got, vSID)
	}
	for _, l := range awaitChildren(t, obs, path+"/leases", 2) {
		if mustSessionOf(t, obs, path+"/leases/"+l) == vSID {
			t.Errorf("V created lease %s though its lock node was deleted", l)
		}
	}
	release <- struct{}{} // B releases: W
	if got := <-granted; got != "W" {
		t.Fatalf("%s granted second; want W", got)
	}
	release <- struct{}{} // W releases: V
	if got := <-granted; got != "V" {
		t.Fatalf("%s granted third; want V", got)
	}
	release <- struct{}{}
	wg.Wait()
	assertEmpty(t, path)
}

// TestWeightedHeadWhoseLockNodeWasDeletedMakesNoLease pins a double grant
// that checked lease creates close: H1 is first on the internal lock of a
// max-1 Weighted and its lease create never reaches the server; an operator
// deletes H1's lock node; H2 acquires (it is now first, and the lease is
// free). When H1's connection comes back, its create is sent again: it must
// fail (H1's lock node is gone), and H1 queue again, rather than make a
// second lease outside the internal lock (where a listing of H1's older than
// H2's lease would grant it: two holders).
func TestWeightedHeadWhoseLockNodeWasDeletedMakesNoLease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	h1 := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), path, 1)
	h2 := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/leases/", Prefix: true}, zktest.BlackHole)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- h1.Acquire(ctx, 1) }()
	zktest.AwaitStruck(t, f)
	lock := awaitChildren(t, obs, path+"/locks", 1)[0]
	if err := obs.Delete(path+"/locks/"+lock, -1); err != nil {
		t.Fatal(err)
	}
	if err := h2.Acquire(ctx, 1); err != nil {
		t.Fatalf("H2: Acquire = %v", err)
	}
	leases := awaitChildren(t, obs, path+"/leases", 1)
	awaitChildren(t, obs, path+"/locks", 0) // H2's internal lock is let go after Acquire returns
	_, _, queued, err := obs.ChildrenW(path + "/locks")
	if errors.Is(err, zk.ErrNoNode) {
		// ZooKeeper reaped the emptied container (its check runs every
		// 60 s); H1 makes it again as it queues, which fires this watch.
		var there bool
		there, _, queued, err = obs.ExistsW(path + "/locks")
		if there {
			t.Fatalf("%s/locks made again while H1's connection is blackholed", path)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	p.Heal()
	// H1 queues again behind H2's lease: its lease node waits for room, and
	// no other lease appears.
	select {
	case err := <-first:
		t.Fatalf("H1: Acquire = %v while H2 holds the only lease: two holders", err)
	case <-queued:
	}
	locks := awaitChildren(t, obs, path+"/locks", 1)
	h1SID := mustSessionOf(t, obs, path+"/locks/"+locks[0])
	for _, l := range awaitChildren(t, obs, path+"/leases", 2) {
		if l != leases[0] && mustSessionOf(t, obs, path+"/leases/"+l) != h1SID {
			t.Errorf("lease %s is neither H2's nor H1's waiting one", l)
		}
	}
	// Two creates under leases and no delete: H2's lease and H1's waiting
	// one. The create H1 sent again made nothing (a lease it made and then
	// gave up would have moved the cversion by 2 more).
	_, st, err := obs.Children(path + "/leases")
	if err != nil {
		t.Fatal(err)
	}
	if st.Cversion != 2 {
		t.Errorf("cversion of %s/leases = %d; want 2: H1's create sent again made a lease", path, st.Cversion)
	}
	select {
	case err := <-first:
		t.Fatalf("H1: Acquire = %v while H2 holds the only lease", err)
	default:
	}
	h2.Release(1)
	if err := <-first; err != nil {
		t.Fatalf("H1: Acquire = %v", err)
	}
	h1.Release(1)
	assertEmpty(t, path)
}

// TestWeightedHeadWhoseLockNodeWasDeletedWhileWaitingForRoom: H1 holds the
// internal lock of a max-1 Weighted and waits for room with its lease (A
// holds the one lease). An operator deletes H1's lock node, and H2 becomes
// the head and makes its lease. H1 sees a lease made since it became the
// head, which only another head can have made: it gives its lease up and
// queues again behind H2, rather than wait on beside H2's lease (each
// counting the other, neither would ever fit). The lease goes A, H2, H1.
func TestWeightedHeadWhoseLockNodeWasDeletedWhileWaitingForRoom(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// A's internal lock goes without waiting for the network: gone before
	// H1 queues, H1's first read under the internal lock is the one below.
	awaitChildren(t, obs, path+"/locks", 0)
	p1 := zktest.NewProxy(t, shared.Addr())
	s1 := dial(t, []string{p1.Addr()})
	h1 := dsync.NewWeighted(s1, path, 1)
	// H1's read of its own lock node, after its watched listing and before
	// it waits for room: the lock node is deleted only once that read is
	// answered. Deleted before, the read fails and H1 queues again at once,
	// ahead of H2, which the test does not pin.
	vouched := p1.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/locks/", Prefix: true}, zktest.Pass)
	defer vouched.Disarm()
	lock, h1SID, res1 := heldWaiting(t, ctx, obs, path, h1, s1)
	select {
	case <-vouched.Struck():
	case err := <-res1:
		t.Fatalf("H1: Acquire = %v while the only lease is held", err)
	}
	if err := obs.Delete(lock, -1); err != nil {
		t.Fatal(err)
	}
	h2 := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	res2 := make(chan error, 1)
	go func() { res2 <- h2.Acquire(ctx, 1) }()
	// H2's lease made H1 give its own up and queue again: H2's lock node,
	// then H1's; A's lease and H2's.
	locks := orderedNames(awaitChildren(t, obs, path+"/locks", 2))
	if got := mustSessionOf(t, obs, path+"/locks/"+locks[1]); got != h1SID {
		t.Errorf("second internal lock node owned by %#x; want H1's session %#x", got, h1SID)
	}
	for _, l := range awaitChildren(t, obs, path+"/leases", 2) {
		if mustSessionOf(t, obs, path+"/leases/"+l) == h1SID {
			t.Errorf("H1's lease %s is still there", l)
		}
	}
	a.Release(1)
	if err := <-res2; err != nil {
		t.Fatalf("H2: Acquire = %v", err)
	}
	select {
	case err := <-res1:
		t.Fatalf("H1: Acquire = %v while H2 holds the only lease", err)
	default:
	}
	h2.Release(1)
	if err := <-res1; err != nil {
		t.Fatalf("H1: Acquire = %v", err)
	}
	h1.Release(1)
	assertEmpty(t, path)
}

// TestWeightedListsLeasesAfterFirstCreate pins grant's invariant: the first
// listing of the leases goes out after the acquirer's first lease create,
// never before it (a server the session has just moved to may lag behind the
// release that made the acquirer the head, and a listing served before the
// create could miss the last head's leases there). Both requests are armed
// to be cut: the one the proxy sees first is cut, and the other goes out
// only on the next connection.
func TestWeightedListsLeasesAfterFirstCreate(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	path := lockPath(t)
	leases := path + "/leases"
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path, 3)
	obs := observer(t, shared.Addr())
	for n := int64(1); n <= 3; n++ {
		created := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, zktest.Cut)
		listed := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: leases}, zktest.Cut)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := make(chan error, 1)
		go func() { res <- w.Acquire(ctx, n) }()
		select {
		case <-created.Struck():
		case <-listed.Struck():
			t.Errorf("Acquire(%d): the leases were listed before the first lease create went out", n)
		case <-ctx.Done():
			t.Fatalf("Acquire(%d): neither a lease create nor a listing within 30s", n)
		}
		err := <-res
		cancel()
		created.Disarm()
		listed.Disarm()
		if err != nil {
			t.Fatalf("Acquire(%d) = %v", n, err)
		}
		if got := children(t, obs, leases); len(got) != int(n) {
			t.Fatalf("Acquire(%d): leases %v; want %d", n, got, n)
		}
		w.Release(n)
		awaitChildren(t, obs, leases, 0)
	}
	assertEmpty(t, path)
}
