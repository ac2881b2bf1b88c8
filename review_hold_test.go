package dsync_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// rhSetup starts a server of the test's own behind a proxy, a Session
// through the proxy, and an observer straight to the server.
func rhSetup(t *testing.T, timeout time.Duration) (*zktest.Server, *zktest.Proxy, *zkconn.Session, *zk.Conn) {
	srv := zktest.Start(t)
	px := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{px.Addr()}, zkconn.WithSessionTimeout(timeout))
	return srv, px, s, observer(t, srv.Addr())
}

// rhNode returns the only child of path, in full.
func rhNode(t testing.TB, obs *zk.Conn, path string) string {
	t.Helper()
	kids := children(t, obs, path)
	if len(kids) != 1 {
		t.Fatalf("%s: children %v; want one", path, kids)
	}
	return path + "/" + kids[0]
}

// TestReviewHoldRewatchCutThenDelete: under LostOnExpiry a write fires the
// hold's watch; the rewatch's getData is cut (not applied), and while the
// connection is down the node is deleted. The hold survives the
// suspension itself, and its rewatch, sent again after the reconnect,
// finds the node gone: lost, "deleted". Passes.
func TestReviewHoldRewatchCutThenDelete(t *testing.T) {
	t.Parallel()
	srv, px, s, obs := rhSetup(t, 20*time.Second)
	path := lockPath(t)
	m := dsync.NewMutex(s, path, dsync.WithLossPolicy(dsync.LostOnExpiry))
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	node := rhNode(t, obs, path)
	id := sessionID(t, s)
	awaitWatch(t, srv, node, id)
	sub := s.Subscribe()
	defer sub.Stop()
	f := px.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Cut)
	if _, err := obs.Set(node, []byte("written"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitState(t, sub, zkconn.StateSuspended)
	if err := held.Err(); err != nil {
		t.Fatalf("a LostOnExpiry hold ended on a suspension during its rewatch: %v", context.Cause(held))
	}
	if err := obs.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, held, "deleted")
}

