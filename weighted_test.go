package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"golang.org/x/sync/semaphore"
)

// x/sync's local semaphore is a dsync.Semaphore unchanged.
var _ dsync.Semaphore = (*semaphore.Weighted)(nil)

// bounded is a critical section that records the highest concurrency seen.
type bounded struct {
	cur, peak atomic.Int64
}

func (b *bounded) run(n int64) {
	c := b.cur.Add(n)
	for {
		p := b.peak.Load()
		if c <= p || b.peak.CompareAndSwap(p, c) {
			break
		}
	}
	time.Sleep(time.Millisecond)
	b.cur.Add(-n)
}

func TestWeightedBound(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{1, 2} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			const sessions, cycles, max = 12, 8, 4
			path := lockPath(t)
			var b bounded
			var wg sync.WaitGroup
			errs := make(chan error, sessions)
			for i := 0; i < sessions; i++ {
				w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, max)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < cycles; j++ {
						if err := w.Acquire(context.Background(), n); err != nil {
							errs <- err
							return
						}
						b.run(n)
						w.Release(n)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if p := b.peak.Load(); p > max || p < n {
				t.Fatalf("peak concurrency %d; want between %d and %d", p, n, max)
			}
			assertEmpty(t, path)
		})
	}
}

// assertEmpty waits until path has no lease and no internal lock node
// (releases and undoing go out in the background), and fails if that does
// not happen.
func assertEmpty(t *testing.T, path string) {
	t.Helper()
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
}

// TestWeightedNoPartialDeadlock: two acquirers of 2 leases out of 3 could
// each get one lease and wait forever for a second with Curator's
// one-by-one acquire(qty). All-or-nothing acquisition cannot.
func TestWeightedNoPartialDeadlock(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b bounded
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				if err := w.Acquire(ctx, 2); err != nil {
					errs <- err
					return
				}
				b.run(2)
				w.Release(2)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("acquire: %v (deadlocked?)", err)
	}
	if p := b.peak.Load(); p != 2 {
		t.Fatalf("peak %d; want 2 (two acquirers of 2 never fit in 3 together)", p)
	}
}

func TestWeightedBadInput(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	ctx := context.Background()
	w := dsync.NewWeighted(s, lockPath(t), 3)
	for _, n := range []int64{0, -1, 4} {
		if err := w.Acquire(ctx, n); !errors.Is(err, dsync.ErrWeight) {
			t.Errorf("Acquire(%d) = %v; want ErrWeight", n, err)
		}
		if w.TryAcquire(n) {
			t.Errorf("TryAcquire(%d) succeeded", n)
		}
	}
	if err := dsync.NewWeighted(s, lockPath(t), 0).Acquire(ctx, 1); !errors.Is(err, dsync.ErrWeight) {
		t.Errorf("Acquire on a semaphore of 0 = %v; want ErrWeight", err)
	}
	if err := dsync.NewWeighted(s, "bad", 1).Acquire(ctx, 1); !errors.Is(err, dsync.ErrBadPath) {
		t.Errorf("Acquire on a bad path = %v; want ErrBadPath", err)
	}
	if err := dsync.NewWeighted(nil, "/x", 1).Acquire(ctx, 1); !errors.Is(err, dsync.ErrNilSession) {
		t.Errorf("Acquire with a nil session = %v; want ErrNilSession", err)
	}
	if _, err := dsync.NewSemaphoreMutex(s, "/a/").LockContext(ctx); !errors.Is(err, dsync.ErrBadPath) {
		t.Errorf("SemaphoreMutex on a bad path = %v; want ErrBadPath", err)
	}
	if err := w.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	expectPanic(t, "dsync: released more than held", func() { w.Release(3) })
	w.Release(2)
	expectPanic(t, "dsync: released more than held", func() { w.Release(1) })
	assertEmpty(t, lockPath(t))
}

func TestWeightedTryAcquire(t *testing.T) {
	path := lockPath(t)
	a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	b := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	if !a.TryAcquire(2) {
		t.Fatal("TryAcquire(2) of 3 free failed")
	}
	// a's internal lock goes without waiting for the network: b sees it
	// gone once its delete reaches the server.
	awaitChildren(t, observer(t, shared.Addr()), path+"/locks", 0)
	if b.TryAcquire(2) {
		t.Fatal("TryAcquire(2) with 1 free succeeded")
	}
	if _, err := b.TryAcquireLeases(context.Background(), 2); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryAcquireLeases(2) with 1 free = %v; want ErrWouldBlock", err)
	}
	ls, err := b.TryAcquireLeases(context.Background(), 1)
	if err != nil || len(ls) != 1 || ls[0].Context().Err() != nil {
		t.Fatalf("TryAcquireLeases(1) with 1 free = %v, %v", ls, err)
	}
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire(1) with none free succeeded")
	}
	a.Release(2)
	ls[0].Release()
	assertEmpty(t, path)
}

