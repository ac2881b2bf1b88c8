package dsync_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestWaiterWhoseNodeWasDeletedDoesNotClaim pins a double grant: A holds, V
// waits second, an operator deletes V's node, W joins and is second, A
// unlocks. Only one of V and W may hold; V must queue again.
func TestWaiterWhoseNodeWasDeletedDoesNotClaim(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	v := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	w := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	a.Lock()

	var inside atomic.Int32
	release := make(chan struct{})
	acquired := make(chan string, 2)
	var wg sync.WaitGroup
	enter := func(name string, m *dsync.Mutex) {
		wg.Go(func() {
			m.Lock()
			if n := inside.Add(1); n > 1 {
				t.Errorf("%s entered with %d inside", name, n)
			}
			acquired <- name
			<-release
			inside.Add(-1)
			m.Unlock()
		})
	}
	enter("V", v)
	kids := awaitChildren(t, obs, path, 2)
	vNode := orderedNames(kids)[1]
	awaitWatch(t, shared, path+"/"+orderedNames(kids)[0], mustSessionOf(t, obs, path+"/"+vNode))
	if err := obs.Delete(path+"/"+vNode, -1); err != nil {
		t.Fatal(err)
	}
	enter("W", w)
	awaitChildren(t, obs, path, 3) // A, W, and V queued again
	a.Unlock()

	first := <-acquired
	// The other is waiting behind the holder: its node is there and
	// watches the holder's.
	kids = orderedNames(awaitChildren(t, obs, path, 2))
	awaitWatch(t, shared, path+"/"+kids[0], mustSessionOf(t, obs, path+"/"+kids[1]))
	select {
	case second := <-acquired:
		t.Fatalf("%s and %s both hold", first, second)
	default:
	}
	release <- struct{}{}
	<-acquired
	release <- struct{}{}
	wg.Wait()
}

// mustSessionOf returns the ephemeralOwner of node.
func mustSessionOf(t testing.TB, obs *zk.Conn, node string) int64 {
	t.Helper()
	_, st, err := obs.Get(node)
	if err != nil {
		t.Fatalf("Get(%s) = %v", node, err)
	}
	return st.EphemeralOwner
}

// TestHoldLostWhileRewatching pins a hold that stayed live while its watch
// was being set again: a write into the held node (a revoker's
// "__REVOKE__") makes the hold set its watch again, and the connection goes
// silent with that request. The hold must be lost before anyone else can
// take the lock.
func TestHoldLostWhileRewatching(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	m := dsync.NewMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(3*time.Second)), path)
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	obs := observer(t, srv.Addr())
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.BlackHole)
	if _, err := obs.Set(node, []byte("__REVOKE__"), -1); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	p.BlackHole() // and the partition lasts
	other := dsync.NewMutex(dial(t, []string{srv.Addr()}), path)
	if _, err := other.LockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if held.Err() == nil {
		t.Fatal("another session holds the lock while the old hold context is live")
	}
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) {
		t.Fatalf("cause = %v; want ErrLockLost", cause)
	}
	m.Unlock()
	other.Unlock()
}

// TestLostOnExpiryUsesGrantedTimeout pins LostOnExpiry trusting the
// session timeout asked for: the server grants at most 2s when 8s is asked,
// and expires the session (letting another in) long before 8s.
func TestLostOnExpiryUsesGrantedTimeout(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(8*time.Second))
	if got := s.SessionTimeout(); got != 2*time.Second {
		t.Errorf("SessionTimeout() = %v; want the 2s granted", got)
	}
	m := dsync.NewMutex(s, path, dsync.WithLossPolicy(dsync.LostOnExpiry))
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
	m.Unlock()
	other.Unlock()
}

// lockAfter locks m on a goroutine and reports on the channel how that went:
// an error also if m got the lock while held, an earlier holder's context,
// was still live.
func lockAfter(m *dsync.Mutex, held context.Context) <-chan error {
	acquired := make(chan error, 1)
	go func() {
		_, err := m.LockContext(context.Background())
		if err == nil && held.Err() == nil {
			err = errors.New("acquired while the old holder's context was alive")
		}
		acquired <- err
	}()
	return acquired
}

