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

// TestReviewR63RewrittenPredecessorGiveUp: W waits behind P, itself a
// waiter (so W watches P's handoff signal too), and P's node is written to
// again and again (revocation requests). W follows P again after each write,
// and P's signal must not pile up in what W's give-up sends (a create and a
// delete per signal): it grew with every write, and past the server's limit
// on a request it was refused, the node left behind W for as long as its
// session lived, the lock stuck. A path
// near the longest dsync takes (its nodes' paths, given to Revoke, within
// it) makes some 60 writes enough.
func TestReviewR63RewrittenPredecessorGiveUp(t *testing.T) {
	t.Parallel()
	const writes = 80 // 160 signals of 8 KB each, the way it was
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t) + "/"
	path += strings.Repeat("a", 4096-64-len(path))
	obs := observer(t, shared.Addr())
	sH, sP, sW := dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()})
	h := dsync.NewMutex(sH, path)
	if _, err := h.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	p := dsync.NewMutex(sP, path, dsync.Revocable())
	pDone := make(chan error, 1)
	go func() { _, err := p.LockContext(ctx); pDone <- err }()
	awaitChildren(t, obs, path, 2)
	wctx, wcancel := context.WithCancel(ctx)
	wDone := make(chan error, 1)
	go func() { _, err := dsync.NewMutex(sW, path).LockContext(wctx); wDone <- err }()
	kids := awaitChildren(t, obs, path, 3)
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	pNode := path + "/" + kids[1]
	hW, err := sW.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub := sW.Subscribe()
	defer sub.Stop()
	<-sub.C() // the state now
	following := func() {
		t.Helper()
		if err := shared.AwaitWatches(ctx, func(m map[string][]int64) bool { return slices.Contains(m[pNode], hW.ID()) }); err != nil {
			t.Fatalf("W does not follow P: %v", err)
		}
	}
	following()
	for range writes {
		if err := dsync.Revoke(ctx, sH, pNode); err != nil {
			t.Fatal(err)
		}
		following() // again, after the write
	}
	wcancel()
	if err := <-wDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("W's LockContext = %v; want context.Canceled", err)
	}
	awaitChildren(t, obs, path, 2) // W's node goes
	// The signal was sent with W's delete, which fired W's watch on it.
	if ids := watches(t, shared)[pNode+".handoff"]; slices.Contains(ids, hW.ID()) {
		t.Errorf("W's watch on P's handoff signal is still set: W's give-up sent no signal")
	}
	select {
	case ev := <-sub.C():
		t.Errorf("W's Session went %v", ev.State)
	default:
	}
	h.Unlock()
	if err := <-pDone; err != nil {
		t.Fatalf("P: %v", err)
	}
	p.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR63DataTooLarge: node data larger than the server takes in one
// request fails at once with zkconn.ErrTooLarge, and leaves the Session's
// connection (and its holds) alone: the server closed the connection at the
// request, and each attempt after a reconnect closed the next one, until
// ctx ended, every hold of the Session lost on the way; Value.Set reported
// an unknown outcome for a write the server never applied.
func TestReviewR63DataTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	other := dsync.NewMutex(s, path+"/other")
	held, err := other.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20)
	if _, err := dsync.NewMutex(s, path+"/big", dsync.WithData(big)).LockContext(ctx); !errors.Is(err, zkconn.ErrTooLarge) {
		t.Errorf("LockContext with 1 MB of data = %v; want zkconn.ErrTooLarge", err)
	}
	v := dsync.NewValue[[]byte](s, path+"/v", bytesCodec{}, nil)
	if err := v.Set(ctx, big); !errors.Is(err, zkconn.ErrTooLarge) || errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Errorf("Value.Set of 1 MB = %v; want zkconn.ErrTooLarge, the outcome known", err)
	}
	if err := v.Set(ctx, []byte("small")); err != nil {
		t.Fatal(err)
	}
	prev, err := v.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := v.CompareAndSet(ctx, prev, big); ok || !errors.Is(err, zkconn.ErrTooLarge) || errors.Is(err, dsync.ErrOutcomeUnknown) {
		t.Errorf("Value.CompareAndSet of 1 MB = %v, %v; want false, zkconn.ErrTooLarge, the outcome known", ok, err)
	}
	if got, err := v.Get(ctx); err != nil || string(got.Value) != "small" || got.Version != prev.Version {
		t.Errorf("Value.Get = %q (version %d), %v; want %q (version %d)", got.Value, got.Version, err, "small", prev.Version)
	}
	if err := held.Err(); err != nil {
		t.Errorf("a hold of the same Session: %v", context.Cause(held))
	}
	other.Unlock()
	awaitChildren(t, obs, path+"/other", 0)
	if kids := children(t, obs, path+"/big"); len(kids) > 0 {
		t.Errorf("nodes left under %s/big: %v", path, kids)
	}
}

