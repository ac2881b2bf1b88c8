package dsync_test

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// critical is a critical section that notices overlap: a lost update on a
// read-modify-write counter, and a second entrant while one is inside.
type critical struct {
	inside  atomic.Int32
	counter atomic.Int64
	overlap atomic.Int32
}

func (c *critical) run() {
	if !c.inside.CompareAndSwap(0, 1) {
		c.overlap.Add(1)
	}
	v := c.counter.Load()
	time.Sleep(time.Duration(rand.Intn(200)) * time.Microsecond)
	c.counter.Store(v + 1)
	c.inside.Store(0)
}

func (c *critical) check(t *testing.T, want int64) {
	t.Helper()
	if got := c.counter.Load(); got != want || c.overlap.Load() != 0 {
		t.Fatalf("counter = %d, overlaps = %d; want %d, 0", got, c.overlap.Load(), want)
	}
}

// contend runs cycles of Lock, c.run, Unlock on every locker at once, and
// checks that no two critical sections overlapped.
func contend(t *testing.T, lockers []sync.Locker, cycles int) {
	t.Helper()
	var c critical
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				l.Lock()
				c.run()
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	c.check(t, int64(len(lockers)*cycles))
}

func TestMutexExclusionAcrossSessions(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	var lockers []sync.Locker
	for i := 0; i < 16; i++ {
		lockers = append(lockers, dsync.NewMutex(dial(t, []string{shared.Addr()}), path))
	}
	contend(t, lockers, 15)
	awaitChildren(t, observer(t, shared.Addr()), path, 0)
}

func TestMutexExclusionAcrossGoroutines(t *testing.T) {
	t.Parallel()
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), lockPath(t))
	lockers := make([]sync.Locker, 16)
	for i := range lockers {
		lockers[i] = m
	}
	contend(t, lockers, 15)
}

func TestMutexFIFO(t *testing.T) {
	const waiters = 6
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	holder.Lock()
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Lock()
			order <- i
			m.Unlock()
		}()
		awaitChildren(t, obs, path, i+2) // waiter i is in line before i+1 starts
	}
	holder.Unlock()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d acquired in place %d", got, want)
		}
		want++
	}
}

func TestMutexBadInput(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	for _, path := range []string{"", "relative", "/trailing/", "/a//b", "/a/../b", "/nul\x00", "/", "/" + strings.Repeat("a", 4096)} {
		m := dsync.NewMutex(s, path)
		if _, err := m.LockContext(context.Background()); !errors.Is(err, dsync.ErrBadPath) {
			t.Errorf("LockContext on %q = %v; want ErrBadPath", path, err)
		}
		if m.TryLock() {
			t.Errorf("TryLock on %q succeeded", path)
		}
		if _, err := m.Participants(context.Background()); !errors.Is(err, dsync.ErrBadPath) {
			t.Errorf("Participants on %q = %v; want ErrBadPath", path, err)
		}
	}
	m := dsync.NewMutex(nil, "/x")
	if _, err := m.LockContext(context.Background()); !errors.Is(err, dsync.ErrNilSession) {
		t.Errorf("LockContext with nil session = %v; want ErrNilSession", err)
	}
	expectPanic(t, "dsync: Lock", func() { dsync.NewMutex(nil, "/x").Lock() })
	expectPanic(t, "dsync: unknown LossPolicy", func() { dsync.WithLossPolicy(7) })
	for name, f := range map[string]func(){
		"NewMutex":          func() { dsync.NewMutex(s, "/x", dsync.Revocable(), nil) },
		"NewRWMutex":        func() { dsync.NewRWMutex(s, "/x", nil) },
		"NewWeighted":       func() { dsync.NewWeighted(s, "/x", 2, nil) },
		"NewWeightedCount":  func() { dsync.NewWeightedCount(s, "/x", dsync.NewCount(s, "/x-count", 2), nil) },
		"NewSemaphoreMutex": func() { dsync.NewSemaphoreMutex(s, "/x", nil) },
		"NewElection":       func() { dsync.NewElection(s, "/x", nil) },
		"NewOnce":           func() { dsync.NewOnce(s, "/x", nil) },
	} {
		t.Run(name, func(t *testing.T) { expectPanic(t, "dsync: nil Option", f) })
	}

	closed := dial(t, []string{shared.Addr()})
	closed.Close()
	cm := dsync.NewMutex(closed, lockPath(t))
	if _, err := cm.LockContext(context.Background()); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("LockContext on a closed Session = %v; want ErrClosed", err)
	}
	expectPanic(t, "dsync: Lock", cm.Lock)
}

