package dsync_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// createOf matches a protected create under path.
func createOf(path string) zktest.Match {
	return zktest.Match{Op: zktest.OpCreate, Path: path + "/" + zkconn.ProtectedPrefix, Prefix: true}
}

// listingRig is a lock a holds, and b, whose session goes through a proxy
// that strikes its next create under the lock's path with an action.
type listingRig struct {
	path string
	obs  *zk.Conn
	a, b *dsync.Mutex
	p    *zktest.Proxy
	f    *zktest.Fault
	ctx  context.Context
}

func newListingRig(t *testing.T, action zktest.Action) listingRig {
	t.Helper()
	r := listingRig{path: lockPath(t), obs: observer(t, shared.Addr())}
	r.a = dsync.NewMutex(dial(t, []string{shared.Addr()}), r.path)
	r.p = zktest.NewProxy(t, shared.Addr())
	r.b = dsync.NewMutex(dial(t, []string{r.p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), r.path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	if _, err := r.a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	r.f = r.p.Strike(createOf(r.path), action)
	t.Cleanup(r.f.Disarm)
	return r
}

// TestReviewListingJoinFaults: while a holds the lock, b joins through a
// proxy whose create is struck (applied with its reply lost; not applied;
// applied with its reply swallowed until a cut): b must wait behind a, hold
// only after a's Unlock, and leave exactly one node.
func TestReviewListingJoinFaults(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, action := range []zktest.Action{zktest.Lose, zktest.Cut, zktest.Drop} {
		t.Run(action.String(), func(t *testing.T) {
			r := newListingRig(t, action)
			path, obs, a, b, p, f, ctx := r.path, r.obs, r.a, r.b, r.p, r.f, r.ctx
			var released atomic.Bool
			res := make(chan error, 1)
			go func() {
				_, err := b.LockContext(ctx)
				if err == nil && !released.Load() {
					err = errors.New("b holds while a does")
				}
				res <- err
			}()
			zktest.AwaitStruck(t, f)
			if action == zktest.Drop {
				awaitChildren(t, obs, path, 2)
				p.Cut()
			}
			awaitChildren(t, obs, path, 2)
			// b is queued behind a, or about to be. a's node is
			// released once b's node exists either way.
			released.Store(true)
			a.Unlock()
			if err := <-res; err != nil {
				t.Fatalf("b.LockContext = %v", err)
			}
			if kids := children(t, obs, path); len(kids) != 1 {
				t.Fatalf("children = %v; want b's node only", kids)
			}
			b.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewListingTryLockFaults: TryLockContext while another holds, with
// the create struck: ErrWouldBlock, and no node left behind.
func TestReviewListingTryLockFaults(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Lose, zktest.Cut} {
		t.Run(action.String(), func(t *testing.T) {
			r := newListingRig(t, action)
			path, obs, a, b, f, ctx := r.path, r.obs, r.a, r.b, r.f, r.ctx
			if _, err := b.TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
				t.Fatalf("b.TryLockContext = %v; want ErrWouldBlock", err)
			}
			zktest.AwaitStruck(t, f)
			awaitChildren(t, obs, path, 1)
			a.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewListingCycleRequests: an uncontended LockContext/Unlock cycle
// with a cancellable ctx costs the same requests every time: the listing
// sent with the create never comes back without the node, so none is sent
// twice.
func TestReviewListingCycleRequests(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{p.Addr()}), path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The lock's parent is persistent, not the container the first cycle
	// would make: ZooKeeper reaps an empty container (a check every 60 s),
	// and the next cycle would then make it again, with requests of its
	// own.
	persistentParents(t, obs, path)
	cycle := func() {
		if _, err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		m.Unlock()
		awaitChildren(t, obs, path, 0)
	}
	cycle() // parents
	before := p.Requests()
	cycle()
	per := p.Requests() - before
	const n = 100
	before = p.Requests()
	for range n {
		cycle()
	}
	if got := p.Requests() - before; got != n*per {
		t.Errorf("%d cycles took %d requests; want %d (%d each)", n, got, n*per, per)
	}
}

// TestReviewStaleListingAfterLostCreateReply: b's create is applied and its
// reply swallowed (Drop); the listing sent behind it is served at once, and
// shows a's node ahead of b's. Then a releases and c joins behind b. b must
// hold (the only node ahead of it is gone, and c's sorts after it), c must
// not hold alongside b, and each leaves one node. (The test once cut the
// connection only after c joined, so that CreateProtectedListing returned
// the listing served long before, stale. The listing's reply now comes out
// of turn, ahead of the create's, and the Session closes the connection at
// it: b recovers its node and lists again, at some point in those steps.)
func TestReviewStaleListingAfterLostCreateReply(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	p := zktest.NewProxy(t, shared.Addr())
	sb := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	hb, err := sb.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := dsync.NewMutex(sb, path)
	c := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)

	f := p.Strike(createOf(path), zktest.Drop)
	defer f.Disarm()
	before := p.Requests()
	type result struct {
		held context.Context
		err  error
	}
	resB := make(chan result, 1)
	go func() {
		held, err := b.LockContext(ctx)
		resB <- result{held, err}
	}()
	zktest.AwaitStruck(t, f)
	// The create and the listing sent behind it have reached the server
	// (a busy wait on a counter, not a sleep: the listing goes out as soon
	// as the create is written).
	for p.Requests() < before+2 {
		if ctx.Err() != nil {
			t.Fatal("the listing never went out behind the create")
		}
		runtime.Gosched()
	}
	// A request of b's session answered after the listing's reply: the
	// listing was served (showing a's node) before a releases.
	if err := hb.Do(ctx, func(c *zk.Conn) error {
		_, _, err := c.Exists(path)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	kids := awaitChildren(t, obs, path, 2)
	a.Unlock()
	awaitChildren(t, obs, path, 1)

	resC := make(chan result, 1)
	go func() {
		held, err := c.LockContext(ctx)
		resC <- result{held, err}
	}()
	withC := awaitChildren(t, obs, path, 2)

	r := <-resB
	if r.err != nil {
		t.Fatalf("b.LockContext = %v", r.err)
	}
	if r.held.Err() != nil {
		t.Fatalf("b's hold is already lost: %v", context.Cause(r.held))
	}
	// c's node sorts after b's (c listed b's node): c waits.
	got := children(t, obs, path)
	slices.Sort(got)
	slices.Sort(withC)
	if !slices.Equal(got, withC) {
		t.Fatalf("children = %v; want b's and c's nodes %v (a's and b's were %v)", got, withC, kids)
	}
	select {
	case rc := <-resC:
		t.Fatalf("c.LockContext = %v while b holds", rc.err)
	default:
	}
	b.Unlock()
	rc := <-resC
	if rc.err != nil {
		t.Fatalf("c.LockContext = %v", rc.err)
	}
	if got := children(t, obs, path); len(got) != 1 {
		t.Fatalf("children = %v; want c's node only", got)
	}
	c.Unlock()
	awaitChildren(t, obs, path, 0)
}
