package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review of the RWMutex queue (queue.go's rw mode, rwmutex.go, CreateTouching).

// rvResult is the outcome of a lock call run on a goroutine.
type rvResult struct {
	held context.Context
	err  error
}

func rvGo(ctx context.Context, lock func(context.Context) (context.Context, error)) <-chan rvResult {
	out := make(chan rvResult, 1)
	go func() {
		held, err := lock(ctx)
		out <- rvResult{held, err}
	}()
	return out
}

func rvWaits(t *testing.T, ch <-chan rvResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (err %v); want it waiting", what, r.err)
	default:
	}
}

// rvHeld receives a lock call's result within reviewBound, failing on an
// error, and returns its hold context.
func rvHeld(t *testing.T, ch <-chan rvResult, what string) context.Context {
	t.Helper()
	r := reviewRecv(t, what, ch)
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	return r.held
}

// rvLastWriter returns the last writer's node in rw's queue.
func rvLastWriter(t *testing.T, rw *dsync.RWMutex) dsync.Participant {
	t.Helper()
	ps := rwParticipants(t, rw)
	for i := len(ps) - 1; i >= 0; i-- {
		if !ps[i].Reader {
			return ps[i]
		}
	}
	t.Fatalf("no writer in %v", kinds(ps))
	return dsync.Participant{}
}

// TestReviewRWReaderSignalWatchLeaksWhenWriterGivesUp pinned a leak: a
// reader behind two writers set an exists watch on the nearer writer's
// handoff path, and when that writer gave up (it never held, so it sent no
// signal) the watch stayed until the reader's session ended. Readers set no
// such watch now: every round leaves nothing behind.
//
// The reader also must not take the lock while the holder still holds
// (checked on the way: the proof of the signal holds).
func TestReviewRWReaderSignalWatchLeaksWhenWriterGivesUp(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	holder := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	holderNode := rwParticipants(t, holder)[0].Path
	rsess := dial(t, []string{shared.Addr()})
	reader := dsync.NewRWMutex(rsess, path)
	rid := sessionID(t, rsess)
	const rounds = 3
	var reads []<-chan rvResult
	var gone []string
	for i := range rounds {
		w := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		wctx, wcancel := context.WithCancel(ctx)
		wdone := rvGo(wctx, w.LockContext)
		awaitChildren(t, obs, path, 2+i)
		p := rvLastWriter(t, holder)
		reads = append(reads, rvGo(ctx, reader.RLockContext))
		awaitChildren(t, obs, path, 3+i)
		awaitWatch(t, shared, p.Path, rid)
		wcancel()
		if r := <-wdone; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("writer %d: %v; want context.Canceled", i, r.err)
		}
		awaitChildren(t, obs, path, 2+i)
		gone = append(gone, p.Path+".handoff")
		for j, ch := range reads {
			rvWaits(t, ch, fmt.Sprintf("reader %d (the holder still holds)", j))
		}
	}
	awaitWatch(t, shared, holderNode, rid) // the readers listed again and follow the holder
	for j, ch := range reads {
		rvWaits(t, ch, fmt.Sprintf("reader %d (the holder still holds)", j))
	}
	holder.Unlock()
	for j, ch := range reads {
		rvHeld(t, ch, fmt.Sprintf("reader %d", j))
	}
	for range reads {
		reader.RUnlock()
	}
	awaitChildren(t, obs, path, 0)
	h, err := rsess.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Conn().Sync(path); err != nil {
		t.Fatal(err)
	}
	left := watchesUnder(t, path, obs)
	var leaked []string
	for _, p := range gone {
		if slices.Contains(left, p) {
			leaked = append(leaked, p)
		}
	}
	if len(left) > 0 {
		t.Fatalf("with every node gone and the reader never giving up, %d watches are left under %s (%d on the handoff paths of writers that gave up): %v",
			len(left), path, len(leaked), left)
	}
}