func expectPanic(t *testing.T, prefix string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if s, _ := r.(string); !strings.HasPrefix(s, prefix) {
			t.Errorf("panic %v; want one starting %q", r, prefix)
		}
	}()
	f()
}

func TestMutexReentrancy(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	path := lockPath(t)
	m := dsync.NewMutex(s, path)
	other := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	obs := observer(t, shared.Addr())
	ctx := context.Background()

	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token := m.Token()
	derived, cancel := context.WithCancel(held)
	defer cancel()
	for depth := 2; depth <= 3; depth++ {
		again, err := m.LockContext(derived)
		if err != nil || again != held {
			t.Fatalf("re-entry %d = %v, %v; want the same hold context", depth, again, err)
		}
	}
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Fatalf("children after re-entry: %v; want one node", kids)
	}
	for left := 2; left >= 1; left-- {
		m.Unlock()
		if held.Err() != nil || other.TryLock() || m.Token() != token {
			t.Fatalf("released with %d levels left", left)
		}
	}
	m.Unlock()
	if !errors.Is(context.Cause(held), context.Canceled) || m.Token() != 0 {
		t.Fatalf("after the last Unlock: cause %v, token %d; want context.Canceled, 0", context.Cause(held), m.Token())
	}
	if _, err := m.LockContext(held); !errors.Is(err, context.Canceled) {
		t.Fatalf("re-entering an ended hold = %v; want context.Canceled", err)
	}
	expectPanic(t, "dsync: unlock of unlocked mutex", m.Unlock)
	awaitChildren(t, obs, path, 0) // Unlock does not wait for its delete, and other is on another session
	if !other.TryLock() {
		t.Fatal("TryLock after full release failed")
	}
	other.Unlock()
	awaitChildren(t, obs, path, 0)
}

func TestMutexHoldContextKeepsValues(t *testing.T) {
	type key struct{}
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), lockPath(t))
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Minute)
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // bounds the wait only
	if held.Value(key{}) != "v" || held.Err() != nil {
		t.Fatalf("hold context: value %v, err %v; want ctx's value and alive", held.Value(key{}), held.Err())
	}
	if _, ok := held.Deadline(); ok {
		t.Fatal("hold context has ctx's deadline")
	}
	m.Unlock()
}

// TestMutexCancelLeavesNothing cancels waits at every stage (before, during
// the create, while listing, while watching) and checks no node is left.
func TestMutexCancelLeavesNothing(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	holder.Lock()
	defer holder.Unlock()
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.LockContext(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext(canceled) = %v", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.LockContext(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext(timeout) = %v; want DeadlineExceeded", err)
	}
	if m.TryLock() {
		t.Fatal("TryLock succeeded while held elsewhere")
	}
	if _, err := m.TryLockContext(context.Background()); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryLockContext while held elsewhere = %v; want ErrWouldBlock", err)
	}
	for i := 0; i < 40; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(i%8)*250*time.Microsecond, cancel)
		if _, err := m.LockContext(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext canceled at stage %d = %v", i, err)
		}
		cancel()
	}
	awaitChildren(t, obs, path, 1) // the holder's only, once undoing is done
}

// TestMutexCancelWhileDisconnected: a wait canceled while the connection is
// down leaves no node once the connection is back.
func TestMutexCancelWhileDisconnected(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	obs := observer(t, srv.Addr())
	holder := dsync.NewMutex(dial(t, []string{srv.Addr()}), path)
	holder.Lock()
	defer holder.Unlock()
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	m := dsync.NewMutex(s, path)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := m.LockContext(ctx)
		errc <- err
	}()
	kids := awaitChildren(t, obs, path, 2)
	sub := s.Subscribe()
	defer sub.Stop()
	p.BlackHole()
	p.Cut()
	for ev := range sub.C() {
		if ev.State == zkconn.StateSuspended {
			break
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext = %v; want context.Canceled", err)
	}
	p.Heal()
	left := awaitChildren(t, obs, path, 1)
	if left[0] != holderNode(kids, left) {
		t.Fatalf("left %v; want the holder's node", left)
	}
}