// r63Prim is one primitive under test: hold takes it (returning a hold
// context), release gives it back.
type r63Prim struct {
	name    string
	hold    func(ctx context.Context) (context.Context, error)
	release func()
}

func r63Prims(s *zkconn.Session, base string, opts ...dsync.Option) []r63Prim {
	m := dsync.NewMutex(s, base+"/mutex", opts...)
	sm := dsync.NewSemaphoreMutex(s, base+"/semmutex", opts...)
	w := dsync.NewWeighted(s, base+"/weighted", 1, opts...)
	rw := dsync.NewRWMutex(s, base+"/rw", opts...)
	el := dsync.NewElection(s, base+"/election", opts...)
	var leases []*dsync.Lease
	return []r63Prim{
		{"mutex", m.LockContext, m.Unlock},
		{"semmutex", sm.LockContext, sm.Unlock},
		{"weighted", func(ctx context.Context) (context.Context, error) {
			ls, err := w.AcquireLeases(ctx, 1)
			if err != nil {
				return nil, err
			}
			leases = ls
			return ls[0].Context(), nil
		}, func() { leases[0].Release() }},
		{"rw", rw.LockContext, rw.Unlock},
		{"election", func(ctx context.Context) (context.Context, error) { return el.Campaign(ctx, "x") },
			func() { el.Resign(context.Background()) }},
	}
}

type r63Result struct {
	held context.Context
	err  error
}

