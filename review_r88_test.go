package dsync_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 88: Value.Watch keeping the shared watch of a loop whose ctx
// ended; RWMutex.Token and Revoked falling back to a MultiLock's read hold.

// TestReviewR88WatchKeptWatchFiredNextLoopReads: loop A's ctx ends as it
// waits, so the shared read and its watch stay; the node then changes and
// the watch fires with no loop waiting on it. The next loop must not take
// the kept read for current: its first yield is the new value, read again
// with one new watch. Another Count on the same path and Session (a watch
// channel of its own on the same node) yielding the write proves that
// go-zookeeper has sent and closed every watch channel of that event.
func TestReviewR88WatchKeptWatchFiredNextLoopReads(t *testing.T) {
	t.Parallel()
	path := valuePath(t) + "/count"
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{0, 0, 0, 1})
	s := dial(t, []string{shared.Addr()})
	c, d := dsync.NewCount(s, path, 1), dsync.NewCount(s, path, 1)
	a, aCancel, aEnded := r86Loop(t, c)
	r86Want(t, "A", a, 1, 0)
	aCancel()
	reviewRecv(t, "A's end", aEnded)
	dSeen, _, _ := r86Loop(t, d)
	r86Want(t, "D (another Count)", dSeen, 1, 0)
	r86Then(t, obs, path, 2, 0, dSeen)
	b, _, _ := r86Loop(t, c)
	r86Want(t, "B (after the kept watch fired)", b, 2, 1)
	if n := clientWatches(t, connOf(t, s), path); n != 2 {
		t.Errorf("with B and D watching, go-zookeeper holds %d watches on the node; want 2 (one per Count)", n)
	}
	r86Then(t, obs, path, 3, 1, b, dSeen)
}

// TestReviewR88WatchKeptWatchAcrossExpiry: loop A's ctx ends as it waits,
// keeping the shared read; the session is then lost (the connection
// black-holed past the session timeout) and the node written meanwhile. A
// loop started on the next session does not take the kept read (another
// session's), yields the write, and sets one watch there.
func TestReviewR88WatchKeptWatchAcrossExpiry(t *testing.T) {
	t.Parallel()
	p, s, sub, c, obs, path := r86Short(t)
	a, aCancel, aEnded := r86Loop(t, c)
	r86Want(t, "A", a, 1, 0)
	aCancel()
	reviewRecv(t, "A's end", aEnded)
	p.BlackHole()
	awaitState(t, sub, zkconn.StateLost)
	if _, err := obs.Set(path, []byte{0, 0, 0, 2}, 0); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	awaitState(t, sub, zkconn.StateConnected)
	b, _, _ := r86Loop(t, c)
	r86Want(t, "B (next session)", b, 2, 1)
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("go-zookeeper holds %d watches on the node in the new session; want 1", n)
	}
	r86Then(t, obs, path, 3, 1, b)
}

