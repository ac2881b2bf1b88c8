package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// rwParticipants returns rw's participants, failing the test on error.
func rwParticipants(t testing.TB, rw *dsync.RWMutex) []dsync.Participant {
	t.Helper()
	ps, err := rw.Participants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestRWMutexReadersShareWriterExcludes(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	ra, err := a.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryLockContext with readers in = %v; want ErrWouldBlock", err)
	}
	a.RUnlock()
	b.RUnlock()
	if ra.Err() == nil || rb.Err() == nil {
		t.Fatal("read hold contexts live after RUnlock")
	}
	held, err := w.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryRLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryRLockContext with a writer in = %v; want ErrWouldBlock", err)
	}
	if a.TryRLock() {
		t.Fatal("TryRLock with a writer in = true")
	}
	if w.Token() == 0 {
		t.Fatal("Token of a write hold = 0")
	}
	w.Unlock()
	if held.Err() == nil {
		t.Fatal("write hold context live after Unlock")
	}
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path, 0) // Unlock does not wait for its delete, and a is on another session
	if !a.TryRLock() {
		t.Fatal("TryRLock of a free RWMutex = false")
	}
	a.RUnlock()
	awaitChildren(t, obs, path, 0)
}

// TestRWMutexRLocker checks that RLocker's Lock and Unlock take and give
// back a read hold of rw: a reader of another session shares it, a writer
// is kept out until Unlock.
func TestRWMutexRLocker(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	l := rw.RLocker()
	l.Lock()
	if ps := rwParticipants(t, other); len(ps) != 1 || !ps[0].Reader || ps[0].Waiting {
		t.Fatalf("participants while RLocker holds = %+v; want one reader holding", ps)
	}
	if _, err := other.TryRLockContext(ctx); err != nil {
		t.Fatalf("TryRLockContext beside RLocker's hold = %v; want nil", err)
	}
	other.RUnlock()
	if _, err := other.TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryLockContext while RLocker holds = %v; want ErrWouldBlock", err)
	}
	l.Unlock()
	if _, err := other.LockContext(ctx); err != nil {
		t.Fatalf("LockContext after RLocker's Unlock = %v", err)
	}
	other.Unlock()
}

// TestRWMutexReaderWaitsBehindWriter: a reader that comes while a writer
// waits behind readers waits behind the writer (no writer starvation).
func TestRWMutexReaderWaitsBehindWriter(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	r1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	w := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	r2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := r1.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	wdone := make(chan error, 1)
	go func() {
		_, err := w.LockContext(ctx)
		wdone <- err
	}()
	awaitChildren(t, obs, path, 2)
	if _, err := r2.TryRLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryRLockContext behind a waiting writer = %v; want ErrWouldBlock", err)
	}
	// The Try's node, made before it returned, is deleted without waiting:
	// gone before the count below, which is then of the reader's node.
	awaitChildren(t, obs, path, 2)
	rdone := make(chan error, 1)
	go func() {
		_, err := r2.RLockContext(ctx)
		rdone <- err
	}()
	awaitChildren(t, obs, path, 3)
	ps := rwParticipants(t, r1)
	if got := fmt.Sprint(kinds(ps)); got != "[R W- R-]" {
		t.Fatalf("Participants = %s; want [R W- R-] (kind, - for waiting)", got)
	}
	r1.RUnlock()
	if err := <-wdone; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-rdone:
		t.Fatalf("reader got in while the writer held: %v", err)
	default:
	}
	w.Unlock()
	if err := <-rdone; err != nil {
		t.Fatal(err)
	}
	r2.RUnlock()
	awaitChildren(t, obs, path, 0)
}

// kinds describes participants: R or W, with - when waiting.
func kinds(ps []dsync.Participant) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = "W"
		if p.Reader {
			out[i] = "R"
		}
		if p.Waiting {
			out[i] += "-"
		}
	}
	return out
}

// TestRWMutexHammer: writers are alone, readers are together, across
// sessions and goroutines of one process.
func TestRWMutexHammer(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		readers, writers atomic.Int32
		maxReaders       atomic.Int32
		wg               sync.WaitGroup
		errs             = make(chan error, 64)
	)
	const sessions, goroutines, iter = 3, 3, 15
	for s := range sessions {
		rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		for g := range goroutines {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(s), uint64(g)))
				for range iter {
					if rng.IntN(4) == 0 {
						if _, err := rw.LockContext(ctx); err != nil {
							errs <- err
							return
						}
						if n := writers.Add(1); n != 1 || readers.Load() != 0 {
							errs <- fmt.Errorf("writer in with %d writers, %d readers", n, readers.Load())
						}
						writers.Add(-1)
						rw.Unlock()
						continue
					}
					if _, err := rw.RLockContext(ctx); err != nil {
						errs <- err
						return
					}
					n := readers.Add(1)
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					if writers.Load() != 0 {
						errs <- errors.New("reader in with a writer")
					}
					readers.Add(-1)
					rw.RUnlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	awaitChildren(t, observer(t, shared.Addr()), path, 0)
}