// TestReviewHoldRewatchLostReplyThenRevoke: a revocable LostOnExpiry hold's
// rewatch getData is applied but its reply lost with the connection (the
// server's watch goes with that connection). After the reconnect the
// rewatch is sent again, and a revocation request written after it is
// seen. Passes.
func TestReviewHoldRewatchLostReplyThenRevoke(t *testing.T) {
	t.Parallel()
	srv, px, s, obs := rhSetup(t, 20*time.Second)
	path := lockPath(t)
	m := dsync.NewMutex(s, path, dsync.WithLossPolicy(dsync.LostOnExpiry), dsync.Revocable())
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	node := rhNode(t, obs, path)
	id := sessionID(t, s)
	awaitWatch(t, srv, node, id)
	sub := s.Subscribe()
	defer sub.Stop()
	f := px.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Lose)
	if _, err := obs.Set(node, nil, -1); err != nil { // empty data, a new version
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitState(t, sub, zkconn.StateReconnected)
	awaitWatch(t, srv, node, id) // the rewatch, sent again
	select {
	case <-dsync.Revoked(held):
		t.Fatal("revoked before any request")
	default:
	}
	other := dial(t, []string{srv.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dsync.Revoke(ctx, other, node); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dsync.Revoked(held):
	case <-ctx.Done():
		t.Fatal("a revocation request written after the rewatch's lost reply was never seen")
	}
	if err := held.Err(); err != nil {
		t.Fatalf("hold ended: %v", context.Cause(held))
	}
}

// TestReviewHoldUnlockDuringStuckRewatch: Unlock while the rewatch's
// getData waits for a reply that never comes (Drop) returns at once (end
// cancels the rewatch's request and waits only for its goroutine), the
// hold's cause is context.Canceled, the node goes and no watch stays on
// it. Passes.
//
// Since the Session closes a connection at a reply out of turn, the
// swallowed reply fails the rewatch at the next ping's reply (a third of the
// timeout later), so an Unlock that waited for the rewatch's request would
// return then, within the bound: the test asks where Unlock's delete goes
// instead. It must be written on the connection the rewatch's request is
// still unanswered on, before that connection drops; it is black-holed there
// (nothing answered, the connection up, until Heal).
func TestReviewHoldUnlockDuringStuckRewatch(t *testing.T) {
	t.Parallel()
	srv, px, s, obs := rhSetup(t, 20*time.Second)
	path := lockPath(t)
	m := dsync.NewMutex(s, path)
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	node := rhNode(t, obs, path)
	id := sessionID(t, s)
	awaitWatch(t, srv, node, id)
	f := px.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Drop)
	if _, err := obs.Set(node, []byte("written"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	h, err := s.Current(context.Background()) // the connection the rewatch is out on
	if err != nil {
		t.Fatal(err)
	}
	del := px.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.BlackHole)
	defer del.Disarm()
	done := make(chan struct{})
	go func() {
		m.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Unlock blocked behind a rewatch whose reply never comes")
	}
	zktest.AwaitStruck(t, del) // Unlock returned once its delete was written
	select {
	case <-h.Suspended():
		t.Fatal("Unlock's delete was written only once the connection the rewatch was out on had dropped: " +
			"Unlock waited for the rewatch's request")
	default:
	}
	if cause := context.Cause(held); cause != context.Canceled {
		t.Fatalf("cause after Unlock = %v; want context.Canceled", cause)
	}
	px.Heal() // the delete goes again, on the next connection
	awaitChildren(t, obs, path, 0)
	if ids := watches(t, srv)[node]; len(ids) > 0 {
		t.Fatalf("watches left on the released node: %v", ids)
	}
}

// TestReviewHoldSuspendDuringStuckRewatch: under LostOnSuspension, a drop
// of the connection while the rewatch's getData is out cancels the hold at
// once, with the suspension as cause (not the rewatch's error). Passes.
func TestReviewHoldSuspendDuringStuckRewatch(t *testing.T) {
	t.Parallel()
	srv, px, s, obs := rhSetup(t, 20*time.Second)
	path := lockPath(t)
	m := dsync.NewMutex(s, path)
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	node := rhNode(t, obs, path)
	awaitWatchOf(t, srv, node, s)
	f := px.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Drop)
	if _, err := obs.Set(node, []byte("written"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	if err := held.Err(); err != nil {
		t.Fatalf("hold ended on a write: %v", context.Cause(held))
	}
	px.Cut()
	awaitLost(t, held, "suspended")
}

// TestReviewHoldSameSessionHolderAndWaiter: a revocable holder and a
// tracked waiter of the same Session on one path (two Mutexes): the
// waiter's plain getData watch on the holder's node and the holder's
// Watch share the server's one watch per connection and path. A
// revocation request reaches the holder (and makes the waiter list again),
// the holder's release hands the lock to the waiter, whose own deletion is
// then seen. No watch is left under the path. Passes.
func TestReviewHoldSameSessionHolderAndWaiter(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	a := dsync.NewMutex(s, path, dsync.Revocable())
	b := dsync.NewMutex(s, path)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	heldA, err := a.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodeA := rhNode(t, obs, path)
	type res struct {
		held context.Context
		err  error
	}
	gotB := make(chan res, 1)
	go func() {
		h, err := b.LockContext(ctx)
		gotB <- res{h, err}
	}()
	awaitChildren(t, obs, path, 2)
	awaitWatchOf(t, shared, nodeA, s)
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), nodeA); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dsync.Revoked(heldA):
	case <-ctx.Done():
		t.Fatal("holder never saw the revocation request")
	}
	select {
	case r := <-gotB:
		t.Fatalf("waiter took the lock while it was held: %v", r.err)
	default:
	}
	a.Unlock()
	r := <-gotB
	if r.err != nil {
		t.Fatal(r.err)
	}
	if cause := context.Cause(heldA); cause != context.Canceled {
		t.Fatalf("holder's cause = %v; want context.Canceled", cause)
	}
	nodeB := rhNode(t, obs, path)
	if nodeB == nodeA {
		t.Fatal("waiter holds on the holder's node")
	}
	if err := obs.Delete(nodeB, -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, r.held, "deleted")
	b.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left under %s: %v", path, left)
	}
}