// TestReviewR88WatchChurnNoMissedChange: long Watch loops share the watch
// while short loops start, yield once and end as they wait (keeping the
// shared read, and testing it for a fired watch in held, which may take
// the event out of the channel a long loop waits on), and a writer writes
// 150 times. No loop yields a version older than one it yielded, every long
// loop yields the last write, and afterwards one watch is left on the node
// for the long loops (a final write reaching each of them).
func TestReviewR88WatchChurnNoMissedChange(t *testing.T) {
	t.Parallel()
	const (
		longs  = 3
		writes = 150
	)
	path := valuePath(t) + "/count"
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{0, 0, 0, 1})
	s := dial(t, []string{shared.Addr()})
	c := dsync.NewCount(s, path, 1)
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()

	type report struct {
		who string
		err error
	}
	errs := make(chan report, 64)
	var wg sync.WaitGroup
	last := make([]chan int32, longs) // each long loop's latest version, newest only
	for i := range longs {
		last[i] = make(chan int32, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := int32(-1)
			for v, err := range c.Watch(ctx) {
				if err != nil {
					errs <- report{fmt.Sprint("long ", i), err}
					return
				}
				if v.Version < prev || v.Value != v.Version+1 {
					errs <- report{fmt.Sprint("long ", i), fmt.Errorf("yielded %+v after version %d", v, prev)}
					return
				}
				prev = v.Version
				select {
				case <-last[i]:
				default:
				}
				last[i] <- v.Version
			}
		}()
	}
	churnCtx, stopChurn := context.WithCancel(ctx)
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for churnCtx.Err() == nil {
			lctx, lcancel := context.WithCancel(churnCtx)
			for v, err := range c.Watch(lctx) {
				if err != nil && churnCtx.Err() == nil {
					errs <- report{"short", err}
				} else if v.Value != v.Version+1 {
					errs <- report{"short", fmt.Errorf("yielded %+v", v)}
				}
				lcancel() // the loop goes on to wait, and its ctx is done
			}
			lcancel()
		}
	}()
	// Wait for every long loop's first yield before writing.
	for i := range longs {
		if v := reviewRecv(t, fmt.Sprint("long ", i, "'s first yield"), last[i]); v != 0 {
			t.Fatalf("long %d's first version %d; want 0", i, v)
		}
	}
	for ver := int32(0); ver < writes; ver++ {
		if _, err := obs.Set(path, []byte{byte((ver + 2) >> 24), byte((ver + 2) >> 16), byte((ver + 2) >> 8), byte(ver + 2)}, ver); err != nil {
			t.Fatal(err)
		}
	}
	want := int32(writes)
	for i := range longs {
		deadline := time.After(reviewBound)
	wait:
		for {
			select {
			case v := <-last[i]:
				if v == want {
					break wait
				}
			case r := <-errs:
				t.Fatalf("%s: %v", r.who, r.err)
			case <-deadline:
				t.Fatalf("long %d never yielded version %d: a change missed", i, want)
			}
		}
	}
	stopChurn()
	reviewRecv(t, "the churn's end", churned)
	// A final write: each long loop yields it, and one watch is left.
	if _, err := obs.Set(path, []byte{0, 0, 0, byte(writes + 2)}, writes); err != nil {
		t.Fatal(err)
	}
	for i := range longs {
		if v := reviewRecv(t, fmt.Sprint("long ", i, "'s final yield"), last[i]); v != writes+1 {
			t.Fatalf("long %d yielded version %d; want %d", i, v, writes+1)
		}
	}
	select {
	case r := <-errs:
		t.Fatalf("%s: %v", r.who, r.err)
	default:
	}
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("after the churn and a final write, go-zookeeper holds %d watches on the node; want 1", n)
	}
	cancel()
	wg.Wait()
}

// TestReviewR88WeightedAndWatchShareCount: a semaphore following a Count's
// maximum (an acquirer waiting for it to grow) and a Watch loop of that
// Count both see the Count grow: the acquirer holds, the loop yields it.
// Weighted keeps its own read of the Count (not the Watch loops'): at most
// two watches on the node, one each, after the change too.
func TestReviewR88WeightedAndWatchShareCount(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	cnt := dsync.NewCount(s, path+"/max", 1)
	sem := dsync.NewWeightedCount(s, path+"/sem", cnt)
	if err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	defer sem.Release(1)
	seen, _, _ := r86Loop(t, cnt)
	r86Want(t, "the Watch loop", seen, 1, 0)
	res := make(chan error, 1)
	go func() { res <- sem.Acquire(ctx, 1) }()
	// The acquirer waits on the Count's watch (its own read) and a listing.
	conn := connOf(t, s)
	deadline := time.After(reviewBound)
	for clientWatches(t, conn, path+"/max") < 2 {
		select {
		case err := <-res:
			t.Fatalf("Acquire returned %v at maximum 1 with 1 held; want it waiting", err)
		case <-deadline:
			t.Fatal("the acquirer never watched the Count")
		case <-time.After(2 * time.Millisecond):
		}
	}
	if _, err := obs.Set(path+"/max", []byte{0, 0, 0, 2}, 0); err != nil {
		t.Fatal(err)
	}
	if err := reviewRecv(t, "Acquire after the maximum grew", res); err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	defer sem.Release(1)
	r86Want(t, "the Watch loop", seen, 2, 1)
	if n := clientWatches(t, conn, path+"/max"); n > 2 {
		t.Errorf("go-zookeeper holds %d watches on the Count; want at most 2", n)
	}
}

