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

// clientWatches returns how many watch channels go-zookeeper holds for path
// on c, of every kind (see zktest.ClientWatches).
func clientWatches(t testing.TB, c *zk.Conn, path string) int {
	t.Helper()
	return zktest.ClientWatches(t, c, func(p string) bool { return p == path })
}

// awaitClientWatch blocks until go-zookeeper holds a watch on path for c: an
// acquirer waiting on its watched listing. ZooKeeper tells no one of a watch
// set, so it looks again every 2ms; an acquisition that returns meanwhile
// (its result on res, which it then consumes) fails the test.
func awaitClientWatch(t testing.TB, c *zk.Conn, path string, res <-chan error) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for clientWatches(t, c, path) == 0 {
		select {
		case err := <-res:
			t.Fatalf("acquisition on %s returned %v while it should wait", path, err)
		case <-deadline:
			t.Fatalf("no watch on %s after 30s", path)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// connOf returns the *zk.Conn of s's current ZooKeeper session.
func connOf(t testing.TB, s *zkconn.Session) *zk.Conn {
	t.Helper()
	h, err := s.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h.Conn()
}

// TestWeightedCountOneWatch pins a watch leak: every acquisition of a
// semaphore following a count read the count with a new watch, and
// go-zookeeper kept a channel for each until the count changed (500 after
// 500 acquisitions). One watch per session is kept, and set again only after
// it fires.
func TestWeightedCountOneWatch(t *testing.T) {
	t.Parallel()
	const cycles = 50
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	maxPath := path + "-max"
	s := dial(t, []string{shared.Addr()})
	count := dsync.NewCount(s, maxPath, 2)
	w := dsync.NewWeightedCount(s, path, count)
	conn := connOf(t, s)
	check := func(when string) {
		t.Helper()
		if n := clientWatches(t, conn, maxPath); n != 1 {
			t.Errorf("%s: go-zookeeper holds %d watches on the count; want 1", when, n)
		}
		if ids := watches(t, shared)[maxPath]; len(ids) != 1 || ids[0] != conn.SessionID() {
			t.Errorf("%s: the server has watches on the count of sessions %x; want one of %x", when, ids, conn.SessionID())
		}
	}
	for i := 0; i < cycles; i++ {
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		w.Release(1)
	}
	check("after acquisitions")

	// A change fires the watch: the next acquisition reads the count again
	// and sets one new watch.
	if err := dsync.NewCount(dial(t, []string{shared.Addr()}), maxPath, 2).Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cycles; i++ {
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if w.TryAcquire(1) {
			t.Fatal("TryAcquire(1) succeeded past a count lowered to 1")
		}
		w.Release(1)
	}
	check("after a change and more acquisitions")
	assertEmpty(t, path)
}

// TestWeightedCountBelowWeightWaits pins acquisitions of more leases than
// the count allows, which failed with ErrWeight: as with Curator, they wait
// until the count grows (or ctx is done), and the non-waiting ones report
// ErrWouldBlock.
func TestWeightedCountBelowWeightWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	s := dial(t, []string{shared.Addr()})
	count := dsync.NewCount(s, path+"-max", 1)
	if err := count.Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w := dsync.NewWeightedCount(dial(t, []string{shared.Addr()}), path, count)

	if _, err := w.TryAcquireLeases(ctx, 2); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryAcquireLeases(2) with a count of 1 = %v; want ErrWouldBlock", err)
	}
	if w.TryAcquire(2) {
		t.Fatal("TryAcquire(2) with a count of 1 succeeded")
	}
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if err := w.Acquire(short, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire(2) with a count of 1 = %v; want it to wait until ctx is done", err)
	}
	assertEmpty(t, path)

	// Lowered below n while the acquirer waits, then raised.
	holder := dsync.NewWeightedCount(dial(t, []string{shared.Addr()}), path, count)
	if err := count.Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := holder.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- w.Acquire(ctx, 2) }()
	awaitChildren(t, observer(t, shared.Addr()), path+"/leases", 3) // 1 held, 2 waiting
	if err := count.Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := count.Set(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire(2) through a count lowered to 1 and raised to 3 = %v; want nil", err)
	}
	holder.Release(1)
	w.Release(2)
	assertEmpty(t, path)
}