// TestWeightedCancelLeavesNothing cancels acquisitions at every stage: before
// anything is sent, while queued for the internal lock, and while holding it
// waiting for leases.
func TestWeightedCancelLeavesNothing(t *testing.T) {
	path := lockPath(t)
	holder := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	if err := holder.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	waiter := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	queued := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waiter.Acquire(done, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(canceled) = %v", err)
	}
	for i := 0; i < 30; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(i%10)*300*time.Microsecond, cancel)
		if err := waiter.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire canceled at stage %d = %v", i, err)
		}
		cancel()
	}
	// A canceled Acquire's deletes go out without waiting for their replies:
	// let them be applied before counting the next Acquire's lease.
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path+"/leases", 2)
	awaitChildren(t, obs, path+"/locks", 0)
	// One waits holding the internal lock, one queues behind it.
	wctx, wcancel := context.WithCancel(context.Background())
	qctx, qcancel := context.WithCancel(context.Background())
	werr, qerr := make(chan error, 1), make(chan error, 1)
	go func() { werr <- waiter.Acquire(wctx, 1) }()
	awaitChildren(t, obs, path+"/leases", 3)
	ps, err := holder.Participants(context.Background())
	if err != nil || len(ps) != 3 || ps[0].Waiting || ps[1].Waiting || !ps[2].Waiting {
		t.Fatalf("Participants = %+v, %v; want 2 held and 1 waiting", ps, err)
	}
	go func() { qerr <- queued.Acquire(qctx, 1) }()
	awaitChildren(t, obs, path+"/locks", 2)
	qcancel()
	if err := <-qerr; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued Acquire = %v", err)
	}
	wcancel()
	if err := <-werr; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Acquire = %v", err)
	}
	awaitChildren(t, obs, path+"/leases", 2) // the holder's only
	awaitChildren(t, obs, path+"/locks", 0)
	holder.Release(2)
	assertEmpty(t, path)
}

func TestWeightedLeases(t *testing.T) {
	path := lockPath(t)
	w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3, dsync.WithData([]byte("me")))
	ls, err := w.AcquireLeases(context.Background(), 2)
	if err != nil || len(ls) != 2 {
		t.Fatalf("AcquireLeases = %v, %v", ls, err)
	}
	if _, rest, ok := zkconn.ParseProtected(ls[0].Node()); !ok || !strings.HasPrefix(rest, "lease-") || string(ls[0].Data()) != "me" {
		t.Fatalf("lease node %q, data %q; want _c_<uuid>-lease-<seq> and \"me\"", ls[0].Node(), ls[0].Data())
	}
	ps, err := w.Participants(context.Background())
	if err != nil || len(ps) != 2 || ps[0].Path != ls[0].Path() || ps[1].Path != ls[1].Path() {
		t.Fatalf("Participants = %+v, %v; want the two leases", ps, err)
	}
	if ls[0].Token() >= ls[1].Token() || ls[0].Token() == 0 {
		t.Fatalf("tokens %d, %d; want increasing", ls[0].Token(), ls[1].Token())
	}
	ls[0].Release()
	if !errors.Is(context.Cause(ls[0].Context()), context.Canceled) || ls[1].Context().Err() != nil {
		t.Fatal("releasing one lease ended the wrong context")
	}
	expectPanic(t, "dsync: released more than held", ls[0].Release)
	ls[1].Release()
	assertEmpty(t, path)
}

// TestWeightedLeaseLoss: a lease holder cut off from ZooKeeper sees its
// lease context canceled before the lease can be taken elsewhere.
func TestWeightedLeaseLoss(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second)), path, 1)
	ls, err := w.AcquireLeases(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	other := dsync.NewWeighted(dial(t, []string{srv.Addr()}), path, 1)
	got := make(chan error, 1)
	go func() {
		err := other.Acquire(context.Background(), 1)
		if err == nil && ls[0].Context().Err() == nil {
			err = errors.New("lease taken while the old holder's context was alive")
		}
		got <- err
	}()
	p.BlackHole()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ls[0].Context()), dsync.ErrLockLost) {
		t.Fatalf("cause = %v; want ErrLockLost", context.Cause(ls[0].Context()))
	}
	ls[0].Release()
	other.Release(1)
}

