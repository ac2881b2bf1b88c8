package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// heldWeighted returns a max-1 Weighted on path, on a session of its own,
// that holds its one lease.
func heldWeighted(t *testing.T, path string) *dsync.Weighted {
	t.Helper()
	w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	if err := w.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return w
}

// heldWaiting starts h.Acquire(ctx, 1) on a max-1 semaphore whose one lease
// is held, and returns once h waits for room: its lease is listed and it
// watches the leases (client side, conn). It returns h's lock node and
// session id, and Acquire's result.
func heldWaiting(t *testing.T, ctx context.Context, obs *zk.Conn, path string, h *dsync.Weighted, s *zkconn.Session) (string, int64, <-chan error) {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- h.Acquire(ctx, 1) }()
	lock := path + "/locks/" + awaitChildren(t, obs, path+"/locks", 1)[0]
	sid := mustSessionOf(t, obs, lock)
	awaitChildren(t, obs, path+"/leases", 2)
	awaitClientWatch(t, connOf(t, s), path+"/leases", res)
	return lock, sid, res
}

// TestReviewHeldDeletedWhileDisconnected: H1 waits for room (max 1, A holds
// the lease) and its connection goes away; meanwhile an operator deletes
// H1's internal lock node and H2 becomes the head, its lease waiting beside
// H1's. On the reconnect go-zookeeper sets H1's watches again, and the
// server fires NodeChildrenChanged for the leases: H1 sees H2's lease, made since it became the head,
// and must give its own up and queue again behind H2, else A's release
// leaves H1 and H2 waiting on each other forever.
func TestReviewHeldDeletedWhileDisconnected(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p1, p2, s, sub := rwTwoProxies(t)
	h1 := dsync.NewWeighted(s, path, 1)
	lock, h1SID, res1 := heldWaiting(t, ctx, obs, path, h1, s)

	p1.BlackHole()
	p2.BlackHole()
	p1.Cut()
	p2.Cut()
	rlAwait(t, sub, zkconn.StateSuspended)
	if err := obs.Delete(lock, -1); err != nil {
		t.Fatal(err)
	}
	h2 := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	res2 := make(chan error, 1)
	go func() { res2 <- h2.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/leases", 3) // A's, H1's, and H2's waiting
	h2Lock := path + "/locks/" + awaitChildren(t, obs, path+"/locks", 1)[0]
	_, _, relisted, err := obs.ChildrenW(path + "/locks")
	if err != nil {
		t.Fatal(err)
	}
	p1.Heal()
	p2.Heal()
	rlAwait(t, sub, zkconn.StateReconnected)
	<-relisted // H1 queued again
	awaitChildren(t, obs, path+"/leases", 2)
	kids := orderedNames(awaitChildren(t, obs, path+"/locks", 2))
	if path+"/locks/"+kids[0] != h2Lock || mustSessionOf(t, obs, path+"/locks/"+kids[1]) != h1SID {
		t.Fatalf("internal lock queue %v; want H2's %s, then H1's", kids, h2Lock)
	}
	a.Release(1)
	select {
	case err := <-res2:
		if err != nil {
			t.Fatalf("H2: Acquire = %v", err)
		}
	case err := <-res1:
		t.Fatalf("H1: Acquire = %v before H2", err)
	}
	h2.Release(1)
	if err := <-res1; err != nil {
		t.Fatalf("H1: Acquire = %v", err)
	}
	h1.Release(1)
	assertEmpty(t, path)
}

// TestReviewHeldCancelLeavesNoWatch: ctx canceled while the head waits for
// room: Acquire returns ctx.Err() at once, and once its nodes are gone no
// watch of its session is left on the server, nor in go-zookeeper.
func TestReviewHeldCancelLeavesNoWatch(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := heldWeighted(t, path)
	s := dial(t, []string{shared.Addr()})
	h1 := dsync.NewWeighted(s, path, 1)
	ctx, cancel := context.WithCancel(context.Background())
	lock, _, res := heldWaiting(t, ctx, obs, path, h1, s)
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return after cancel")
	}
	awaitChildren(t, obs, path+"/leases", 1)
	awaitChildren(t, obs, path+"/locks", 0)
	conn := connOf(t, s)
	if _, _, err := conn.Exists("/"); err != nil { // events before its reply are in
		t.Fatal(err)
	}
	if n := clientWatches(t, conn, lock) + clientWatches(t, conn, path+"/leases"); n != 0 {
		t.Errorf("go-zookeeper holds %d watches after a canceled Acquire", n)
	}
	if left := watchesUnder(t, path, obs); len(left) != 0 {
		t.Errorf("server watches left under %s: %v", path, left)
	}
	a.Release(1)
	assertEmpty(t, path)
}
