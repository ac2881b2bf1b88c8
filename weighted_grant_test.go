package dsync_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestWeightedNextAcquireNeedsNoLockReply: an Acquire after another of the
// same Weighted comes after the first one's internal lock delete because that
// delete went out first on the session's connection, not because its reply
// came back (an Acquire that waited for it cost a round trip more per cycle).
// The reply is swallowed here, on a live connection, so it never comes.
func TestWeightedNextAcquireNeedsNoLockReply(t *testing.T) {
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}), path, 2)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/locks/", Prefix: true}, zktest.Drop)
	defer f.Disarm()
	if err := w.Acquire(context.Background(), 1); err != nil {
		t.Fatalf("first Acquire = %v", err)
	}
	<-f.Struck() // the internal lock's delete is applied; its reply never comes

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Acquire(ctx, 1); err != nil {
		t.Fatalf("second Acquire = %v while the first one's internal lock delete awaits its reply; want nil", err)
	}
	obs := observer(t, shared.Addr())
	if got := children(t, obs, path+"/leases"); len(got) != 2 {
		t.Fatalf("leases = %v; want the 2 acquired", got)
	}
	if got := children(t, obs, path+"/locks"); len(got) != 0 {
		t.Fatalf("internal lock nodes = %v; want none once both Acquires returned", got)
	}
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

// TestWeightedTryAcquireWaitsForOwnRelease: a TryAcquire whose listing shows
// a lease this session released, its delete still under way, waits for that
// delete rather than fail (x/sync's TryAcquire after a Release succeeds), and
// lists again. Here the delete is refused (the parent's ACL forbids it) with
// its reply lost on a live connection; the ACL is then mended and the
// connection cut, so that the delete, sent again, lands.
func TestWeightedTryAcquireWaitsForOwnRelease(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	p1, p2, s, _ := rwTwoProxies(t)
	w := dsync.NewWeighted(s, path, 1)
	releaseRefused(t, obs, p1, p2, w, leases, 1) // its delete under way

	res := make(chan bool, 1)
	go func() { res <- w.TryAcquire(1) }()
	awaitChildren(t, obs, leases, 2) // its own lease, listed with the released one
	if _, err := obs.SetACL(leases, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-res:
		t.Fatalf("TryAcquire = %v while the delete of its session's released lease was under way; want it to wait for it", ok)
	default:
	}
	liveProxy(t, p1, p2).Cut() // the delete is sent again, and lands
	if !<-res {
		t.Fatal("TryAcquire = false once its session's released lease was gone; want true")
	}
	w.Release(1)
	awaitChildren(t, obs, leases, 0)
}

// refusingLeases makes path (world ACL) with path/leases refusing deletes
// (rfNoDeleteParent), for a Weighted at path, and removes them at the end.
func refusingLeases(t *testing.T, obs *zk.Conn, path string) {
	t.Helper()
	if _, err := obs.Create("/dsync-test", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
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
// nodes stay, their deletes under way in the session. It returns the
// released nodes' paths.
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
