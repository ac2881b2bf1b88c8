package dsync_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR125WeightedWaitingLeaseDeleted: H acquires 2 leases of a
// max-2 Weighted while A holds 1, so H's two lease nodes wait (3 > 2). An
// operator deletes one of H's waiting lease nodes. H must not go on waiting
// with half its leases (or be granted with one node): it gives both up and
// queues again. Once A releases, H holds exactly its 2 lease nodes (both
// its session's), never more than 2 leases exist, and after H's Release
// nothing is left under the path (no lease, no internal lock node, no
// watch).
func TestReviewR125WeightedWaitingLeaseDeleted(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	aLease := awaitChildren(t, obs, path+"/leases", 1)[0]
	awaitChildren(t, obs, path+"/locks", 0)
	s := dial(t, []string{shared.Addr()})
	h := dsync.NewWeighted(s, path, 2)
	res := make(chan error, 1)
	go func() { res <- h.Acquire(ctx, 2) }()
	kids := awaitChildren(t, obs, path+"/leases", 3)
	awaitClientWatch(t, connOf(t, s), path+"/leases", res)
	mine := slices.DeleteFunc(slices.Clone(kids), func(k string) bool { return k == aLease })
	if err := obs.Delete(path+"/leases/"+mine[0], -1); err != nil {
		t.Fatal(err)
	}
	// H gives up its other lease and queues again: 3 leases again (A's
	// and two new ones of H), or H waits on with 2 (A's and its remaining
	// one) if it did not notice.
	// H gives up its other lease and queues again: then 3 leases again,
	// A's and two new ones of H's.
	for {
		now, _, ev, err := obs.ChildrenW(path + "/leases")
		if err != nil {
			t.Fatal(err)
		}
		if len(now) == 3 && !slices.Contains(now, mine[1]) {
			break
		}
		select {
		case <-ev:
		case err := <-res:
			t.Fatalf("H's Acquire = %v while A holds 1 of 2 and H wants 2", err)
		case <-time.After(reviewBound):
			t.Fatalf("H did not queue again after its waiting lease %s was deleted: leases %v", mine[0], now)
		}
	}
	r125GrantOnRelease(t, obs, path, s, a, h, res, 2)
}