func holderNode(before, after []string) string {
	for _, b := range before {
		for _, a := range after {
			if a == b {
				return a
			}
		}
	}
	return ""
}

func TestMutexFencingTokens(t *testing.T) {
	path := lockPath(t)
	var ms []*dsync.Mutex
	for i := 0; i < 5; i++ {
		ms = append(ms, dsync.NewMutex(dial(t, []string{shared.Addr()}), path))
	}
	var last int64
	for i := 0; i < 100; i++ {
		m := ms[i%len(ms)]
		m.Lock()
		tok := m.Token()
		m.Unlock()
		if tok <= last {
			t.Fatalf("hold %d: token %d after %d; want strictly increasing", i, tok, last)
		}
		last = tok
	}
}

// TestMutexLossOnPartition: a holder cut off from ZooKeeper learns it lost
// the lock before anyone else can take it.
func TestMutexLossOnPartition(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	m := dsync.NewMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second)), path)
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	other := dsync.NewMutex(dial(t, []string{srv.Addr()}), path)
	acquired := lockAfter(other, held)
	p.BlackHole()
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) {
		t.Fatalf("cause = %v; want ErrLockLost", cause)
	}
	m.Unlock() // returns normally after a loss
	other.Unlock()
}

// TestMutexLossOnExpiry: under LostOnExpiry a hold survives a short cut and
// is lost when the session is.
func TestMutexLossOnExpiry(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	m := dsync.NewMutex(s, lockPath(t), dsync.WithLossPolicy(dsync.LostOnExpiry))
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	for ev := range sub.C() {
		if ev.State == zkconn.StateReconnected {
			break
		}
	}
	if held.Err() != nil {
		t.Fatalf("hold lost on a short cut: %v", context.Cause(held))
	}
	p.BlackHole()
	<-held.Done()
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) || !errors.Is(cause, zkconn.ErrSessionLost) {
		t.Fatalf("cause = %v; want ErrLockLost and ErrSessionLost", cause)
	}
	m.Unlock()
}

// TestMutexNodeDeleted: an administrator deleting the lock node ends the hold.
func TestMutexNodeDeleted(t *testing.T) {
	path := lockPath(t)
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	obs := observer(t, shared.Addr())
	kids := children(t, obs, path)
	if len(kids) != 1 {
		t.Fatalf("children = %v", kids)
	}
	if err := obs.Delete(path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	<-held.Done()
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) || !strings.Contains(cause.Error(), "deleted") {
		t.Fatalf("cause = %v; want ErrLockLost (node deleted)", cause)
	}
	m.Unlock()
	held, err = m.TryLockContext(context.Background())
	if err != nil || held.Err() != nil {
		t.Fatalf("TryLockContext after a lost hold = %v", err)
	}
	m.Unlock()
}

// TestMutexEnsembleLeaderLoss: the leader of a 3-server ensemble stops while
// one Session holds and another waits; the lock stays exclusive and the
// waiter proceeds.
func TestMutexEnsembleLeaderLoss(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t, 3)
	path := lockPath(t)
	var c critical
	holder := dsync.NewMutex(dial(t, e.Addrs(), zkconn.WithSessionTimeout(10*time.Second)), path)
	waiter := dsync.NewMutex(dial(t, e.Addrs(), zkconn.WithSessionTimeout(10*time.Second)), path)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, err := holder.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.inside.Store(1)
	got := make(chan error, 1)
	go func() {
		_, err := waiter.LockContext(ctx)
		if err == nil {
			c.run()
			waiter.Unlock()
		}
		got <- err
	}()
	obs := observer(t, e.Addrs()...)
	awaitChildren(t, obs, path, 2)
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Server(leader).Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitQuorum(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if held.Err() == nil {
			t.Fatalf("waiter done (%v) while the holder's hold is alive", err)
		}
	default:
	}
	c.inside.Store(0)
	holder.Unlock()
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	c.check(t, 1)
	for _, m := range []*dsync.Mutex{holder, waiter} { // both still work
		if _, err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		m.Unlock()
	}
}