// TestReviewHoldDeletedBetweenClaimAndHold: a revocable waiter becomes
// first; newHold's read of its node (the request after the claim) is cut,
// and while the connection is down the node is deleted. The hold is born
// lost (the event waits in the Watch's channel for Notify, the read finds
// the node gone), given back, and the place taken again: LockContext
// returns a hold on a new node, alive. Passes.
func TestReviewHoldDeletedBetweenClaimAndHold(t *testing.T) {
	t.Parallel()
	srv, px, s, obs := rhSetup(t, 20*time.Second)
	path := lockPath(t)
	holder := dsync.NewMutex(dial(t, []string{srv.Addr()}), path)
	if _, err := holder.LockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := dsync.NewMutex(s, path, dsync.Revocable(), dsync.WithLossPolicy(dsync.LostOnExpiry))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type res struct {
		held context.Context
		err  error
	}
	got := make(chan res, 1)
	go func() {
		h, err := m.LockContext(ctx)
		got <- res{h, err}
	}()
	kids := awaitChildren(t, obs, path, 2)
	var nodeW string
	for _, k := range kids {
		p := path + "/" + k
		_, st, err := obs.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.EphemeralOwner == sessionID(t, s) {
			nodeW = p
		}
	}
	if nodeW == "" {
		t.Fatalf("no node of the waiter's session among %v", kids)
	}
	id := sessionID(t, s)
	awaitWatch(t, srv, nodeW, id) // the waiter's own watch is set
	sub := s.Subscribe()
	defer sub.Stop()
	f := px.Strike(zktest.Match{Op: zktest.OpGetData, Path: nodeW}, zktest.Cut)
	holder.Unlock()
	zktest.AwaitStruck(t, f)
	awaitState(t, sub, zkconn.StateSuspended)
	if err := obs.Delete(nodeW, -1); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer m.Unlock()
	if err := r.held.Err(); err != nil {
		t.Fatalf("LockContext returned a hold ended already: %v", context.Cause(r.held))
	}
	now := rhNode(t, obs, path)
	if now == nodeW {
		t.Fatalf("hold on the deleted node %s", nodeW)
	}
	if _, st, err := obs.Get(now); err != nil || st.EphemeralOwner != id {
		t.Fatalf("hold's node %s: %v, owner %#x; want the waiter's session %#x", now, err, st.EphemeralOwner, id)
	}
}

// TestReviewHoldUnlockRacesWrites: end() racing changed/rewatch, many
// times: writes to the held node go out while Unlock runs (a revocation
// request among them). Unlock returns, the cause is context.Canceled, the
// nodes go, and no watch stays under the path. Passes; covers the
// ended/follow/Stop handshake under -race.
func TestReviewHoldUnlockRacesWrites(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	obs := observer(t, shared.Addr())
	writer := observer(t, shared.Addr())
	path := lockPath(t)
	m := dsync.NewMutex(s, path, dsync.Revocable())
	id := sessionID(t, s)
	for i := 0; i < 30; i++ {
		held, err := m.LockContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		node := rhNode(t, obs, path)
		awaitWatch(t, shared, node, id)
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			for k := 0; k < 1+i%4; k++ {
				data := []byte(nil)
				if k == 1 {
					data = []byte("__REVOKE__")
				}
				if _, err := writer.Set(node, data, -1); err != nil {
					return // released meanwhile
				}
			}
		}()
		if i%2 == 0 {
			<-wrote
		}
		done := make(chan struct{})
		go func() { m.Unlock(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Unlock did not return", i)
		}
		<-wrote
		if cause := context.Cause(held); cause != context.Canceled {
			t.Fatalf("round %d: cause %v; want context.Canceled", i, cause)
		}
		awaitChildren(t, obs, path, 0)
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left under %s: %v", path, left)
	}
}

// TestReviewHoldWriteDeleteRounds: a write then the deletion of the held
// node in quick succession, many times, with the hold's rewatch racing the
// deletion either way round: every hold ends lost, "deleted" (never
// canceled otherwise, never left alive). Passes.
func TestReviewHoldWriteDeleteRounds(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	id := sessionID(t, s)
	for _, policy := range []dsync.LossPolicy{dsync.LostOnSuspension, dsync.LostOnExpiry} {
		m := dsync.NewMutex(s, path, dsync.WithLossPolicy(policy))
		for i := 0; i < 20; i++ {
			held, err := m.LockContext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			node := rhNode(t, obs, path)
			awaitWatch(t, shared, node, id)
			for k := 0; k < i%3; k++ {
				if _, err := obs.Set(node, []byte("w"), -1); err != nil {
					t.Fatal(err)
				}
			}
			if err := obs.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			awaitLost(t, held, "deleted")
			m.Unlock()
		}
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left under %s: %v", path, left)
	}
}

