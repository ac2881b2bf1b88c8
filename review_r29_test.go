package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 29: the in-process exclusion of RWMutex readers and writers
// (Mutex.admit, RWMutex.awaitNoReads, keep's refusal).

// r29Node returns the full path of path's only child with marker in its name.
func r29Node(t *testing.T, kids []string, path, marker string) string {
	t.Helper()
	i := slices.IndexFunc(kids, func(k string) bool { return strings.Contains(k, marker) })
	if i < 0 {
		t.Fatalf("no %s node in %v", marker, kids)
	}
	return path + "/" + kids[i]
}

// TestReviewR29ReaderRefusedBehindLostWriterOfProcess pins keep's refusal: a reader whose write predecessor of this process is lost waits for that writer's Unlock.
func TestReviewR29ReaderRefusedBehindLostWriterOfProcess(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	x := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path) // another process's writer
	if _, err := x.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 1)
	r := rvGo(ctx, rw.RLockContext) // passes the gate, waits behind x
	kids := awaitChildren(t, obs, path, 2)
	rnode := r29Node(t, kids, path, "__READ__")
	w := rvGo(ctx, rw.LockContext) // this process's writer, behind the reader
	awaitChildren(t, obs, path, 3)
	if err := obs.Delete(rnode, -1); err != nil { // the waiting reader queues again, now behind w
		t.Fatal(err)
	}
	kids = awaitChildren(t, obs, path, 3)
	if slices.Contains(kids, rnode[len(path)+1:]) {
		t.Fatalf("reader's node not replaced: %v", kids)
	}
	x.Unlock()
	wctx := rvHeld(t, w, "writer")
	kids = awaitChildren(t, obs, path, 2)
	if err := obs.Delete(r29Node(t, kids, path, "__WRIT__"), -1); err != nil { // the write hold is lost
		t.Fatal(err)
	}
	<-wctx.Done()
	awaitChildren(t, obs, path, 0) // the reader's claim is refused: its node given back
	rvWaits(t, r, "reader behind a lost writer of this process, before its Unlock")
	rw.Unlock()
	rctx := rvHeld(t, r, "reader after the writer's Unlock")
	if rctx.Err() != nil {
		t.Fatalf("reader's hold ended: %v", context.Cause(rctx))
	}
	awaitChildren(t, obs, path, 1)
	rw.RUnlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR29WriterWaitsForLostRLockerMember pins awaitNoReads on a MultiLock's RLocker member: a writer of the process waits for the MultiLock's Unlock.