// TestReviewR88RWTokenPlainBeforeMember: RWMutex.Token and Revoked prefer a
// plain read hold (the one RUnlock ends) to a MultiLock's through RLocker,
// fall back to the MultiLock's once no plain one is left, and give 0 and
// nil once that ends too; the write side's comes first when held.
func TestReviewR88RWTokenPlainBeforeMember(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path+"/rw", dsync.Revocable())
	ml := dsync.NewMultiLock(rw.RLocker(), dsync.NewMutex(s, path+"/m"))
	if _, err := ml.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	memberNode := path + "/rw/" + children(t, obs, path+"/rw")[0]
	memberToken := mustCzxid(t, obs, memberNode)
	if got := rw.Token(); got != memberToken {
		t.Fatalf("Token with the MultiLock's read hold only = %d; want %d", got, memberToken)
	}
	memberRevoked := rw.Revoked()
	held, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := dsync.Token(held); got == memberToken || rw.Token() != got {
		t.Fatalf("Token with a plain read hold too = %d; want the plain hold's %d", rw.Token(), got)
	}
	if rw.Revoked() == memberRevoked {
		t.Fatal("Revoked with a plain read hold too is the MultiLock's")
	}
	rw.RUnlock()
	if got := rw.Token(); got != memberToken {
		t.Fatalf("Token after the plain RUnlock = %d; want the MultiLock's %d", got, memberToken)
	}
	if rw.Revoked() != memberRevoked {
		t.Fatal("Revoked after the plain RUnlock is not the MultiLock's")
	}
	ml.Unlock()
	if got, ch := rw.Token(), rw.Revoked(); got != 0 || ch != nil {
		t.Fatalf("after the MultiLock's Unlock, Token = %d, Revoked = %v; want 0, nil", got, ch)
	}
	wheld, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rw.Token(); got != dsync.Token(wheld) || got == 0 {
		t.Fatalf("Token of the write hold = %d; want %d", got, dsync.Token(wheld))
	}
	rw.Unlock()
}