// TestRWMutexReentryAndUpgrade: hold contexts re-enter their own kind; a
// read hold's context never takes the write lock.
func TestRWMutexReentryAndUpgrade(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	rctx, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := rw.RLockContext(rctx)
	if err != nil || again != rctx {
		t.Fatalf("RLockContext(read hold) = %v, %v; want the same hold", again, err)
	}
	if _, err := rw.LockContext(rctx); !errors.Is(err, dsync.ErrUpgrade) {
		t.Fatalf("LockContext(read hold) = %v; want ErrUpgrade", err)
	}
	if _, err := rw.TryLockContext(rctx); !errors.Is(err, dsync.ErrUpgrade) {
		t.Fatalf("TryLockContext(read hold) = %v; want ErrUpgrade", err)
	}
	rw.RUnlock()
	if rctx.Err() != nil {
		t.Fatal("read hold ended after one of two RUnlocks")
	}
	rw.RUnlock()
	if rctx.Err() == nil {
		t.Fatal("read hold live after its last RUnlock")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "RUnlock of unlocked") {
			t.Fatalf("RUnlock of unlocked RWMutex: recovered %v", r)
		}
	}()
	rw.RUnlock()
}

// TestRWMutexDowngrade: the write holder takes the read lock; after Unlock
// of the write lock a writer that queued meanwhile still waits for the
// downgrade's read hold.
func TestRWMutexDowngrade(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wnode := rwParticipants(t, rw)[0]
	wdone := make(chan error, 1)
	go func() {
		_, err := other.LockContext(ctx)
		wdone <- err
	}()
	awaitChildren(t, obs, path, 2)
	waiter := rwParticipants(t, rw)[1]
	awaitWatch(t, shared, wnode.Path, waiter.Session)
	rctx, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	ps := rwParticipants(t, rw)
	if got := fmt.Sprint(kinds(ps)); got != "[W R W-]" {
		t.Fatalf("Participants after downgrade = %s; want [W R W-]", got)
	}
	down := ps[1]
	if down.Sequence != wnode.Sequence {
		t.Fatalf("downgrade's read node has sequence %d; want the writer's %d", down.Sequence, wnode.Sequence)
	}
	rw.Unlock()
	if wctx.Err() == nil || rctx.Err() != nil {
		t.Fatalf("after Unlock: write hold %v, read hold %v; want ended, live", wctx.Err(), rctx.Err())
	}
	// The waiting writer lists again and follows the read node.
	awaitWatch(t, shared, down.Path, waiter.Session)
	select {
	case err := <-wdone:
		t.Fatalf("writer got in while the downgrade's read hold was live: %v", err)
	default:
	}
	rw.RUnlock()
	if err := <-wdone; err != nil {
		t.Fatal(err)
	}
	other.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestRWMutexDowngradeBeforeWatch pins a waiter that claims the lock past a
// downgrade: it listed the queue with the write node first, and its watch
// on that node went out (the request is cut, and sent again after the
// reconnect) only after the holder downgraded, and, in one case, unlocked.
// Either way the waiter must list again and wait for the read node.
func TestRWMutexDowngradeBeforeWatch(t *testing.T) {
	t.Parallel()
	for _, unlock := range []bool{false, true} {
		t.Run(fmt.Sprintf("unlocked=%v", unlock), func(t *testing.T) {
			path := lockPath(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			obs := observer(t, shared.Addr())
			p := zktest.NewProxy(t, shared.Addr())
			rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
			other := dsync.NewRWMutex(dial(t, []string{p.Addr()}), path)
			wctx, err := rw.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wnode := rwParticipants(t, rw)[0]
			f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: wnode.Path}, zktest.Cut)
			defer f.Disarm()
			wdone := make(chan error, 1)
			go func() {
				_, err := other.LockContext(ctx)
				wdone <- err
			}()
			zktest.AwaitStruck(t, f)
			if _, err := rw.RLockContext(wctx); err != nil {
				t.Fatal(err)
			}
			down := rwParticipants(t, rw)[1]
			waiter := rwParticipants(t, rw)[2]
			if unlock {
				rw.Unlock()
			}
			awaitWatch(t, shared, down.Path, waiter.Session)
			select {
			case err := <-wdone:
				t.Fatalf("writer got in while the downgrade's read hold was live: %v", err)
			default:
			}
			if !unlock {
				rw.Unlock()
			}
			rw.RUnlock()
			if err := <-wdone; err != nil {
				t.Fatal(err)
			}
			other.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestMultiLockRWMutexSides: a MultiLock over one RWMutex's write side and
// another's read side holds the first alone and shares the second with
// other readers.
func TestMultiLockRWMutexSides(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dial(t, []string{shared.Addr()})
	a, b := dsync.NewRWMutex(s, path+"/a"), dsync.NewRWMutex(s, path+"/b")
	ml := dsync.NewMultiLock(b.RLocker(), a)
	held, err := ml.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := dial(t, []string{shared.Addr()})
	oa, ob := dsync.NewRWMutex(other, path+"/a"), dsync.NewRWMutex(other, path+"/b")
	if oa.TryRLock() {
		t.Fatal("TryRLock of the write side a MultiLock holds = true")
	}
	if ob.TryLock() {
		t.Fatal("TryLock of the read side a MultiLock holds = true")
	}
	if !ob.TryRLock() {
		t.Fatal("TryRLock of the read side a MultiLock holds = false; readers share")
	}
	ob.RUnlock()
	if _, err := dsync.NewMultiLock(a, a.RLocker()).LockContext(ctx); !errors.Is(err, dsync.ErrBadMember) {
		t.Fatalf("MultiLock of both sides of one RWMutex = %v; want ErrBadMember", err)
	}
	ml.Unlock()
	if held.Err() == nil {
		t.Fatal("MultiLock hold context live after Unlock")
	}
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path+"/a", 0) // the release reaches the other Session
	awaitChildren(t, obs, path+"/b", 0)
	if !oa.TryLock() || !ob.TryLock() {
		t.Fatal("TryLock after the MultiLock's Unlock = false")
	}
	oa.Unlock()
	ob.Unlock()
}
