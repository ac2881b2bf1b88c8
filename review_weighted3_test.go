package dsync_test

import (
	"context"
	"errors"
	"slices"
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

func r3seq(name string) string { return name[strings.LastIndex(name, "lease-")+len("lease-"):] }

// newNames returns the children not in old, in sequence order.
func newNames(kids, old []string) []string {
	var out []string
	for _, k := range kids {
		if !slices.Contains(old, k) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(r3seq(a), r3seq(b)) })
	return out
}

func base(ps []string) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p[strings.LastIndexByte(p, '/')+1:])
	}
	return out
}

// TestReview3TryAcquireLeasesBornLostAfterOwnWait: TryAcquireLeases(2) of a
// semaphore of 2 waits for its session's two released leases (deletes under
// way); once they land, it is granted N1, N2, and the connection drops at
// the getData that watches N2: N1's hold, started, is lost (LostOnSuspension)
// before the leases are handed out. Weighted.abandon gives both back without
// waiting (Handle.Delete) and the acquisition starts again, its grant waiting
// for those deletes of its own. It must succeed with two live leases, exactly
// two nodes left, no lock node.
func TestReview3TryAcquireLeasesBornLostAfterOwnWait(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	p1, p2, s, sub := rwTwoProxies(t)
	w := dsync.NewWeighted(s, path, 2)
	old := base(releaseRefused(t, obs, p1, p2, w, leases, 2))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		ls  []*dsync.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		ls, err := w.TryAcquireLeases(ctx, 2)
		res <- result{ls, err}
	}()
	granted := newNames(awaitChildren(t, obs, leases, 4), old)
	select {
	case r := <-res:
		t.Fatalf("TryAcquireLeases = %v, %v while its own released leases' deletes were under way", r.ls, r.err)
	default:
	}
	getN2 := zktest.Match{Op: zktest.OpGetData, Path: leases + "/" + granted[1]}
	cut1, cut2 := p1.Strike(getN2, zktest.Cut), p2.Strike(getN2, zktest.Cut)
	defer cut1.Disarm()
	defer cut2.Disarm()
	if _, err := obs.SetACL(leases, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	liveProxy(t, p1, p2).Cut() // the deletes are sent again, and land
	rlAwait(t, sub, zkconn.StateSuspended)
	select {
	case <-cut1.Struck():
	case <-cut2.Struck():
	case r := <-res:
		t.Fatalf("TryAcquireLeases returned %v, %v before watching N2", r.ls, r.err)
	case <-time.After(4 * time.Second):
		t.Fatal("the getData of N2 never came")
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("TryAcquireLeases = %v after a drop while starting its leases; want them", r.err)
	}
	var got []string
	for _, l := range r.ls {
		if err := l.Context().Err(); err != nil {
			t.Errorf("lease %s handed out with its context done: %v", l.Node(), context.Cause(l.Context()))
		}
		got = append(got, l.Node())
	}
	if slices.Equal(got, granted) {
		t.Logf("leases %v are the first grant (no abandon happened)", got)
	}
	kids := awaitChildren(t, obs, leases, 2)
	slices.Sort(kids)
	slices.Sort(got)
	if !slices.Equal(kids, got) {
		t.Fatalf("leases in ZooKeeper = %v; want the two handed out %v", kids, got)
	}
	awaitChildren(t, obs, path+"/locks", 0) // Acquire does not wait for the internal lock's delete
	for _, l := range r.ls {
		l.Release()
	}
	awaitChildren(t, obs, leases, 0)
}