// TestReviewRWReaderSignalWatchLeaksWhenSetAfterHandoff: nobody gives up.
// A reader behind two writers lists the queue, then sets its watch on the
// nearer writer; here the watch goes out only after that writer has held
// and handed off (the request is held in a black hole meanwhile; on a busy
// lock a round trip is enough). The reader finds the writer gone, lists
// again, holds and releases, and leaves no watch behind (it once left one on
// the writer's handoff path, which nobody would create again).
func TestReviewRWReaderSignalWatchLeaksWhenSetAfterHandoff(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	w0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := w0.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	w1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w1done := rvGo(ctx, w1.LockContext)
	awaitChildren(t, obs, path, 2)
	p := rvLastWriter(t, w0)
	proxy := zktest.NewProxy(t, shared.Addr())
	rsess := dial(t, []string{proxy.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
	reader := dsync.NewRWMutex(rsess, path)
	f := proxy.Strike(zktest.Match{Op: zktest.OpGetData, Path: p.Path}, zktest.BlackHole)
	defer f.Disarm()
	rdone := rvGo(ctx, reader.RLockContext)
	zktest.AwaitStruck(t, f)
	awaitChildren(t, obs, path, 3)
	w0.Unlock()
	rvHeld(t, w1done, "second writer")
	rvWaits(t, rdone, "reader while the second writer holds")
	w1.Unlock() // the handoff signal: before the reader's watch is set
	awaitChildren(t, obs, path, 1)
	proxy.Heal()
	rvHeld(t, rdone, "reader")
	reader.RUnlock()
	awaitChildren(t, obs, path, 0)
	h, err := rsess.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Conn().Sync(path); err != nil {
		t.Fatal(err)
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("with every node gone and nobody giving up, watches are left under %s: %v", path, left)
	}
}

// TestReviewRWDowngradeReusesNodeWhileDeleteOutstanding: a downgrade's read
// node has a fixed name (the write node's, __READ__ for __WRIT__), so a
// second downgrade under one write hold recreates the very path the first
// one's RUnlock is still deleting. The guaranteed delete deletes by path,
// any version: retried after a reconnect, it deletes the second read node,
// and the second read hold is lost though nobody released it.
//
// Here the first delete is applied and its reply swallowed (Drop), so it is
// outstanding until the connection drops; RUnlock returns anyway (Settle's
// bound). RLockContext(write hold) then succeeds at once, recreating the
// path. Cut: the outstanding delete is retried and removes the new node.
// Either the second downgrade waits for that delete (and, here, runs out of
// its ctx) or it must not lose its node to it.
func TestReviewRWDowngradeReusesNodeWhileDeleteOutstanding(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path,
		dsync.WithLossPolicy(dsync.LostOnExpiry)) // a dropped connection alone loses nothing
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.RLockContext(wctx); err != nil {
		t.Fatal(err)
	}
	down := rwParticipants(t, rw)[1]
	if !down.Reader {
		t.Fatalf("queue %v; want the downgrade's read node second", kinds(rwParticipants(t, rw)))
	}
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: down.Path}, zktest.Drop)
	defer f.Disarm()
	rw.RUnlock()
	zktest.AwaitStruck(t, f)
	awaitChildren(t, obs, path, 1) // the delete was applied; its reply never comes

	dctx, dcancel := context.WithTimeout(wctx, 3*time.Second)
	defer dcancel()
	r2, err := rw.RLockContext(dctx)
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second downgrade: %v; want success or DeadlineExceeded (waiting for the first one's delete)", err)
		}
		p.Cut()
		return // it waited for the outstanding delete: fine
	}
	p.Cut()                      // the outstanding delete goes out again on the next connection
	now := rwParticipants(t, rw) // through the same session, once reconnected
	if len(now) != 2 || now[1].Path == down.Path {
		t.Fatalf("queue after the second downgrade: %v; want the write node and a read node of a new name (not %s)", now, down.Path)
	}
	if err := context.Cause(r2); err != nil {
		t.Fatalf("second downgrade's read hold lost without any release: %v", err)
	}
	rw.RUnlock()
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWDowngradeTwice: the write holder downgrades twice (two
// RLockContext calls with its hold context, as Curator's write owner may
// take its read lock twice: Curator re-enters it). The second call fails
// with "node exists" instead of re-entering the downgrade's read hold.
func TestReviewRWDowngradeTwice(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.RLockContext(wctx)
	if err != nil {
		rw.RUnlock()
		rw.Unlock()
		awaitChildren(t, obs, path, 0)
		t.Fatalf("second RLockContext(write hold) = %v; want a read hold (re-entering the downgrade's)", err)
	}
	if r2 != r1 {
		t.Logf("second downgrade made a second read hold")
	}
	rw.RUnlock()
	rw.RUnlock()
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWUpgradeFromDowngradeContext: the downgrade's read hold
// context carries the write hold's value too. After Unlock of the write
// lock, LockContext given that read hold context (an upgrade) reports the
// old write hold's cause, context.Canceled, while the context given is
// live, instead of ErrUpgrade.
func TestReviewRWUpgradeFromDowngradeContext(t *testing.T) {
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
	_, err = rw.LockContext(rctx)
	_, terr := rw.TryLockContext(rctx)
	live := rctx.Err() == nil
	rw.RUnlock()
	awaitChildren(t, obs, path, 0)
	if !errors.Is(err, dsync.ErrUpgrade) || !errors.Is(terr, dsync.ErrUpgrade) {
		t.Fatalf("LockContext(live read hold of a downgrade) = %v, TryLockContext = %v; want ErrUpgrade (read hold live: %v)",
			err, terr, live)
	}
}

// TestReviewRWParticipantsDowngradeHolds: a downgrade's read node holds the
// read lock (RLockContext returned it), but Participants marks it Waiting
// (a reader behind a writer: its own). RevokeHolders, which leaves out the
// Waiting ones, then never asks it.
func TestReviewRWParticipantsDowngradeHolds(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.RLockContext(wctx); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(kinds(rwParticipants(t, rw)))
	rw.Unlock()
	rw.RUnlock()
	awaitChildren(t, obs, path, 0)
	if got != "[W R]" {
		t.Fatalf("Participants with the write hold and its downgrade's read hold = %s; want [W R]", got)
	}
}

// TestReviewRWDowngradeErasesRevocationRequest: a revocable write hold's
// node gets a revocation request (__REVOKE__); the hold re-reads its node
// when its watch fires. The downgrade's setData (CreateTouching) writes the
// node's data back in between, so the re-read finds no request: Revoked
// never closes, though Revoke returned nil. The re-read is held back
// exactly: it is applied and its reply swallowed (Drop), the downgrade goes
// out, then the connection is cut and the re-read is sent again. (Failed
// against the first version of the diff, whose touch wrote the node's
// configured data; passes since downgrade writes back the data it read,
// version-checked.)
func TestReviewRWDowngradeErasesRevocationRequest(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
	rw := dsync.NewRWMutex(s, path, dsync.Revocable(), dsync.WithLossPolicy(dsync.LostOnExpiry))
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wnode := rwParticipants(t, rw)[0].Path
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: wnode}, zktest.Drop)
	defer f.Disarm()
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), wnode); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f) // the holder's re-read saw __REVOKE__; it is never told
	if _, err := rw.RLockContext(wctx); err != nil {
		t.Fatal(err)
	}
	p.Cut() // the re-read goes out again
	awaitWatchOf(t, shared, wnode, s)
	select {
	case <-dsync.Revoked(wctx):
	case <-time.After(10 * time.Second): // bound of a failure only
		data, _, _ := obs.Get(wnode)
		t.Errorf("revocation request never seen by the write holder; its node now holds %q", data)
	}
	rw.RUnlock()
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWDowngradeTokenRegresses: fencing tokens must grow from holder
// to holder. A writer X queues behind the write holder P; P downgrades: its
// read node is created after X's node, so its czxid, the read hold's
// token, is above X's. P unlocks and runs down its read hold; X then holds
// with a smaller token than the read hold before it. A resource that
// remembers the highest token seen refuses X.
func TestReviewRWDowngradeTokenRegresses(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	x := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeToken := rw.Token()
	xdone := rvGo(ctx, x.LockContext)
	awaitChildren(t, obs, path, 2)
	if _, err := rw.RLockContext(wctx); err != nil {
		t.Fatal(err)
	}
	rw.Unlock()
	readToken := rw.Token() // the downgrade's read hold, now the only hold here
	rw.RUnlock()
	rvHeld(t, xdone, "writer")
	xToken := x.Token()
	x.Unlock()
	awaitChildren(t, obs, path, 0)
	if !(writeToken <= readToken && readToken < xToken) {
		t.Fatalf("tokens in hold order: write %d, its downgrade's read %d, next writer %d; want non-decreasing (the read hold continues the write hold)", writeToken, readToken, xToken)
	}
}