// TestWeightedCount: the maximum follows a shared count live.
func TestWeightedCount(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dial(t, []string{shared.Addr()})
	count := dsync.NewCount(s, path+"-max", 1)
	if err := count.Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	a := dsync.NewWeightedCount(s, path, count)
	b := dsync.NewWeightedCount(dial(t, []string{shared.Addr()}), path, dsync.NewCount(s, path+"-max", 1))
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, 1) }()
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path+"/leases", 2)  // b waits, its lease node counted
	if err := count.Set(ctx, 2); err != nil { // raising wakes it
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := count.Set(ctx, 1); err != nil { // lowering: held leases stay
		t.Fatal(err)
	}
	if a.TryAcquire(1) {
		t.Fatal("TryAcquire succeeded above a lowered maximum")
	}
	if _, err := a.TryAcquireLeases(ctx, 2); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryAcquireLeases(2) of a count of 1 = %v; want ErrWouldBlock", err)
	}
	a.Release(1)
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire succeeded with the lowered maximum reached")
	}
	b.Release(1)
	// Release does not wait for its delete, and a is on another session:
	// wait until the server has applied it (and a's own). So must b's
	// failed TryAcquire's internal lock node go, deleted without waiting
	// and not ordered with Release's delete: a's TryAcquire would fail
	// behind it.
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
	if !a.TryAcquire(1) {
		t.Fatal("TryAcquire failed with nothing held")
	}
	a.Release(1)
	assertEmpty(t, path)
}

func TestSemaphoreMutex(t *testing.T) {
	path := lockPath(t)
	var lockers []sync.Locker
	for i := 0; i < 4; i++ {
		lockers = append(lockers, dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path))
	}
	contend(t, lockers, 10)

	m := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path)
	held, err := m.LockContext(context.Background())
	if err != nil || m.Token() == 0 {
		t.Fatalf("LockContext = %v (token %d)", err, m.Token())
	}
	short, cancel := context.WithTimeout(held, 100*time.Millisecond)
	defer cancel()
	if _, err := m.LockContext(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("re-entry = %v; want DeadlineExceeded (never re-entrant)", err)
	}
	if m.TryLock() {
		t.Fatal("TryLock succeeded while held")
	}
	m.Unlock()
	expectPanic(t, "dsync: unlock of unlocked mutex", m.Unlock)
	assertEmpty(t, path)
}

// TestInteropWeighted: Java InterProcessSemaphoreV2 and dsync.Weighted share
// one semaphore of 3; together they never exceed it.
func TestInteropWeighted(t *testing.T) {
	t.Parallel()
	const max, iter = 3, 30
	path := lockPath(t)
	var goers []contender
	for i := 0; i < 3; i++ {
		w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, max)
		goers = append(goers, contender{
			acquire: func(ctx context.Context) error { return w.Acquire(ctx, 1) },
			release: func() { w.Release(1) },
		})
	}
	logName := mixedRun(t, curator.Semaphore, path, iter, 3, []string{strconv.Itoa(max)}, goers)
	data, err := os.ReadFile(logName)
	if err != nil {
		t.Fatal(err)
	}
	inside := map[string]bool{}
	peak, sections := 0, 0
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		op, who, _ := strings.Cut(line, " ")
		switch {
		case op == "enter" && !inside[who]:
			inside[who] = true
			peak = max2(peak, len(inside))
		case op == "exit" && inside[who]:
			delete(inside, who)
			sections++
		default:
			t.Fatalf("log line %d: %q out of place", i+1, line)
		}
	}
	if peak > max || sections != 6*iter {
		t.Fatalf("peak %d over %d sections; want <= %d over %d", peak, sections, max, 6*iter)
	}
	assertEmpty(t, path)
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// TestInteropSemaphoreMutex: Java InterProcessSemaphoreMutex and
// dsync.SemaphoreMutex exclude each other, both ways.
func TestInteropSemaphoreMutex(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path)
	jh, err := java.Hold(ctx, curator.SemaphoreMutex, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer jh.Kill()
	<-jh.Acquired()
	if m.TryLock() {
		t.Fatal("dsync TryLock succeeded while Curator holds")
	}
	got := make(chan error, 1)
	go func() { _, err := m.LockContext(ctx); got <- err }()
	awaitChildren(t, observer(t, shared.Addr()), path+"/leases", 2)
	if err := jh.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	jw, err := java.Hold(ctx, curator.SemaphoreMutex, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer jw.Kill()
	awaitChildren(t, observer(t, shared.Addr()), path+"/leases", 2)
	ps, err := m.Participants(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("Participants = %+v, %v; want dsync's lease and Curator's waiting one", ps, err)
	}
	select {
	case <-jw.Acquired():
		t.Fatal("Curator acquired while dsync holds")
	default:
	}
	m.Unlock()
	select {
	case <-jw.Acquired():
	case <-ctx.Done():
		t.Fatal("Curator never acquired")
	}
	if err := jw.Release(); err != nil {
		t.Fatal(err)
	}
}