// TestReviewHoldCloseRacesUnlock: Session.Close (NotWatching dispatched
// under go-zookeeper's watchersLock, the lost latch's AfterFuncs) racing
// Unlocks and writes on many tracked holds: no deadlock, every cause is
// context.Canceled or ErrLockLost wrapping ErrClosed. Passes.
func TestReviewHoldCloseRacesUnlock(t *testing.T) {
	t.Parallel()
	for round := 0; round < 5; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := zkconn.Dial(ctx, []string{shared.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		obs := observer(t, shared.Addr())
		const n = 8
		ms := make([]*dsync.Mutex, n)
		held := make([]context.Context, n)
		for i := range ms {
			ms[i] = dsync.NewMutex(s, lockPath(t)+"/"+strconv.Itoa(i), dsync.WithLossPolicy(dsync.LossPolicy(i%2)))
			if held[i], err = ms[i].LockContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < n; i += 2 {
				ms[i].Unlock()
			}
		}()
		for i := 1; i < n; i += 2 {
			if kids := children(t, obs, lockPath(t)+"/"+strconv.Itoa(i)); len(kids) == 1 {
				obs.Set(lockPath(t)+"/"+strconv.Itoa(i)+"/"+kids[0], []byte("w"), -1)
			}
		}
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		for _, ch := range []chan struct{}{done, closed} {
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("round %d: Close or Unlock deadlocked", round)
			}
		}
		for i, h := range held {
			select {
			case <-h.Done():
			case <-ctx.Done():
				t.Fatalf("round %d: hold %d not canceled after Close", round, i)
			}
			cause := context.Cause(h)
			if cause != context.Canceled && !(errors.Is(cause, dsync.ErrLockLost) && errors.Is(cause, zkconn.ErrClosed)) {
				t.Fatalf("round %d: hold %d cause %v", round, i, cause)
			}
		}
		for i := 1; i < n; i += 2 {
			ms[i].Unlock()
		}
		cancel()
	}
}

// TestReviewHoldDowngradeThenDeletes: a downgrade writes the write node (in
// the transaction that creates the read node), which fires the write
// hold's Watch and starts its rewatch; the write node's deletion right
// after is seen by the write hold (lost, "deleted") and not by the read
// hold, whose own node's deletion is seen then. Passes.
func TestReviewHoldDowngradeThenDeletes(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	rw := dsync.NewRWMutex(s, path)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wheld, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wnode := rhNode(t, obs, path)
	rheld, err := rw.RLockContext(wheld)
	if err != nil {
		t.Fatal(err)
	}
	kids := children(t, obs, path)
	var rnode string
	for _, k := range kids {
		if p := path + "/" + k; p != wnode {
			rnode = p
		}
	}
	if len(kids) != 2 || rnode == "" {
		t.Fatalf("children after a downgrade: %v", kids)
	}
	id := sessionID(t, s)
	awaitWatch(t, shared, wnode, id) // the write hold's rewatch after the downgrade's write
	if err := obs.Delete(wnode, -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, wheld, "deleted")
	if err := rheld.Err(); err != nil {
		t.Fatalf("read hold ended with the write node: %v", context.Cause(rheld))
	}
	if err := obs.Delete(rnode, -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, rheld, "deleted")
	rw.RUnlock()
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left under %s: %v", path, left)
	}
}

// TestReviewHoldLeaseWriteThenDelete: a Weighted lease (Weighted ignores
// Revocable) is written to, which starts its rewatch, then its node is
// deleted: it ends lost ("deleted"); the other lease stays. Passes.
func TestReviewHoldLeaseWriteThenDelete(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	w := dsync.NewWeighted(s, path, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls, err := w.AcquireLeases(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	id := sessionID(t, s)
	awaitWatch(t, shared, l.Path(), id)
	if _, err := obs.Set(l.Path(), []byte("w"), -1); err != nil {
		t.Fatal(err)
	}
	awaitWatch(t, shared, l.Path(), id) // set again by the rewatch
	if err := obs.Delete(l.Path(), -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, l.Context(), "deleted")
	if err := ls[1].Context().Err(); err != nil {
		t.Fatalf("other lease ended: %v", context.Cause(ls[1].Context()))
	}
	for _, l := range ls {
		l.Release()
	}
}