// ---- Checks that held (kept as regression tests) ----

// TestReviewRWReadersFollowOneWriter: two readers (two sessions) behind two
// writers both follow the nearer writer. Neither gets in while either
// writer holds; both get in on that writer's release; no watch is left.
func TestReviewRWReadersFollowOneWriter(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	w0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := w0.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	w1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w1done := rvGo(ctx, w1.LockContext)
	awaitChildren(t, obs, path, 2)
	p := rvLastWriter(t, w0)
	var rds []<-chan rvResult
	var rws []*dsync.RWMutex
	for i := range 2 {
		s := dial(t, []string{shared.Addr()})
		r := dsync.NewRWMutex(s, path)
		rws = append(rws, r)
		rds = append(rds, rvGo(ctx, r.RLockContext))
		awaitChildren(t, obs, path, 3+i)
		awaitWatchOf(t, shared, p.Path, s)
	}
	w0.Unlock()
	rvHeld(t, w1done, "second writer")
	for i, ch := range rds {
		rvWaits(t, ch, fmt.Sprintf("reader %d while the second writer holds", i))
	}
	w1.Unlock()
	for i, ch := range rds {
		rvHeld(t, ch, fmt.Sprintf("reader %d", i))
	}
	for _, r := range rws {
		r.RUnlock()
	}
	awaitChildren(t, obs, path, 0)
	if w := watchesUnder(t, path, obs); len(w) > 0 {
		t.Fatalf("watches left behind: %v", w)
	}
}