// r63Restart: holders in session A, waiters in session B, on every
// primitive; the standalone server is stopped and restarted (same data, same
// port). If outage is set, the server stays down until both sessions report
// Lost. Afterwards: no waiter may hold while the holder has not released (or
// its session expired on the server), every waiter must get its turn once
// the holders release, and in the end no node and no watch may be left.
func r63Restart(t *testing.T, timeout time.Duration, waitLost bool, opts ...dsync.Option) {
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := "/r63"
	a := dial(t, []string{srv.Addr()}, zkconn.WithSessionTimeout(timeout))
	b := dial(t, []string{srv.Addr()}, zkconn.WithSessionTimeout(timeout))
	pa, pb := r63Prims(a, base, opts...), r63Prims(b, base, opts...)
	held := make([]context.Context, len(pa))
	for i, p := range pa {
		h, err := p.hold(ctx)
		if err != nil {
			t.Fatalf("%s: A: %v", p.name, err)
		}
		held[i] = h
	}
	// C: waiters that give up while the server is down.
	c := dial(t, []string{srv.Addr()}, zkconn.WithSessionTimeout(timeout))
	pc := r63Prims(c, base, opts...)
	cctx, ccancel := context.WithCancel(ctx)
	cres := make([]chan r63Result, len(pc))
	for i, p := range pc {
		cres[i] = make(chan r63Result, 1)
		go func() {
			h, err := p.hold(cctx)
			cres[i] <- r63Result{h, err}
		}()
	}
	results := make([]chan r63Result, len(pb))
	for i, p := range pb {
		results[i] = make(chan r63Result, 1)
		go func() {
			h, err := p.hold(ctx)
			results[i] <- r63Result{h, err}
		}()
	}
	obs := zktest.Observer(t, srv.Addr())
	// Wait for B's nodes to be queued.
	zktest.AwaitChildren(t, obs, base+"/mutex", 3)
	zktest.AwaitChildren(t, obs, base+"/semmutex/leases", 2)
	zktest.AwaitChildren(t, obs, base+"/semmutex/locks", 2)
	zktest.AwaitChildren(t, obs, base+"/weighted/leases", 2)
	zktest.AwaitChildren(t, obs, base+"/weighted/locks", 2)
	zktest.AwaitChildren(t, obs, base+"/rw", 3)
	zktest.AwaitChildren(t, obs, base+"/election", 3)
	// and their watches set
	if err := srv.AwaitWatches(ctx, func(m map[string][]int64) bool { return len(m) >= 5 }); err != nil {
		t.Fatal(err)
	}

	subA, subB := a.Subscribe(), b.Subscribe()
	defer subA.Stop()
	defer subB.Stop()
	// The observer looks again on a connection made once the server is
	// back: go-zookeeper's own reconnect can come after A's and B's.
	obs.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ccancel()
	for i, p := range pc {
		start := time.Now()
		select {
		case r := <-cres[i]:
			if r.err == nil {
				t.Errorf("%s: C got a hold while the server was down", p.name)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: C did not return within 5s of its ctx's end (server down)", p.name)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Logf("%s: C returned %v after cancel", p.name, d)
		}
	}
	if waitLost {
		for _, sub := range []*zkconn.Subscription{subA, subB} {
			for ev := range sub.C() {
				if ev.State == zkconn.StateLost {
					break
				}
			}
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*zkconn.Session{a, b} {
		if _, err := s.Current(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("A state %v, B state %v", a.State(), b.State())
	obs = zktest.Observer(t, srv.Addr())
	for i, p := range pa {
		t.Logf("%s: A hold after restart: err=%v cause=%v", p.name, held[i].Err(), context.Cause(held[i]))
	}
	// No waiter may hold while A's node is there. Check each: if B got
	// it, A's node must be gone.
	for i, p := range pb {
		select {
		case r := <-results[i]:
			if r.err == nil {
				t.Errorf("%s: B holds while A's node is there", p.name)
			}
			results[i] <- r
		default:
		}
	}
	for i, p := range pa {
		p.release()
		select {
		case r := <-results[i]:
			if r.err != nil {
				t.Errorf("%s: B: %v", p.name, r.err)
				continue
			}
			if r.held.Err() != nil {
				t.Logf("%s: B hold already ended: %v", p.name, context.Cause(r.held))
			}
			pb[i].release()
		case <-time.After(2*timeout + 30*time.Second):
			t.Errorf("%s: B never got its turn after A released", p.name)
		}
	}
	for _, p := range []string{"/mutex", "/semmutex/locks", "/semmutex/leases", "/weighted/locks", "/weighted/leases", "/rw", "/election"} {
		zktest.AwaitChildren(t, obs, base+p, 0)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := srv.AwaitWatches(wctx, func(m map[string][]int64) bool {
		for p, ids := range m {
			for _, id := range ids {
				if len(p) >= 4 && p[:4] == "/r63" && id != obs.SessionID() {
					return false
				}
			}
		}
		return true
	}); err != nil {
		m, _ := srv.Watches(ctx)
		t.Errorf("watches left: %v", m)
	}
}

// The restart tests run after the rest of the package: a server, paths and
// sessions of their own, and no bound tighter than 5 s.

func TestReviewR63RestartShort(t *testing.T) {
	t.Parallel()
	r63Restart(t, 20*time.Second, false)
}

func TestReviewR63RestartShortExpiry(t *testing.T) {
	t.Parallel()
	r63Restart(t, 20*time.Second, false, dsync.WithLossPolicy(dsync.LostOnExpiry))
}

func TestReviewR63RestartLong(t *testing.T) {
	t.Parallel()
	r63Restart(t, 4*time.Second, true)
}

// TestReviewR63EphemeralParent: a lock path under an ephemeral node, which
// can have no children: every primitive must fail at once with an error,
// not wait for its ctx.
func TestReviewR63EphemeralParent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	if _, err := obs.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Create(path+"/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s := dial(t, []string{shared.Addr()})
	p := path + "/eph/x"
	try := func(name string, f func(context.Context) error) {
		lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
		defer lcancel()
		start := time.Now()
		err := f(lctx)
		d := time.Since(start)
		t.Logf("%s = %v after %v", name, err, d.Round(time.Millisecond))
		if err == nil || d > 10*time.Second {
			t.Errorf("%s under an ephemeral parent: %v after %v; want a prompt error", name, err, d.Round(time.Millisecond))
		}
	}
	try("Mutex.LockContext", func(c context.Context) error { _, err := dsync.NewMutex(s, p).LockContext(c); return err })
	try("Weighted.Acquire", func(c context.Context) error { return dsync.NewWeighted(s, p, 2).Acquire(c, 1) })
	try("Election.Campaign", func(c context.Context) error { _, err := dsync.NewElection(s, p).Campaign(c, "x"); return err })
	try("Once.Do", func(c context.Context) error {
		return dsync.NewOnce(s, p).Do(c, func(context.Context) error { return nil })
	})
	try("Count.Get", func(c context.Context) error { _, err := dsync.NewCount(s, p, 0).Get(c); return err })
}

// TestReviewR64OnceDataTooLarge: a Once whose WithData fits a lock node's
// create but not its record's transaction ran f, failed to record the run,
// and so ran f again at every Do. Do now refuses it before anything is
// sent; data that fits the record runs f once.
func TestReviewR64OnceDataTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	runs := 0
	f := func(context.Context) error { runs++; return nil }
	o := dsync.NewOnce(s, path, dsync.WithData(make([]byte, 1<<20-len(path)-100)))
	for range 2 {
		if err := o.Do(ctx, f); !errors.Is(err, zkconn.ErrTooLarge) {
			t.Errorf("Do = %v; want zkconn.ErrTooLarge", err)
		}
	}
	if runs != 0 {
		t.Errorf("f ran %d times; want 0", runs)
	}
	if ok, _, err := obs.Exists(path); err != nil || ok {
		t.Errorf("Exists(%s) = %v, %v; want nothing sent", path, ok, err)
	}
	o = dsync.NewOnce(s, path, dsync.WithData(make([]byte, 1<<20-len(path)-300)))
	for range 2 {
		if err := o.Do(ctx, f); err != nil {
			t.Fatalf("Do with data that fits = %v", err)
		}
	}
	if runs != 1 {
		t.Errorf("f ran %d times; want 1", runs)
	}
}

// TestReviewR65RevokeNodeOfLongestPath: a lock path of exactly 4096 bytes,
// the longest dsync takes, has nodes of 4152 bytes, which Revoke refused as
// longer than 4096: a revocable holder at a path dsync took could not be
// asked to release.
func TestReviewR65RevokeNodeOfLongestPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := longestPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	m := dsync.NewMutex(s, path, dsync.Revocable())
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatalf("LockContext on a %d-byte path = %v", len(path), err)
	}
	kids := awaitChildren(t, obs, path, 1)
	node := path + "/" + kids[0]
	if err := dsync.Revoke(ctx, s, node); err != nil {
		t.Errorf("Revoke of the holder's node (%d bytes, under a %d-byte lock path dsync took) = %v; want nil",
			len(node), len(path), err)
	} else {
		select {
		case <-dsync.Revoked(held):
		case <-ctx.Done():
			t.Error("revocation not seen")
		}
	}
	m.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestReviewR65StaleSignalsOutgrowRelease: W waits deep in line. Each node
// it follows is written to (a revocation request) and gone before W's next
// listing: W follows the next one, and the signal of the one gone stayed in
// e.fire with its watch set (follow reported no left for a write, so
// takeBack never ran). One per node ahead of W: with a path of 4096 bytes
// some 125 made W's release larger than ZooKeeper takes; go-zookeeper
// refused it (ErrTooLarge), zkconn deleted the node alone, every one of
// those watches stayed set on the server, and W's own handoff signal was
// not sent.
func TestReviewR65StaleSignalsOutgrowRelease(t *testing.T) {
	t.Parallel()
	const ahead = 130
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := longestPath(t)
	obs := observer(t, shared.Addr())
	sH, sW := dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()})
	h := dsync.NewMutex(sH, path)
	if _, err := h.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	hNode := path + "/" + awaitChildren(t, obs, path, 1)[0]
	// The nodes ahead of W: dsync-named (so W watches their signals),
	// made by the observer's session.
	var preds []string
	for range ahead {
		p, err := obs.Create(path+"/"+zkconn.ProtectedName("lock-"), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, p)
	}
	hW, err := sW.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := dsync.NewMutex(sW, path)
	wDone := make(chan error, 1)
	go func() { _, err := w.LockContext(ctx); wDone <- err }()
	for i := len(preds) - 1; i >= 0; i-- {
		p := preds[i]
		if err := shared.AwaitWatches(ctx, func(m map[string][]int64) bool {
			return slices.Contains(m[p], hW.ID()) && slices.Contains(m[p+".handoff"], hW.ID())
		}); err != nil {
			t.Fatalf("W does not follow node %d: %v", i, err)
		}
		// A revocation request, and the node gone before W lists again.
		if _, err := obs.Multi(
			&zk.SetDataRequest{Path: p, Data: []byte("__REVOKE__"), Version: -1},
			&zk.DeleteRequest{Path: p, Version: -1},
		); err != nil {
			t.Fatal(err)
		}
	}
	awaitWatch(t, shared, hNode, hW.ID())
	h.Unlock()
	if err := <-wDone; err != nil {
		t.Fatalf("W: %v", err)
	}
	w.Unlock()
	awaitChildren(t, obs, path, 0)
	var left []string
	for p, ids := range watches(t, shared) {
		if strings.HasPrefix(p, path+"/") && slices.Contains(ids, hW.ID()) {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		t.Errorf("%d nodes ahead of W: W released, and %d of its watches are still set on the server (signals never sent)", ahead, len(left))
	}
}

// TestReviewR65WeightedLeaseTooLarge: data for which the internal lock's
// create fits but the lease's transaction (a check of the lock node, then
// the create) does not: Acquire must fail with ErrTooLarge and leave no
// node behind (nor a hold).
func TestReviewR65WeightedLeaseTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	create := path + "/locks/" + zkconn.ProtectedName("lock-")
	d := 1<<20 - 1 - (8 + 4 + len(create) + 4 + 4 + (4 + 4 + 5 + 4 + 6) + 4)
	w := dsync.NewWeighted(s, path, 2, dsync.WithData(make([]byte, d)))
	err := w.Acquire(ctx, 1)
	if !errors.Is(err, zkconn.ErrTooLarge) {
		t.Errorf("Acquire = %v; want ErrTooLarge", err)
	}
	if err == nil {
		w.Release(1)
	}
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
	// and the semaphore still works with the same session
	w2 := dsync.NewWeighted(s, path, 2)
	if err := w2.Acquire(ctx, 2); err != nil {
		t.Fatalf("Acquire(2) after = %v", err)
	}
	w2.Release(2)
}

// TestReviewR65OncePlaceholderAfterWrap: Once.Do checked its record with a
// lock node numbered with 10 digits, but ZooKeeper names sequential nodes
// with String.format("%010d", cversion): after the parent's cversion wraps
// past 2^31, -2147483648 … -1000000000 take 11 characters. The largest
// WithData Do accepted then made a record go-zookeeper refuses: f ran, the
// record failed (ErrTooLarge), and the next Do ran f again. The lock node
// after the wrap is made by hand here (a parent's cversion cannot be moved
// 2^31 in a test); the record's transaction is sent as record() sends it.
func TestReviewR65OncePlaceholderAfterWrap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	done, stop := context.WithCancel(ctx)
	stop()
	accepts := func(n int) bool {
		err := dsync.NewOnce(s, path, dsync.WithData(make([]byte, n))).Do(done, func(context.Context) error { return nil })
		return errors.Is(err, context.Canceled)
	}
	n := 0
	for hi := 1 << 20; n+1 < hi; {
		if mid := (n + hi) / 2; accepts(mid) {
			n = mid
		} else {
			hi = mid
		}
	}
	for _, p := range []string{path, path + "/lock"} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	record := func(seq string) error {
		node, err := obs.Create(path+"/lock/"+zkconn.ProtectedName("lock-"+seq), nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		defer obs.Delete(node, -1)
		data := append(make([]byte, n), " at="+time.Now().UTC().Format(time.RFC3339)...)
		return h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Multi(
				&zk.CheckVersionRequest{Path: node, Version: -1},
				&zk.CreateRequest{Path: path + "/done", Data: data, Acl: s.ACL()},
			)
			if err == nil {
				c.Delete(path+"/done", -1)
			}
			return err
		})
	}
	if err := record("0000000042"); err != nil {
		t.Fatalf("the record of a run before the wrap, with the largest WithData Do takes (%d bytes) = %v", n, err)
	}
	for _, seq := range []string{"-2147483648", "-1000000000"} {
		if err := record(seq); err != nil {
			t.Errorf("Do takes WithData of %d bytes, but the record under lock node …-lock-%s = %v", n, seq, err)
		}
	}
	for _, p := range []string{path + "/lock", path} {
		obs.Delete(p, -1)
	}
}

// bytesCodec stores a []byte as it is.
type bytesCodec struct{}

func (bytesCodec) Encode(b []byte) ([]byte, error) { return b, nil }
func (bytesCodec) Decode(b []byte) ([]byte, error) { return b, nil }

// TestReviewR63DowngradeTooLarge: a downgrade's transaction carries the
// data of the write node and of the new read node; past what the server
// takes in one request it fails with zkconn.ErrTooLarge, and the write hold
// goes on.
func TestReviewR63DowngradeTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path, dsync.WithData(make([]byte, 600<<10)))
	held, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.RLockContext(held); !errors.Is(err, zkconn.ErrTooLarge) {
		t.Errorf("a downgrade with 600 KB of data = %v; want zkconn.ErrTooLarge", err)
	}
	if err := held.Err(); err != nil {
		t.Errorf("the write hold: %v", context.Cause(held))
	}
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Errorf("children %v; want the write node alone", kids)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}
