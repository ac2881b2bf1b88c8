package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 32: the RWMutex writer's wait for this process's read holds
// (awaitNoReads) with revocation, LostOnExpiry and MultiLock members, and the
// reader's give-back loop.

// TestReviewR32RevocationWhileAwaitingReadsSeen: a revocation written into a revocable writer's node while it waits for this process's reads is seen by Revoked once handed out.
func TestReviewR32RevocationWhileAwaitingReadsSeen(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path, dsync.Revocable())
	r29LostReader(t, ctx, obs, rw, path)
	w, wnode := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
	awaitWatchOf(t, shared, wnode, s) // the writer's hold watches its node
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), wnode); err != nil {
		t.Fatal(err)
	}
	rvWaits(t, w, "writer while this process's lost reader holds")
	rw.RUnlock()
	held := rvHeld(t, w, "writer")
	if held.Err() != nil {
		t.Fatalf("write hold lost: %v", context.Cause(held))
	}
	if kids := awaitChildren(t, obs, path, 1); path+"/"+kids[0] != wnode {
		t.Fatalf("writer took the lock again (%v), want %s", kids, wnode)
	}
	select {
	case <-dsync.Revoked(held):
	case <-ctx.Done():
		t.Fatal("a revocation written while the writer waited for this process's reads was never seen")
	}
	if rw.Revoked() != dsync.Revoked(held) {
		t.Fatal("rw.Revoked is not the write hold's")
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left: %v", left)
	}
}