// TestReview3TryAcquireRefusedOwnDeletesNoSpin: the own deletes TryAcquire
// waits for settle refused (NoAuth) with the nodes still there: it lists
// once more and fails with ErrWouldBlock (a ctx without deadline), without
// listing again and again on the settled deletes (queue.past's bug, pinned
// for TryLock by TestReviewFinalTryLockSpinsOnStaleDeleting). n = 2.
func TestReview3TryAcquireRefusedOwnDeletesNoSpin(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	p1, p2, s, sub := rwTwoProxies(t)
	w := dsync.NewWeighted(s, path, 2)
	releaseRefused(t, obs, p1, p2, w, leases, 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		ls, err := w.TryAcquireLeases(ctx, 2)
		for _, l := range ls {
			l.Release()
		}
		res <- err
	}()
	awaitChildren(t, obs, leases, 4)
	before := p1.Requests() + p2.Requests()
	liveProxy(t, p1, p2).Cut() // sent again: refused again, settled; the nodes stay
	rlAwait(t, sub, zkconn.StateSuspended)
	select {
	case err := <-res:
		if !errors.Is(err, dsync.ErrWouldBlock) {
			t.Fatalf("TryAcquireLeases = %v once its own deletes settled refused; want ErrWouldBlock", err)
		}
	case <-time.After(4 * time.Second):
		cancel()
		t.Fatalf("TryAcquireLeases still running 4s after its own deletes settled (refused), %d requests; then %v",
			p1.Requests()+p2.Requests()-before, <-res)
	}
	if n := p1.Requests() + p2.Requests() - before; n > 40 {
		t.Fatalf("%d requests after the reconnect: it lists again and again", n)
	}
}

// TestReview3TryAcquireOwnWaitDeadline: the wait for its own deletes is
// bounded by ctx: TryAcquireLeases returns DeadlineExceeded at the deadline
// (no overrun past a few ms) and leaves nothing of its own.
func TestReview3TryAcquireOwnWaitDeadline(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	p1, p2, s, _ := rwTwoProxies(t)
	w := dsync.NewWeighted(s, path, 1)
	old := releaseRefused(t, obs, p1, p2, w, leases, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	res := make(chan error, 1)
	var returned time.Time
	go func() {
		_, err := w.TryAcquireLeases(ctx, 1)
		returned = time.Now()
		res <- err
	}()
	awaitChildren(t, obs, leases, 2)
	// Let its own lease go once it gives up (ACL mended): l1's delete
	// stays pending (reply swallowed on a live connection).
	if _, err := obs.SetACL(leases, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	err := <-res
	dl, _ := ctx.Deadline()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquireLeases = %v; want DeadlineExceeded", err)
	}
	if over := returned.Sub(dl); over > 15*time.Millisecond {
		t.Errorf("returned %v after its deadline", over)
	}
	if got := awaitChildren(t, obs, leases, 1); got[0] != base(old)[0] {
		t.Fatalf("leases = %v; want only the released one, its delete pending", got)
	}
	awaitChildren(t, obs, path+"/locks", 0)
}

// TestReview3CountLoweredDuringOwnWait: with NewWeightedCount, the count
// (2) is lowered to 1 while TryAcquire waits for its own released lease's
// delete; another session holds a lease. Once the delete lands, the leases
// would fit the old count but not the new: TryAcquire must fail (it reads
// the count again), not grant a second lease under a maximum of 1.
func TestReview3CountLoweredDuringOwnWait(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	maxPath := lockPath(t) + "-max"
	t.Cleanup(func() { obs.Delete(maxPath, -1) })
	ctx := context.Background()
	other := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	if err := other.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	defer other.Release(1)
	held := awaitChildren(t, obs, leases, 1)

	p1, p2, s, sub := rwTwoProxies(t)
	count := dsync.NewCount(s, maxPath, 3)
	w := dsync.NewWeightedCount(s, path, count)
	if err := w.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var l1 string
	for _, c := range awaitChildren(t, obs, leases, 2) {
		if c != held[0] {
			l1 = leases + "/" + c
		}
	}
	if err := count.Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	strikeEach(p1, p2, zktest.Drop, func() { w.Release(1) }, zktest.Match{Op: zktest.OpDelete, Path: l1})

	res := make(chan bool, 1)
	go func() {
		ok := w.TryAcquire(1)
		if ok {
			w.Release(1)
		}
		res <- ok
	}()
	awaitChildren(t, obs, leases, 3) // held, l1 (pending), its own
	if err := dsync.NewCount(dial(t, []string{shared.Addr()}), maxPath, 2).Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.SetACL(leases, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-res:
		t.Fatalf("TryAcquire = %v before its own delete landed", ok)
	default:
	}
	liveProxy(t, p1, p2).Cut()
	rlAwait(t, sub, zkconn.StateSuspended)
	if <-res {
		t.Fatal("TryAcquire = true: 2 leases under a count lowered to 1")
	}
	awaitChildren(t, obs, leases, 1)
}

// TestReview3ExpiryDuringOwnWait: the session expires while TryAcquireLeases
// waits for its own released lease's delete (pending: reply swallowed). The
// server removes the old session's nodes; TryAcquireLeases starts again on
// the next session and gets the lease; nothing of the old session stays.
func TestReview3ExpiryDuringOwnWait(t *testing.T) {
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	leases := path + "/leases"
	refusingLeases(t, obs, path)
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)
	oldID := sessionID(t, s)
	w := dsync.NewWeighted(s, path, 1)
	if err := w.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	l1 := leases + "/" + awaitChildren(t, obs, leases, 1)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: l1}, zktest.Drop)
	defer f.Disarm()
	w.Release(1)
	<-f.Struck()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		ls  []*dsync.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		ls, err := w.TryAcquireLeases(ctx, 1)
		res <- result{ls, err}
	}()
	awaitChildren(t, obs, leases, 2)
	if _, err := obs.SetACL(leases, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	p.BlackHole()
	awaitChildren(t, obs, leases, 0) // expired: the server removed its nodes
	p.Heal()
	r := <-res
	if r.err != nil {
		t.Fatalf("TryAcquireLeases across expiry = %v", r.err)
	}
	if sessionID(t, s) == oldID {
		t.Fatal("same session")
	}
	if err := r.ls[0].Context().Err(); err != nil {
		t.Fatalf("lease handed out done: %v", context.Cause(r.ls[0].Context()))
	}
	if got := awaitChildren(t, obs, leases, 1); got[0] != r.ls[0].Node() {
		t.Fatalf("leases = %v; want %s", got, r.ls[0].Node())
	}
	r.ls[0].Release()
	assertEmpty(t, path)
}