// TestReviewR88RWTokenRacesMultiLock: Token and Revoked run while two
// MultiLocks with an RWMutex's RLocker lock and unlock, plain readers come
// and go, and a writer of the same RWMutex takes turns: under -race, no data
// race; no Token seen is the token of another member's node, and no Revoked
// channel seen closes (no revocation was asked; a hold's channel never
// closes when the hold ends).
func TestReviewR88RWTokenRacesMultiLock(t *testing.T) {
	t.Parallel()
	const cycles = 20 // of each MultiLock, while Token and Revoked run
	ctx, path, _ := r45Start(t)
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path+"/rw", dsync.Revocable())
	other := dsync.NewMutex(s, path+"/other")
	mls := []*dsync.MultiLock{dsync.NewMultiLock(rw.RLocker(), other), dsync.NewMultiLock(rw.RLocker())}
	var (
		mu      sync.Mutex
		foreign = map[int64]bool{} // other's tokens
		done    [2]atomic.Int32    // each MultiLock's cycles
	)
	workCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for workCtx.Err() == nil {
				if err := f(); err != nil && workCtx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i, ml := range mls {
		run(func() error {
			if _, err := ml.LockContext(workCtx); err != nil {
				return err
			}
			if tok := other.Token(); tok != 0 {
				mu.Lock()
				foreign[tok] = true
				mu.Unlock()
			}
			ml.Unlock()
			done[i].Add(1)
			return nil
		})
	}
	run(func() error {
		if _, err := rw.RLockContext(workCtx); err != nil {
			return err
		}
		rw.RUnlock()
		return nil
	})
	run(func() error {
		if _, err := rw.LockContext(workCtx); err != nil {
			return err
		}
		rw.Unlock()
		return nil
	})
	var (
		seen    []int64
		revoked []<-chan struct{}
	)
	deadline := time.After(reviewBound)
	for done[0].Load() < cycles || done[1].Load() < cycles {
		if tok := rw.Token(); tok != 0 {
			seen = append(seen, tok)
		}
		if ch := rw.Revoked(); ch != nil && len(revoked) < 1000 {
			revoked = append(revoked, ch)
		}
		select {
		case err := <-errs:
			stop()
			wg.Wait()
			t.Fatal(err)
		case <-deadline:
			stop()
			wg.Wait()
			t.Fatalf("the MultiLocks did %d and %d cycles within %v; want %d each", done[0].Load(), done[1].Load(), reviewBound, cycles)
		default:
		}
	}
	stop()
	wg.Wait()
	for _, ch := range revoked {
		select {
		case <-ch:
			t.Fatal("a Revoked channel closed with no revocation asked")
		default:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tok := range seen {
		if foreign[tok] {
			t.Fatalf("RWMutex.Token gave %d, the token of another member's node", tok)
		}
	}
	if len(seen) == 0 || len(revoked) == 0 {
		t.Errorf("Token gave 0 and Revoked nil throughout (%d, %d seen): the holds were never seen", len(seen), len(revoked))
	}
}

// TestReviewR88WatchStaleLoopClobbersSharedWatch: loops whose body is still
// running when the session is lost, and whose Wait then takes the closed
// watch channel (a zero event, nil error) rather than the loss, read on the
// lost session's Handle; that read fails, and readWatched stores its empty
// result over the watch another loop had set on the next session, so the
// next read there sets another. With the shared watch kept, one getData is
// sent on the new session for the loops that wake after a write; each
// clobber costs one more, and go-zookeeper holds one more watch channel
// until the node next changes.
func TestReviewR88WatchStaleLoopClobbersSharedWatch(t *testing.T) {
	t.Parallel()
	const slow = 8
	p, s, sub, c, obs, path := r86Short(t)
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	release := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ys := make([]chan r86Yield, slow)
	for i := range ys {
		ys[i] = make(chan r86Yield, 8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for v, err := range c.Watch(ctx) {
				ys[i] <- r86Yield{v, err}
				if first {
					first = false
					select { // the body runs on across the loss
					case <-release:
					case <-ctx.Done():
					}
				}
			}
		}()
		r86Want(t, fmt.Sprint("slow loop ", i), ys[i], 1, 0)
	}
	a, _, _ := r86Loop(t, c)
	r86Want(t, "A", a, 1, 0)
	p.BlackHole()
	awaitState(t, sub, zkconn.StateLost)
	aRead := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path}, zktest.Pass)
	p.Heal()
	r38Struck(t, aRead, (<-chan r86Yield)(nil)) // A's read on the new session
	before := p.Requests()
	close(release)
	// Every slow loop parked in Wait on the new session's watch (a Wait
	// on the lost session's returns at once): all their reads are done.
	blockedIn(t, "zkconn.Handle.Wait", "TestReviewR88WatchStaleLoopClobbersSharedWatch.func", slow)
	if n := p.Requests() - before; n != 0 {
		t.Errorf("%d requests sent on the new session by loops with its watch already set; want 0", n)
	}
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("with %d loops waiting on the new session, go-zookeeper holds %d watches on the node; want 1", slow+1, n)
	}
	before = p.Requests()
	if _, err := obs.Set(path, []byte{0, 0, 0, 2}, 0); err != nil {
		t.Fatal(err)
	}
	r86Want(t, "A", a, 2, 1)
	for i := range ys {
		r86Want(t, fmt.Sprint("slow loop ", i), ys[i], 2, 1)
	}
	if n := p.Requests() - before; n != 1 {
		t.Errorf("%d requests sent on the new session for %d loops to read one write; want 1 (one shared read and watch)", n, slow+1)
	}
	r86Then(t, obs, path, 3, 1, append([]<-chan r86Yield{a}, func() (l []<-chan r86Yield) {
		for _, y := range ys {
			l = append(l, y)
		}
		return l
	}()...)...)
	if n := clientWatches(t, connOf(t, s), path); n != 1 {
		t.Errorf("after another write, go-zookeeper holds %d watches on the node; want 1", n)
	}
}