func TestMutexParticipants(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	holder := dsync.NewMutex(s, path, dsync.WithData([]byte("holder")))
	holder.Lock()
	// A go-zookeeper zk.Lock waits in the same line.
	zl := zk.NewLock(obs, path, zk.WorldACL(zk.PermAll))
	zlDone := make(chan error, 1)
	go func() { zlDone <- zl.Lock() }()
	awaitChildren(t, obs, path, 2)
	waiter := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	wctx, cancel := context.WithCancel(context.Background())
	werr := make(chan error, 1)
	go func() { _, err := waiter.LockContext(wctx); werr <- err }()
	awaitChildren(t, obs, path, 3)

	ps, err := holder.Participants(context.Background())
	if err != nil || len(ps) != 3 {
		t.Fatalf("Participants = %v, %v; want 3", ps, err)
	}
	if string(ps[0].Data) != "holder" || ps[0].Session != sessionID(t, s) {
		t.Fatalf("first participant %+v; want the holder", ps[0])
	}
	if ps[1].Session != obs.SessionID() || !strings.HasPrefix(string(ps[2].Data), "host=") {
		t.Fatalf("participants %+v; want zk.Lock second, then the dsync waiter", ps)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Sequence <= ps[i-1].Sequence {
			t.Fatalf("participants out of order: %+v", ps)
		}
	}
	cancel()
	if err := <-werr; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	holder.Unlock()
	if err := <-zlDone; err != nil {
		t.Fatal(err)
	}
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// zkLocker is go-zookeeper's zk.Lock as a sync.Locker for contend.
type zkLocker struct {
	t *testing.T
	l *zk.Lock
}

func (z zkLocker) Lock() {
	if err := z.l.Lock(); err != nil {
		z.t.Error(err)
	}
}

func (z zkLocker) Unlock() {
	if err := z.l.Unlock(); err != nil {
		z.t.Error(err)
	}
}

// TestMutexExcludesZkLock: go-zookeeper's zk.Lock and a dsync Mutex on one
// path exclude each other.
func TestMutexExcludesZkLock(t *testing.T) {
	path := lockPath(t)
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	zl := zk.NewLock(observer(t, shared.Addr()), path, zk.WorldACL(zk.PermAll))
	contend(t, []sync.Locker{m, zkLocker{t, zl}}, 30)
}

// TestMutexCutWhileWaiting: a connection cut while waiting, with the same
// session back, does not cost the hold that follows.
func TestMutexCutWhileWaiting(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	holder := dsync.NewMutex(dial(t, []string{srv.Addr()}), path)
	holder.Lock()
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	m := dsync.NewMutex(s, path)
	type result struct {
		held context.Context
		err  error
	}
	got := make(chan result, 1)
	go func() {
		held, err := m.LockContext(context.Background())
		got <- result{held, err}
	}()
	awaitChildren(t, observer(t, srv.Addr()), path, 2)
	p.Cut()
	for ev := range sub.C() {
		if ev.State == zkconn.StateReconnected {
			break
		}
	}
	holder.Unlock()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.held.Err() != nil {
		t.Fatalf("hold lost at once: %v", context.Cause(r.held))
	}
	m.Unlock()
}

// TestMutexRefused: ZooKeeper refusing the node is an error that names the
// path and wraps ZooKeeper's, and Lock panics with it.
func TestMutexRefused(t *testing.T) {
	parent := lockPath(t)
	obs := observer(t, shared.Addr())
	if _, err := obs.Create(parent, nil, 0, zk.WorldACL(zk.PermRead)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), parent+"/lock")
	_, err := m.LockContext(context.Background())
	if !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), parent+"/lock") {
		t.Fatalf("LockContext under a read-only parent = %v; want zk.ErrNoAuth naming the path", err)
	}
	expectPanic(t, "dsync: Lock: ", m.Lock)
	if kids := children(t, obs, parent); len(kids) != 0 {
		t.Fatalf("children left: %v", kids)
	}
}