func TestReviewR29WriterWaitsForLostRLockerMember(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	ml := dsync.NewMultiLock(rw.RLocker())
	mctx, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kids := awaitChildren(t, obs, path, 1)
	if err := obs.Delete(path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	<-mctx.Done()
	awaitChildren(t, obs, path, 0)
	if rw.TryLock() {
		rw.Unlock()
		ml.Unlock()
		t.Fatal("TryLock succeeded while a MultiLock of this process held rw's read side (lost, before its Unlock)")
	}
	if _, err := rw.TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryLockContext = %v, want ErrWouldBlock", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = rw.LockContext(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext = %v, want DeadlineExceeded", err)
	}
	awaitChildren(t, obs, path, 0) // nothing left behind
	w := rvGo(ctx, rw.LockContext)
	awaitChildren(t, obs, path, 1)
	rvWaits(t, w, "writer before the MultiLock's Unlock")
	ml.Unlock()
	wctx := rvHeld(t, w, "writer after the MultiLock's Unlock")
	if wctx.Err() != nil {
		t.Fatalf("write hold ended: %v", context.Cause(wctx))
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR29WriterWaitsForLostDowngrade pins awaitNoReads on a downgrade's read hold: lost after the write hold's Unlock, it still keeps the next writer out until RUnlock.
func TestReviewR29WriterWaitsForLostDowngrade(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rctx, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	rw.Unlock()
	kids := awaitChildren(t, obs, path, 1)
	if err := obs.Delete(path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	<-rctx.Done()
	got := rw.TryLock()
	if got {
		rw.Unlock()
	}
	rw.RUnlock()
	if got {
		t.Fatal("TryLock succeeded while a downgrade's read hold of this process (lost) had not been RUnlocked")
	}
	if !rw.TryLock() {
		t.Fatal("TryLock failed after the last RUnlock")
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// r29AwaitingReads starts lock (rw's LockContext, or Lock) on rw (its session s) while a read
// hold of this process, lost, is not yet RUnlocked, and returns once the
// writer's node is alone at path and the listing that lets it claim has
// been answered (a request on the same connection, sent after, has), so
// that the writer holds in ZooKeeper and waits for the RUnlock.
func r29AwaitingReads(t *testing.T, ctx context.Context, obs *zk.Conn, s *zkconn.Session, lock func(context.Context) (context.Context, error), path string) (<-chan rvResult, string) {
	t.Helper()
	w := rvGo(ctx, lock)
	wnode := path + "/" + awaitChildren(t, obs, path, 1)[0]
	hw, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := hw.Conn().Exists(path); err != nil {
		t.Fatal(err)
	}
	return w, wnode
}

// r29LostReader takes a read hold of rw (RLockContext) and deletes its
// node, as an operator or an expiry would; the hold is lost, not RUnlocked.
func r29LostReader(t *testing.T, ctx context.Context, obs *zk.Conn, rw *dsync.RWMutex, path string) int64 {
	t.Helper()
	rctx, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token := rw.Token()
	if err := obs.Delete(path+"/"+awaitChildren(t, obs, path, 1)[0], -1); err != nil {
		t.Fatal(err)
	}
	<-rctx.Done()
	return token
}

// TestReviewR29WriteHoldLostWhileAwaitingReadsTakesAgain: a write hold lost
// (its node deleted) while it waited for this process's lost reader was
// handed out anyway, lost, once the reader left; it must take the lock
// again and return a live hold.
func TestReviewR29WriteHoldLostWhileAwaitingReadsTakesAgain(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path)
	r29LostReader(t, ctx, obs, rw, path)
	w, wnode := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
	if err := obs.Delete(wnode, -1); err != nil {
		t.Fatal(err)
	}
	again := path + "/" + awaitChildren(t, obs, path, 1)[0] // the writer queues again
	if again == wnode {
		t.Fatalf("the writer's deleted node %s is listed", wnode)
	}
	rvWaits(t, w, "writer before the reader's RUnlock")
	rw.RUnlock()
	held := rvHeld(t, w, "writer")
	if held.Err() != nil {
		t.Fatalf("LockContext handed out a lost hold: %v", context.Cause(held))
	}
	if _, st, err := obs.Get(again); err != nil || rw.Token() != st.Czxid {
		t.Fatalf("write hold's token %d; want its new node's czxid (%v)", rw.Token(), err)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR29LockStartsOverAfterSessionLostWhileAwaitingReads: Lock, whose
// session was lost while it waited for this process's lost reader, returned
// on the old session once the reader left, untold, while the lock was free
// for anyone; it must start over on the new session.
func TestReviewR29LockStartsOverAfterSessionLostWhileAwaitingReads(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	rw := dsync.NewRWMutex(s, path)
	rw.RLock()
	if err := obs.Delete(path+"/"+awaitChildren(t, obs, path, 1)[0], -1); err != nil { // lost, untold
		t.Fatal(err)
	}
	lock := func(context.Context) (context.Context, error) { rw.Lock(); return nil, nil } // untracked
	w, wnode := r29AwaitingReads(t, ctx, obs, s, lock, path)
	p.BlackHole() // the session expires: the writer's node goes
	awaitState(t, sub, zkconn.StateLost)
	p.Heal()
	awaitState(t, sub, zkconn.StateConnected)
	// The server expires the old session in its own time.
	if ok, _, gone, err := obs.ExistsW(wnode); err != nil {
		t.Fatal(err)
	} else if ok {
		<-gone
	}
	again := path + "/" + awaitChildren(t, obs, path, 1)[0] // the writer starts over
	if again == wnode {
		t.Fatalf("the expired session's node %s is listed", wnode)
	}
	if owner, id := mustSessionOf(t, obs, again), sessionID(t, s); owner != id {
		t.Fatalf("the writer's new node belongs to session %#x; want the new session %#x", owner, id)
	}
	rvWaits(t, w, "Lock before the reader's RUnlock")
	rw.RUnlock()
	rvHeld(t, w, "Lock")
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR29TokenOfReaderWhileWriterAwaitsIt: while a writer of the
// process waited for a lost reader's RUnlock, rw.Token gave the writer's
// newer token to the reader, still in its critical section, so fencing
// could not refuse it; a hold not handed out must not show.
func TestReviewR29TokenOfReaderWhileWriterAwaitsIt(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path)
	rtok := r29LostReader(t, ctx, obs, rw, path)
	w, _ := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
	if got := rw.Token(); got != rtok {
		t.Errorf("Token during the reader's hold = %d; want the read hold's %d", got, rtok)
	}
	if rw.Revoked() != nil {
		t.Errorf("Revoked during the reader's hold is the waiting writer's")
	}
	rvWaits(t, w, "writer before the reader's RUnlock")
	rw.RUnlock()
	rvHeld(t, w, "writer")
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}