// TestLockContextRacingUnlock pins LockContext(hold context) returning (nil,
// nil) when it raced the last Unlock.
func TestLockContextRacingUnlock(t *testing.T) {
	t.Parallel()
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), lockPath(t))
	for range 1000 {
		held, err := m.LockContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			m.Unlock()
			close(done)
		}()
		again, err := m.LockContext(held)
		<-done
		switch {
		case err == nil && again == nil:
			t.Fatal("LockContext(hold) = nil, nil")
		case err == nil:
			m.Unlock() // re-entered before the Unlock: one level left
		case !errors.Is(err, context.Canceled):
			t.Fatalf("LockContext(ended hold) = %v; want context.Canceled", err)
		}
	}
}

// TestNilSessionTry pins a panic: TryAcquire and TryLock with a nil Session
// asked it for its timeout before checking it.
func TestNilSessionTry(t *testing.T) {
	if dsync.NewWeighted(nil, "/p", 1).TryAcquire(1) {
		t.Error("Weighted.TryAcquire with a nil session = true")
	}
	if dsync.NewSemaphoreMutex(nil, "/p").TryLock() {
		t.Error("SemaphoreMutex.TryLock with a nil session = true")
	}
	if dsync.NewMutex(nil, "/p").TryLock() {
		t.Error("Mutex.TryLock with a nil session = true")
	}
}

// slack is how late a call may return after its ctx deadline. The calls
// here would be late by two thirds of the 10s session timeout without the
// fix; what they measure is far below either.
const slack = time.Second

// TestCallsHonourDeadlineInPartition pins calls that waited for
// go-zookeeper (about two thirds of the session timeout) when the network
// went silent: acquisitions return by their deadline, Unlock and Release at
// once, and nothing is left behind once the network heals.
func TestCallsHonourDeadlineInPartition(t *testing.T) {
	srv := zktest.Start(t)
	obs := observer(t, srv.Addr())
	for _, tc := range []struct {
		name    string
		acquire func(s *zkconn.Session, path string, ctx context.Context) error
	}{
		{"Mutex", func(s *zkconn.Session, path string, ctx context.Context) error {
			_, err := dsync.NewMutex(s, path).LockContext(ctx)
			return err
		}},
		{"Weighted", func(s *zkconn.Session, path string, ctx context.Context) error {
			return dsync.NewWeighted(s, path, 2).Acquire(ctx, 1)
		}},
		{"SemaphoreMutex", func(s *zkconn.Session, path string, ctx context.Context) error {
			_, err := dsync.NewSemaphoreMutex(s, path).LockContext(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := zktest.NewProxy(t, srv.Addr())
			path := lockPath(t)
			s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
			p.BlackHole()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := tc.acquire(s, path, ctx)
			deadline, _ := ctx.Deadline()
			if late := time.Since(deadline); late > slack {
				t.Errorf("returned %v after its deadline", late)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v; want DeadlineExceeded", err)
			}
			p.Heal()
			zktest.AwaitChildren(t, obs, path, 0)
		})
	}
	t.Run("Unlock", func(t *testing.T) {
		p := zktest.NewProxy(t, srv.Addr())
		path := lockPath(t)
		m := dsync.NewMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path)
		m.Lock()
		p.BlackHole()
		start := time.Now()
		m.Unlock()
		if d := time.Since(start); d > slack {
			t.Errorf("Unlock took %v with the network silent", d)
		}
		p.Heal()
		zktest.AwaitChildren(t, obs, path, 0)
	})
}

// TestOneSessionPerConnection pins a request made for one ZooKeeper session
// running on the next: after the server expired the session (it granted 2s
// where 8s was asked), a request through the old session's Handle must fail
// rather than run, and create nothing, in the new session.
func TestOneSessionPerConnection(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	obs := observer(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(8*time.Second))
	ctx := context.Background()
	old, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := lockPath(t)
	if err := old.CreateParents(ctx, path); err != nil {
		t.Fatal(err)
	}
	node, err := old.CreateProtected(ctx, path, "x-", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := obs.ExistsW(node)
	if err != nil {
		t.Fatal(err)
	}
	p.BlackHole()
	<-gone // expired by the server
	p.Heal()
	<-old.Lost()
	cur, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID() == old.ID() {
		t.Fatal("same session after expiry")
	}
	if cur.Conn() == old.Conn() {
		t.Error("the new session runs on the old session's *zk.Conn")
	}
	_, err = old.CreateProtected(ctx, path, "y-", nil)
	if !errors.Is(err, zkconn.ErrSessionLost) {
		t.Errorf("create through the old Handle = %v; want ErrSessionLost", err)
	}
	if kids := children(t, obs, path); len(kids) != 0 {
		t.Errorf("nodes left: %v", kids)
	}
}