// TestReviewRWDowngradeLostReply: the downgrade's multi is applied and its
// reply lost (Lose): after the reconnect the read node is found and kept,
// once; a writer that waited behind the write node waits for it.
func TestReviewRWDowngradeLostReply(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path,
		dsync.WithLossPolicy(dsync.LostOnExpiry))
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wnode := rwParticipants(t, rw)[0]
	osess := dial(t, []string{shared.Addr()})
	other := dsync.NewRWMutex(osess, path)
	odone := rvGo(ctx, other.LockContext)
	awaitChildren(t, obs, path, 2)
	awaitWatchOf(t, shared, wnode.Path, osess)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: wnode.Path}, zktest.Lose)
	defer f.Disarm()
	rctx, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Struck():
	default:
		t.Fatal("the downgrade's multi was not struck")
	}
	ps := rwParticipants(t, rw)
	if got := strings.Join(kinds(ps), " "); len(ps) != 3 || !ps[1].Reader {
		t.Fatalf("queue after a downgrade with a lost reply: %s", got)
	}
	rw.Unlock()
	awaitWatchOf(t, shared, ps[1].Path, osess)
	rvWaits(t, odone, "writer behind the downgrade")
	if rctx.Err() != nil {
		t.Fatalf("downgrade's hold: %v", context.Cause(rctx))
	}
	rw.RUnlock()
	rvHeld(t, odone, "writer")
	other.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWDowngradeDeadlineInPartition: a downgrade whose multi falls