// TestReviewR125ElectionMiddleWaiterDeleted: L leads, F1 waits behind L,
// F2 behind F1 (watching F1's node and its handoff signal). An operator
// deletes F1's waiting node. F1 queues again, behind F2; F2, whose
// predecessor left without its signal, lists again and follows L. Only
// when L resigns does F2 lead (not F1, and never two at once); then F1
// after F2. Nothing is left at the end: no node, no watch.
func TestReviewR125ElectionMiddleWaiterDeleted(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	el := func() *dsync.Election { return dsync.NewElection(dial(t, []string{shared.Addr()}), path) }
	l, f1, f2 := el(), el(), el()
	lHeld, err := l.Campaign(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	n0 := awaitChildren(t, obs, path, 1)[0]
	r1 := rvGo(ctx, func(ctx context.Context) (context.Context, error) { return f1.Campaign(ctx, "F1") })
	n1 := r87Other(t, awaitChildren(t, obs, path, 2), n0)
	r2 := rvGo(ctx, func(ctx context.Context) (context.Context, error) { return f2.Campaign(ctx, "F2") })
	n2 := r87Other(t, awaitChildren(t, obs, path, 3), n0, n1)
	if err := obs.Delete(path+"/"+n1, -1); err != nil {
		t.Fatal(err)
	}
	n1b := r87Other(t, awaitChildren(t, obs, path, 3), n0, n2) // F1 queued again
	if n1b == n1 {
		t.Fatalf("F1's deleted node %s is back", n1)
	}
	rvWaits(t, r1, "F1 after its node's deletion")
	rvWaits(t, r2, "F2 while L leads")
	if lHeld.Err() != nil {
		t.Fatalf("L's leadership ended: %v", context.Cause(lHeld))
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := rvHeld(t, r2, "F2 after L resigned")
	rvWaits(t, r1, "F1 while F2 leads")
	if got := leaderID(t, f1); got != "F2" {
		t.Fatalf("leader = %q; want F2", got)
	}
	if err := f2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if h2.Err() == nil {
		t.Fatal("F2's leadership context not ended by Resign")
	}
	rvHeld(t, r1, "F1 after F2 resigned")
	if err := f1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR125DowngradeThenWriteNodeDeleted: W1 holds the write lock and
// downgrades (its read node takes the write node's place); W2 of another
// session waits behind both. An operator deletes W1's write node: W1's
// write hold is lost, its read hold lives on, and W2 must go on waiting
// for that read node (it holds the lock for reading) rather than take the
// write lock beside it. W2 holds once W1 RUnlocks; nothing is left at the
// end.
func TestReviewR125DowngradeThenWriteNodeDeleted(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	w1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wHeld, err := w1.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nw := awaitChildren(t, obs, path, 1)[0]
	res := rvGo(ctx, w2.LockContext)
	n2 := r87Other(t, awaitChildren(t, obs, path, 2), nw)
	rHeld, err := w1.RLockContext(wHeld)
	if err != nil {
		t.Fatal(err)
	}
	nr := r87Other(t, awaitChildren(t, obs, path, 3), nw, n2)
	if err := obs.Delete(path+"/"+nw, -1); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 2)
	select {
	case <-wHeld.Done():
	case <-time.After(reviewBound):
		t.Fatal("W1's write hold not lost after its node's deletion")
	}
	if rHeld.Err() != nil {
		t.Fatalf("W1's read hold ended: %v", context.Cause(rHeld))
	}
	// W2 waits for the read node: list the queue a few times through its
	// own watch events (none should make it hold).
	if _, _, ev, err := obs.GetW(path + "/" + nr); err == nil {
		select {
		case r := <-res:
			t.Fatalf("W2 returned (err %v) while W1's read node %s holds", r.err, nr)
		case <-ev:
			t.Fatalf("W1's read node changed")
		default:
		}
	}
	rvWaits(t, res, "W2 while W1's read hold lives")
	w1.Unlock() // the lost write hold
	rvWaits(t, res, "W2 after W1's Unlock of its lost write hold")
	w1.RUnlock()
	h2 := rvHeld(t, res, "W2 after W1's RUnlock")
	if h2.Err() != nil {
		t.Fatal(context.Cause(h2))
	}
	w2.Unlock()
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR125WeightedSecondLeaseCreateFault: H acquires 3 leases of a
// max-3 Weighted while A holds 1, so H must wait; H's second lease create
// (a checked create with no listing beside it) is struck: Cut (not
// applied), Lose (applied, reply lost), Drop (applied, reply swallowed on
// a live connection). H still makes exactly 3 leases (none twice, none
// lost), waits, holds once A releases, and leaves nothing behind.
func TestReviewR125WeightedSecondLeaseCreateFault(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop} {
		t.Run(action.String(), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
			if err := a.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path+"/leases", 1)
			awaitChildren(t, obs, path+"/locks", 0)
			p, s := r45Proxied(t)
			h := dsync.NewWeighted(s, path, 3)
			// The first lease create is a multi too (check + create): let
			// it pass, and strike the next.
			first := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/leases/", Prefix: true}, zktest.Pass)
			second := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/leases/", Prefix: true}, action)
			defer first.Disarm()
			defer second.Disarm()
			res := make(chan error, 1)
			go func() { res <- h.Acquire(ctx, 3) }()
			r38Struck(t, second, res)
			awaitChildren(t, obs, path+"/leases", 4)
			awaitClientWatch(t, connOf(t, s), path+"/leases", res)
			if kids := children(t, obs, path+"/leases"); len(kids) != 4 {
				t.Fatalf("leases %v; want A's and H's 3", kids)
			}
			r125GrantOnRelease(t, obs, path, s, a, h, res, 3)
		})
	}
}

// r125GrantOnRelease checks that H (h on session s), waiting for n leases
// (its Acquire's result comes on res) while A (a) holds 1, has not acquired
// yet, then that A's release grants H exactly n leases of its session's,
// and that H's release leaves no node or watch at path.
func r125GrantOnRelease(t *testing.T, obs *zk.Conn, path string, s *zkconn.Session, a, h *dsync.Weighted, res <-chan error, n int64) {
	t.Helper()
	select {
	case err := <-res:
		t.Fatalf("H's Acquire = %v while A holds 1 and H waits for %d", err, n)
	default:
	}
	a.Release(1)
	if err := reviewRecv(t, "H's Acquire", res); err != nil {
		t.Fatal(err)
	}
	leases := children(t, obs, path+"/leases")
	if int64(len(leases)) != n {
		t.Fatalf("H holds with leases %v; want exactly its %d", leases, n)
	}
	for _, l := range leases {
		if sid := mustSessionOf(t, obs, path+"/leases/"+l); sid != sessionID(t, s) {
			t.Errorf("lease %s owned by %#x, not H's session", l, sid)
		}
	}
	h.Release(n)
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
	r38NoWatches(t, path, obs)
}