// TestReviewR32LostOnExpiryKeepsHoldAcrossCutAfterWait: under LostOnExpiry, a connection cut at the node read after the wait does not give back the live write hold.
func TestReviewR32LostOnExpiryKeepsHoldAcrossCutAfterWait(t *testing.T) {
	t.Parallel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	rw, path, wnode, held := r30CutReadAfterWait(t, obs, p, s, dsync.WithLossPolicy(dsync.LostOnExpiry))
	if held.Err() != nil {
		t.Fatalf("LostOnExpiry write hold lost over a suspension: %v", context.Cause(held))
	}
	if kids := awaitChildren(t, obs, path, 1); path+"/"+kids[0] != wnode {
		t.Fatalf("writer gave back its live node and took the lock again (%v), want %s", kids, wnode)
	}
	if got, want := dsync.Token(held), mustCzxid(t, obs, wnode); got != want {
		t.Fatalf("token %d, want %d", got, want)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR32MultiLockWriteMemberRetaken: a MultiLock whose RWMutex member's write hold is lost while it waits for this process's reads takes it again and hands out live holds only.
func TestReviewR32MultiLockWriteMemberRetaken(t *testing.T) {
	path := lockPath(t)
	a, b := path+"/a", path+"/b"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	m := dsync.NewMutex(s, a)
	rw := dsync.NewRWMutex(s, b)
	ml := dsync.NewMultiLock(rw, m)
	r29LostReader(t, ctx, obs, rw, b)
	w := rvGo(ctx, ml.LockContext)
	awaitChildren(t, obs, a, 1)
	wnode := b + "/" + awaitChildren(t, obs, b, 1)[0]
	awaitWatchOf(t, shared, wnode, s)
	if err := obs.Delete(wnode, -1); err != nil { // lost while it waits: taken again
		t.Fatal(err)
	}
	again := b + "/" + awaitChildren(t, obs, b, 1)[0]
	if again == wnode {
		t.Fatal("the lost write node is still listed")
	}
	awaitWatchOf(t, shared, again, s)
	rvWaits(t, w, "MultiLock while this process's lost reader holds")
	rw.RUnlock()
	held := rvHeld(t, w, "MultiLock")
	if held.Err() != nil {
		t.Fatalf("MultiLock hold lost: %v", context.Cause(held))
	}
	if kids := awaitChildren(t, obs, b, 1); b+"/"+kids[0] != again {
		t.Fatalf("write member's node %v, want %s", kids, again)
	}
	if rw.Token() != mustCzxid(t, obs, again) {
		t.Fatalf("rw's token %d is not its new node's", rw.Token())
	}
	if _, err := rw.TryRLockContext(ctx); err == nil {
		t.Fatal("a reader of this process got in while the MultiLock holds rw for writing")
	}
	ml.Unlock()
	awaitChildren(t, obs, a, 0)
	awaitChildren(t, obs, b, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left: %v", left)
	}
}

// mustCzxid returns node's czxid, read by obs.
func mustCzxid(t *testing.T, obs *zk.Conn, node string) int64 {
	t.Helper()
	_, st, err := obs.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	return st.Czxid
}

// TestReviewR32ReaderGiveBackThenCtxEndsLeavesNothing: a revocable reader that gave its claim back to this process's lost writer and whose ctx ends at the gate leaves no node and no watch.
func TestReviewR32ReaderGiveBackThenCtxEndsLeavesNothing(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path, dsync.Revocable())
	x := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path) // another process's writer
	if _, err := x.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	r := rvGo(rctx, rw.RLockContext) // passes the gate, waits behind x
	kids := awaitChildren(t, obs, path, 2)
	rnode := r29Node(t, kids, path, "__READ__")
	awaitWatchOf(t, shared, rnode, s)
	w := rvGo(ctx, rw.LockContext) // this process's writer, behind the reader
	awaitChildren(t, obs, path, 3)
	if err := obs.Delete(rnode, -1); err != nil { // the reader queues again, behind w
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 3)
	x.Unlock()
	wctx := rvHeld(t, w, "writer")
	kids = awaitChildren(t, obs, path, 2)
	if err := obs.Delete(r29Node(t, kids, path, "__WRIT__"), -1); err != nil { // the write hold is lost
		t.Fatal(err)
	}
	<-wctx.Done()
	awaitChildren(t, obs, path, 0) // the reader's claim is given back
	rvWaits(t, r, "reader behind a lost writer of this process")
	rcancel()
	if res := <-r; res.err != context.Canceled {
		t.Fatalf("reader: %v, %v; want context.Canceled", res.held, res.err)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left: %v", left)
	}
	if _, err := rw.TryRLockContext(ctx); err != nil { // nothing of the reader is left in rw
		t.Fatal(err)
	}
	rw.RUnlock()
	if _, err := rw.TryLockContext(ctx); err != nil {
		t.Fatalf("writer after the reader's RUnlock: %v", err)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR32SuspendedWhileAwaitingReadsHandsOffToNext: a write hold lost to a suspension while it waits for this process's reads is given back to the next process's waiter, which holds alone; the writer takes the lock again behind it.
func TestReviewR32SuspendedWhileAwaitingReadsHandsOffToNext(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	rw := dsync.NewRWMutex(s, path)
	r29LostReader(t, ctx, obs, rw, path)
	w, wnode := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
	xs := dial(t, []string{shared.Addr()})
	x := dsync.NewRWMutex(xs, path) // another process's writer, behind w
	xr := rvGo(ctx, x.LockContext)
	awaitChildren(t, obs, path, 2)
	awaitWatchOf(t, shared, wnode, xs)
	p.Cut() // the writer's hold is lost (LostOnSuspension) while it waits
	xctx := rvHeld(t, xr, "the next process's writer")
	if xctx.Err() != nil {
		t.Fatalf("x's hold lost: %v", context.Cause(xctx))
	}
	kids := awaitChildren(t, obs, path, 2) // x, and the writer queued again behind it
	if path+"/"+kids[0] == wnode || path+"/"+kids[1] == wnode {
		t.Fatalf("the lost write node is still listed: %v", kids)
	}
	rw.RUnlock()
	rvWaits(t, w, "writer behind x")
	x.Unlock()
	held := rvHeld(t, w, "writer")
	if held.Err() != nil {
		t.Fatalf("write hold lost: %v", context.Cause(held))
	}
	if xctx.Err() == nil {
		t.Fatal("x still holds while the writer does")
	}
	awaitChildren(t, obs, path, 1)
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left: %v", left)
	}
}

// TestReviewR32RevocationOfRetakenNodeNotCarried: a revocation written into a revocable write node lost while it waits for this process's reads is not reported on the hold taken again.
func TestReviewR32RevocationOfRetakenNodeNotCarried(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path, dsync.Revocable())
	r29LostReader(t, ctx, obs, rw, path)
	w, wnode := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
	awaitWatchOf(t, shared, wnode, s)
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), wnode); err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(wnode, -1); err != nil { // lost while it waits: taken again
		t.Fatal(err)
	}
	again := path + "/" + awaitChildren(t, obs, path, 1)[0]
	if again == wnode {
		t.Fatal("the lost write node is still listed")
	}
	rw.RUnlock()
	held := rvHeld(t, w, "writer")
	if held.Err() != nil {
		t.Fatalf("write hold lost: %v", context.Cause(held))
	}
	select {
	case <-dsync.Revoked(held):
		t.Fatal("the new write hold reports the lost node's revocation")
	default:
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}