// TestReview3TryAcquireAfterReleaseCut: x/sync's promise: a TryAcquire
// after a Release (returned) of the same semaphore, with room, succeeds.
// Each round one of the two released leases' delete is cut on its way
// (written, not applied: sent again after the reconnect, racing the
// TryAcquire's requests).
func TestReview3TryAcquireAfterReleaseCut(t *testing.T) {
	p1, p2, s, _ := rwTwoProxies(t)
	path := lockPath(t)
	w := dsync.NewWeighted(s, path, 2)
	leaseDelete := zktest.Match{Op: zktest.OpDelete, Path: path + "/leases/", Prefix: true}
	for round := 0; round < 10; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.Acquire(ctx, 2); err != nil {
			t.Fatalf("round %d: Acquire = %v", round, err)
		}
		cancel()
		strikeEach(p1, p2, zktest.Cut, func() { w.Release(2) }, leaseDelete)
		if !w.TryAcquire(2) {
			t.Fatalf("round %d: TryAcquire(2) = false after Release(2) returned", round)
		}
		w.Release(2)
	}
	assertEmpty(t, path)
}

// TestReview3TryAcquireWhileOtherReleases: leases of this session are
// released by other goroutines (deletes cut on the way now and then) while
// TryAcquire(2) of another Weighted on the same session and path lists and
// waits for them. The process never holds more than max at once, and
// nothing is left.
func TestReview3TryAcquireWhileOtherReleases(t *testing.T) {
	p1, p2, s, _ := rwTwoProxies(t)
	path := lockPath(t)
	const max = 2
	w := dsync.NewWeighted(s, path, max)
	other := dsync.NewWeighted(s, path, max)
	var inUse atomic.Int64
	hold := func(n int64) {
		if v := inUse.Add(n); v > max {
			t.Errorf("%d leases held by this process; max %d", v, max)
		}
	}
	leaseDelete := zktest.Match{Op: zktest.OpDelete, Path: path + "/leases/", Prefix: true}
	granted := 0
	for round := 0; round < 20; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := other.Acquire(ctx, 1); err != nil {
			t.Fatalf("round %d: Acquire = %v", round, err)
		}
		cancel()
		hold(1)
		var wg sync.WaitGroup
		wg.Go(func() {
			inUse.Add(-1)
			if round%2 == 0 {
				strikeEach(p1, p2, zktest.Cut, func() { other.Release(1) }, leaseDelete)
			} else {
				other.Release(1)
			}
		})
		if w.TryAcquire(2) {
			granted++
			hold(2)
			inUse.Add(-2)
			w.Release(2)
		}
		wg.Wait()
	}
	t.Logf("TryAcquire(2) granted %d of 20", granted)
	assertEmpty(t, path)
}