// into a black hole returns by its deadline and leaves no read node once
// the network heals.
func TestReviewRWDowngradeDeadlineInPartition(t *testing.T) {
	srv := zktest.Start(t)
	path := lockPath(t)
	obs := observer(t, srv.Addr())
	p := zktest.NewProxy(t, srv.Addr())
	sess := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
	rw := dsync.NewRWMutex(sess, path, dsync.WithLossPolicy(dsync.LostOnExpiry))
	other := dsync.NewRWMutex(sess, path) // another RWMutex: its calls go to ZooKeeper
	wctx, err := rw.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wnode := rwParticipants(t, rw)[0].Path
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: wnode}, zktest.BlackHole)
	defer f.Disarm()
	dctx, cancel := context.WithTimeout(wctx, 300*time.Millisecond)
	defer cancel()
	_, err = rw.RLockContext(dctx)
	deadline, _ := dctx.Deadline()
	if late := time.Since(deadline); late > slack {
		t.Errorf("downgrade returned %v after its deadline", late)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("downgrade in a partition = %v; want DeadlineExceeded", err)
	}
	// This process holds the write lock: its readers wait for it, as
	// sync.RWMutex's do (TryRLockContext returns at once).
	for _, c := range []struct {
		lock func(context.Context) (context.Context, error)
		want error
	}{
		{rw.RLockContext, context.DeadlineExceeded}, {rw.TryRLockContext, dsync.ErrWouldBlock},
		{other.RLockContext, context.DeadlineExceeded}, {other.TryRLockContext, context.DeadlineExceeded},
	} {
		rctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := c.lock(rctx)
		deadline, _ := rctx.Deadline()
		if late := time.Since(deadline); late > slack {
			t.Errorf("read lock returned %v after its deadline", late)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("read lock in a partition = %v; want %v", err, c.want)
		}
		cancel()
	}
	p.Heal()
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWDowngradeThenUnlockPastSignalWaiter: a writer third in line
// follows the second writer with its handoff signal; the second writer
// gets in, downgrades and unlocks at once, which sends its handoff signal
// after the write. The third writer must wait for the downgrade's read
// hold.
func TestReviewRWDowngradeThenUnlockPastSignalWaiter(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	w0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := w0.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	w1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w1done := rvGo(ctx, w1.LockContext)
	awaitChildren(t, obs, path, 2)
	p := rvLastWriter(t, w0)
	xs := dial(t, []string{shared.Addr()})
	x := dsync.NewRWMutex(xs, path)
	xdone := rvGo(ctx, x.LockContext)
	awaitChildren(t, obs, path, 3)
	awaitWatchOf(t, shared, p.Path+".handoff", xs)
	awaitWatchOf(t, shared, p.Path, xs)
	w0.Unlock()
	held := rvHeld(t, w1done, "second writer")
	if _, err := w1.RLockContext(held); err != nil {
		t.Fatal(err)
	}
	w1.Unlock()
	down := rwParticipants(t, w1)[0]
	if !down.Reader {
		t.Fatalf("queue %v; want the downgrade's read node first", kinds(rwParticipants(t, w1)))
	}
	awaitWatchOf(t, shared, down.Path, xs)
	rvWaits(t, xdone, "third writer while the downgrade's read hold is held")
	w1.RUnlock()
	rvHeld(t, xdone, "third writer")
	x.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWDowngradePastCuratorWaiters: Curator's reader, then Curator's
// writer, waiting behind a dsync write holder that downgrades and unlocks:
// the Curator reader gets in beside the downgrade's read hold; the Curator
// writer lists again, follows the read node, and gets in only after it.
func TestReviewRWDowngradePastCuratorWaiters(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	javaR, err := java.Hold(ctx, curator.Read, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer javaR.Kill()
	awaitChildren(t, obs, path, 2)
	javaW, err := java.Hold(ctx, curator.Write, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer javaW.Kill()
	awaitChildren(t, obs, path, 3)
	jw := rvLastWriter(t, rw)
	if _, err := rw.RLockContext(wctx); err != nil {
		t.Fatal(err)
	}
	rw.Unlock()
	select {
	case <-javaR.Acquired():
	case <-ctx.Done():
		t.Fatal("Curator reader never got in beside the downgrade")
	}
	select {
	case <-javaW.Acquired():
		t.Fatal("Curator writer got in while the downgrade's read hold is held")
	default:
	}
	if err := javaR.Release(); err != nil && !errors.Is(err, curator.ErrExited) {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 2)
	down := rwParticipants(t, rw)[0]
	awaitWatch(t, shared, down.Path, jw.Session) // Curator's writer listed again and follows the read node
	select {
	case <-javaW.Acquired():
		t.Fatal("Curator writer got in while the downgrade's read hold is held")
	default:
	}
	rw.RUnlock()
	select {
	case <-javaW.Acquired():
	case <-ctx.Done():
		t.Fatal("Curator writer never got in")
	}
	if err := javaW.Release(); err != nil && !errors.Is(err, curator.ErrExited) {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
}

// TestReviewRWDowngradeRUnlockFirst: the downgrader ends its read hold
// before its write hold. A writer queued behind the write node (following
// the read node after the downgrade) lists again and follows the write node,
// written to once already, without claiming; a reader behind that writer
// waits for it. Unlock then hands the lock to the writer, then the reader.
func TestReviewRWDowngradeRUnlockFirst(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wnode := rwParticipants(t, rw)[0]
	xs := dial(t, []string{shared.Addr()})
	x := dsync.NewRWMutex(xs, path)
	xdone := rvGo(ctx, x.LockContext)
	awaitChildren(t, obs, path, 2)
	awaitWatchOf(t, shared, wnode.Path, xs)
	if _, err := rw.RLockContext(wctx); err != nil {
		t.Fatal(err)
	}
	down := rwParticipants(t, rw)[1]
	awaitWatchOf(t, shared, down.Path, xs)
	rs := dial(t, []string{shared.Addr()})
	r := dsync.NewRWMutex(rs, path)
	rdone := rvGo(ctx, r.RLockContext)
	awaitChildren(t, obs, path, 4)
	rw.RUnlock()
	awaitChildren(t, obs, path, 3)
	awaitWatchOf(t, shared, wnode.Path, xs)
	rvWaits(t, xdone, "writer while the write hold is held")
	rvWaits(t, rdone, "reader behind a waiting writer")
	rw.Unlock()
	rvHeld(t, xdone, "writer")
	rvWaits(t, rdone, "reader while the writer holds")
	x.Unlock()
	rvHeld(t, rdone, "reader")
	r.RUnlock()
	awaitChildren(t, obs, path, 0)
	if w := watchesUnder(t, path, obs); len(w) > 0 {
		t.Fatalf("watches left behind: %v", w)
	}
}

// TestReviewRWWriterOvertakesCurator55Downgrade: Curator 5.5+ (CURATOR-621)
// downgrades by creating a plain EPHEMERAL read node at the writer's
// sequence number (_c_<uuid>-__READ__<writer's seq>), and writes nothing
// into the writer's node. A dsync writer second in line, behind that
// Curator writer, was first at its listing: when the Curator write node
// goes it claims without listing, and holds the write lock beside
// Curator's read hold. (Curator's own writers list again on every event
// and wait.) The Curator 5.5 client is emulated with a plain connection
// doing what its StandardLockInternalsDriver.createsTheLock does; Debian's
// 5.4.0 cannot downgrade this way.
func TestReviewRWWriterOvertakesCurator55Downgrade(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	cur := observer(t, shared.Addr()) // the "Curator 5.5" client
	if _, err := cur.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	const v4a, v4b = "3f2a6c1e-5b7d-4e21-9c3a-1d2e3f4a5b6c", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	wnode, err := cur.Create(path+"/_c_"+v4a+"-__WRIT__", []byte("curator"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	seq := wnode[strings.LastIndex(wnode, "__WRIT__")+len("__WRIT__"):]
	xs := dial(t, []string{shared.Addr()})
	x := dsync.NewRWMutex(xs, path)
	xdone := rvGo(ctx, x.LockContext)
	awaitChildren(t, obs, path, 2)
	xid := sessionID(t, xs)
	awaitWatch(t, shared, wnode, xid)
	// Curator 5.5's write owner takes its read lock, then releases the write lock.
	rnode, err := cur.Create(path+"/_c_"+v4b+"-__READ__"+seq, []byte("curator"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.Delete(wnode, -1); err != nil {
		t.Fatal(err)
	}
	// The dsync writer lists again and follows the read node (had it taken
	// the lock instead, it would never watch it).
	awaitWatch(t, shared, rnode, xid)
	select {
	case r := <-xdone:
		if r.err == nil {
			x.Unlock()
		}
		t.Fatalf("dsync writer returned (err %v) while Curator's downgraded read hold (%s) is held", r.err, rnode)
	default:
	}
	rvWaits(t, xdone, "dsync writer behind Curator's read hold")
	if err := cur.Delete(rnode, -1); err != nil {
		t.Fatal(err)
	}
	rvHeld(t, xdone, "dsync writer")
	x.Unlock()
	awaitChildren(t, obs, path, 0)
}
