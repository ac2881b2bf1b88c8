package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 89: Election (election.go, participants.go) and Weighted
// (weighted.go) against faults at the exact request, give-ups at each
// step, operators' deletes and expiry.

// r89Overrun is how late after its ctx ends a call may return before the
// test calls it an overrun: generous, for a loaded machine.
const r89Overrun = 2 * time.Second

// r89Returns waits for res after cancel was called at ended, and fails if
// it came later than r89Overrun or with another error than want.
func r89Returns(t *testing.T, what string, res <-chan error, ended time.Time, want error) {
	t.Helper()
	err := reviewRecv(t, what, res)
	if d := time.Since(ended); d > r89Overrun {
		t.Errorf("%s returned %v after its ctx ended", what, d)
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v; want %v", what, err, want)
	}
}

// TestReviewR89CampaignGivesUpAtEachStep: b campaigns behind a leader a;
// the request of b's Campaign at each step (its create, the listing with
// it, the getData watch on a's node, the exists watch on a's handoff
// signal) is black-holed (not applied) or lost (applied, reply lost), and
// b's ctx ends then. Campaign returns context.Canceled at once; no node of
// b's is left once the connection is back; b campaigns again and leads
// after a resigns, alone.
//
// Serial at the top, its subtests side by side: they bound how late after
// its ctx a call returns (r89Overrun), which the load of the package's
// parallel tests could break.
func TestReviewR89CampaignGivesUpAtEachStep(t *testing.T) {
	type step struct {
		name  string
		match func(path, aNode string) zktest.Match
	}
	steps := []step{
		{"create", func(path, _ string) zktest.Match { return createOf(path) }},
		{"listing", func(path, _ string) zktest.Match { return zktest.Match{Op: zktest.OpGetChildren2, Path: path} }},
		{"prevWatch", func(path, aNode string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetData, Path: path + "/" + aNode}
		}},
		{"signalWatch", func(path, aNode string) zktest.Match {
			return zktest.Match{Op: zktest.OpExists, Path: path + "/" + aNode + ".handoff"}
		}},
	}
	for _, st := range steps {
		for _, act := range []zktest.Action{zktest.BlackHole, zktest.Lose, zktest.Cut} {
			t.Run(st.name+"/"+act.String(), func(t *testing.T) {
				t.Parallel()
				ctx, path, obs := r45Start(t)
				a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
				p, s := r45Proxied(t)
				b := dsync.NewElection(s, path)
				c := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
				// A waiting dsync node ahead of b: b's predecessor then is c's
				// node, native, deeper in line: the signal watch goes out.
				if _, err := a.Campaign(ctx, "a"); err != nil {
					t.Fatal(err)
				}
				cres := campaign(ctx, c, "c")
				kids := r38BySequence(awaitChildren(t, obs, path, 2))
				aNode, cNode := kids[0], kids[1]
				prev := cNode
				if st.name == "create" || st.name == "listing" {
					prev = aNode
				}
				f := p.Strike(st.match(path, prev), act)
				defer f.Disarm()
				bctx, bcancel := context.WithCancel(ctx)
				bres := campaign(bctx, b, "b")
				r38Struck(t, f, bres)
				bcancel()
				r89Returns(t, "b's Campaign", bres, time.Now(), context.Canceled)
				if act == zktest.BlackHole {
					p.Heal()
				}
				awaitChildren(t, obs, path, 2) // a's and c's only
				if b.Key() != "" {
					t.Fatalf("b's Key after giving up = %q", b.Key())
				}
				bres = campaign(ctx, b, "b")
				awaitChildren(t, obs, path, 3)
				r38Pending(t, "b's second Campaign", bres)
				if err := a.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				if err := reviewRecv(t, "c's Campaign", cres); err != nil {
					t.Fatal(err)
				}
				r38Pending(t, "b's second Campaign while c leads", bres)
				if err := c.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				if err := reviewRecv(t, "b's second Campaign", bres); err != nil {
					t.Fatal(err)
				}
				if l := leaderID(t, b); l != "b" {
					t.Fatalf("leader = %q; want b", l)
				}
				if err := b.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				awaitChildren(t, obs, path, 0)
				r38NoWatches(t, path, obs)
			})
		}
	}
}

// TestReviewR89OperatorDeletesCandidate: b waits behind a leader a; an
// operator deletes b's node. b queues again (a new node) and does not lead
// beside a; once a resigns b leads. Then the operator deletes the leader
// b's node: b's leadership context ends with ErrLockLost, c (waiting
// behind) leads, and b's Resign returns nil and leaves c leading.
func TestReviewR89OperatorDeletesCandidate(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	sb := dial(t, []string{shared.Addr()})
	b := dsync.NewElection(sb, path)
	c := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	if _, err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	type led struct {
		ctx context.Context
		err error
	}
	bres := make(chan led, 1)
	go func() {
		l, err := b.Campaign(ctx, "b")
		bres <- led{l, err}
	}()
	kids := r38BySequence(awaitChildren(t, obs, path, 2))
	bNode := path + "/" + kids[1]
	if err := obs.Delete(bNode, -1); err != nil {
		t.Fatal(err)
	}
	kids = r38BySequence(awaitChildren(t, obs, path, 2))
	if path+"/"+kids[1] == bNode {
		t.Fatalf("b's node %s still there", bNode)
	}
	awaitWatchOf(t, shared, path+"/"+kids[1], sb) // b follows a again, from its new node
	select {
	case r := <-bres:
		t.Fatalf("b's Campaign returned (%v) while a leads", r.err)
	default:
	}
	cres := campaign(ctx, c, "c")
	awaitChildren(t, obs, path, 3)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := reviewRecv(t, "b's Campaign", bres)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r38Pending(t, "c's Campaign while b leads", cres)
	if err := obs.Delete(b.Key(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.ctx.Done():
	case <-time.After(reviewBound):
		t.Fatal("b's leadership context not canceled")
	}
	if !errors.Is(context.Cause(r.ctx), dsync.ErrLockLost) {
		t.Fatalf("cause = %v; want ErrLockLost", context.Cause(r.ctx))
	}
	if err := reviewRecv(t, "c's Campaign", cres); err != nil {
		t.Fatal(err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := leaderID(t, c); l != "c" {
		t.Fatalf("leader = %q; want c", l)
	}
	if err := c.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR89WeightedGivesUpAtEachStep: a holds the only lease of a
// Weighted; b, through a proxy, acquires, and the request of each step (its
// internal lock's create, that lock's listing, its lease's create, the
// listing with it, the watched listing, the read of its lock node) is
// black-holed, lost or cut, and b's ctx ends then. Acquire returns
// context.Canceled at once; no node of b's is left; a's release lets b
// acquire, and then no one else (TryAcquire from c fails).
//
// Serial at the top, its subtests side by side: they bound how late after
// its ctx a call returns (r89Overrun), which the load of the package's
// parallel tests could break.
func TestReviewR89WeightedGivesUpAtEachStep(t *testing.T) {
	type step struct {
		name  string
		match func(path string) zktest.Match
		// nth: the fault strikes the nth matching request (earlier ones pass)
		nth int
	}
	steps := []step{
		{"lockCreate", func(path string) zktest.Match { return createOf(path + "/locks") }, 1},
		{"lockListing", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/locks"}
		}, 1},
		{"leaseCreate", func(path string) zktest.Match { return createOf(path + "/leases") }, 1},
		{"leaseListing", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}
		}, 1},
		{"watchedListing", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}
		}, 2},
		{"lockRead", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetData, Path: path + "/locks/", Prefix: true}
		}, 1},
	}
	for _, st := range steps {
		for _, act := range []zktest.Action{zktest.BlackHole, zktest.Lose, zktest.Cut} {
			t.Run(st.name+"/"+act.String(), func(t *testing.T) {
				t.Parallel()
				ctx, path, obs := r45Start(t)
				a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
				p, s := r45Proxied(t)
				b := dsync.NewWeighted(s, path, 1)
				c := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
				if err := a.Acquire(ctx, 1); err != nil {
					t.Fatal(err)
				}
				aLease := awaitChildren(t, obs, path+"/leases", 1)[0]
				var passes []*zktest.Fault
				for range st.nth - 1 {
					passes = append(passes, p.Strike(st.match(path), zktest.Pass))
				}
				f := p.Strike(st.match(path), act)
				defer f.Disarm()
				for _, x := range passes {
					defer x.Disarm()
				}
				bctx, bcancel := context.WithCancel(ctx)
				bres := make(chan error, 1)
				go func() { bres <- b.Acquire(bctx, 1) }()
				r38Struck(t, f, bres)
				bcancel()
				r89Returns(t, "b's Acquire", bres, time.Now(), context.Canceled)
				if act == zktest.BlackHole {
					p.Heal()
				}
				awaitChildren(t, obs, path+"/locks", 0)
				if kids := awaitChildren(t, obs, path+"/leases", 1); kids[0] != aLease {
					t.Fatalf("leases = %v; want a's %s", kids, aLease)
				}
				bres = make(chan error, 1)
				go func() { bres <- b.Acquire(ctx, 1) }()
				awaitChildren(t, obs, path+"/leases", 2) // b's waits
				r38Pending(t, "b's second Acquire", bres)
				a.Release(1)
				if err := reviewRecv(t, "b's second Acquire", bres); err != nil {
					t.Fatal(err)
				}
				if c.TryAcquire(1) {
					t.Fatalf("c acquired beside b; leases %v", children(t, obs, path+"/leases"))
				}
				b.Release(1)
				if err := c.Acquire(ctx, 1); err != nil {
					t.Fatal(err)
				}
				c.Release(1)
				awaitChildren(t, obs, path+"/leases", 0)
				awaitChildren(t, obs, path+"/locks", 0)
				r38NoWatches(t, path, obs)
			})
		}
	}
}

// TestReviewR89WeightedSecondLeaseCreateFault: Acquire(ctx, 2) of a
// semaphore of 2 whose second lease create (the first one's reply passes)
// is lost (applied, reply lost), cut or black-holed: the acquisition goes
// on after the reconnect and holds exactly two lease nodes, or, with its
// ctx ended at the fault, returns context.Canceled and leaves none. No one
// else gets a lease meanwhile.
//
// Serial at the top, its subtests side by side: they bound how late after
// its ctx a call returns (r89Overrun), which the load of the package's
// parallel tests could break.
func TestReviewR89WeightedSecondLeaseCreateFault(t *testing.T) {
	for _, giveUp := range []bool{false, true} {
		for _, act := range []zktest.Action{zktest.Lose, zktest.Cut, zktest.Drop, zktest.BlackHole} {
			t.Run(fmt.Sprintf("giveUp=%v/%v", giveUp, act), func(t *testing.T) {
				t.Parallel()
				ctx, path, obs := r45Start(t)
				p := zktest.NewProxy(t, shared.Addr())
				s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(3*time.Second))
				b := dsync.NewWeighted(s, path, 2)
				c := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
				m := createOf(path + "/leases")
				first := p.Strike(m, zktest.Pass)
				f := p.Strike(m, act)
				defer first.Disarm()
				defer f.Disarm()
				bctx, bcancel := context.WithCancel(ctx)
				defer bcancel()
				bres := make(chan error, 1)
				go func() { bres <- b.Acquire(bctx, 2) }()
				r38Struck(t, f, bres)
				if giveUp {
					bcancel()
					r89Returns(t, "b's Acquire", bres, time.Now(), context.Canceled)
					if act == zktest.BlackHole {
						p.Heal()
					}
					awaitChildren(t, obs, path+"/leases", 0)
					awaitChildren(t, obs, path+"/locks", 0)
					if err := c.Acquire(ctx, 2); err != nil {
						t.Fatal(err)
					}
					c.Release(2)
				} else {
					if act == zktest.BlackHole {
						p.Heal()
					}
					if err := reviewRecv(t, "b's Acquire", bres); err != nil {
						t.Fatal(err)
					}
					if kids := awaitChildren(t, obs, path+"/leases", 2); len(kids) != 2 {
						t.Fatalf("leases = %v", kids)
					}
					if c.TryAcquire(1) {
						t.Fatalf("c acquired beside b's 2; leases %v", children(t, obs, path+"/leases"))
					}
					b.Release(2)
				}
				awaitChildren(t, obs, path+"/leases", 0)
				awaitChildren(t, obs, path+"/locks", 0)
			})
		}
	}
}

// TestReviewR89ReleaseRacesAcquire: one Weighted w of one process, shared
// by goroutines as x/sync's is (DESIGN.md §1). G1 took n1 leases of w on a
// session since expired (their nodes are gone; a Release of them sends no
// request that is waited for, and is quick per lease). On the next
// session G2's w.Acquire(n2) has made its lease nodes and waits for room:
// another session c holds the rest. G1's Release(n1) takes its leases as
// the subslice held[len-n1:] of w.held, shrinks w.held over the same
// backing array, unlocks, and only then reads the subslice, one lease at a
// time. c releases one lease meanwhile: G2's Acquire returns and appends
// its n2 leases to w.held in place, over the slots of G1's subslice it has
// not read yet. G1 then deletes G2's live leases: G2 believes it holds n2,
// their nodes are gone, and c takes them again: more than max in use.
func TestReviewR89ReleaseRacesAcquire(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	const n1, n2, max = 2000, 500, 600
	p, s := r89Short(t)
	other := dial(t, []string{shared.Addr()})
	count := dsync.NewCount(other, path+"-max", n1)
	if err := count.Set(ctx, n1); err != nil {
		t.Fatal(err)
	}
	w := dsync.NewWeightedCount(s, path, dsync.NewCount(s, path+"-max", n1))
	c := dsync.NewWeightedCount(other, path, count)
	if err := w.Acquire(ctx, n1); err != nil {
		t.Fatal(err)
	}
	r89Expire(t, p, s, obs, path+"/leases")
	if err := count.Set(ctx, max); err != nil {
		t.Fatal(err)
	}
	if err := c.Acquire(ctx, max-n2+1); err != nil {
		t.Fatal(err)
	}
	g2 := make(chan error, 1)
	go func() { g2 <- w.Acquire(ctx, n2) }()
	awaitChildren(t, obs, path+"/leases", max+1) // G2's nodes made: it waits
	awaitClientWatch(t, connOf(t, s), path+"/leases", g2)
	// G2's next listing is the one after c's release, which finds room:
	// G1 releases as its reply comes back, before G2 has read it.
	wake := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}, zktest.Pass)
	defer wake.Disarm()
	c.Release(1)
	r38Struck(t, wake, g2)
	g1 := make(chan struct{})
	start := time.Now()
	var g1At time.Time
	go func() {
		defer close(g1)
		w.Release(n1) // the expired session's leases
		g1At = time.Now()
	}()
	reviewRecv(t, "G1's Release", g1)
	if err := reviewRecv(t, "G2's Acquire", g2); err != nil {
		t.Fatal(err)
	}
	t.Logf("G1's Release(%d) returned after %v", n1, g1At.Sub(start))
	// G2 holds n2 leases, c max-n2: max nodes, and no room for c.
	if kids := children(t, obs, path+"/leases"); len(kids) != max {
		t.Errorf("leases while G2 holds %d and c %d: %d nodes", n2, max-n2, len(kids))
	}
	if c.TryAcquire(1) {
		t.Errorf("c acquired a lease beside G2's %d and its own %d (max %d)",
			n2, max-n2, max)
		c.Release(1)
	}
	released := make(chan any, 1)
	go func() {
		defer func() { released <- recover() }()
		w.Release(n2)
	}()
	if v := reviewRecv(t, "G2's Release", released); v != nil {
		t.Fatalf("G2's Release(%d) of the leases its Acquire returned panicked: %v", n2, v)
	}
	c.Release(max - n2)
	awaitChildren(t, obs, path+"/leases", 0)
}

// TestReviewR89ReleaseFreesLiveLeaseOverLost: a Weighted of 1 used by two
// goroutines of one process, x/sync style. A acquires on session 1, which
// expires (A is not told: Acquire returns no context). B acquires on
// session 2: its lease is live. A, done, calls Release(1): Release takes
// the newest lease, B's live one, and deletes it, and keeps A's lost one.
// B still works under a lease it never lost, and another process c
// acquires beside it: two holders of a semaphore of 1, both sessions live.
func TestReviewR89ReleaseFreesLiveLeaseOverLost(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	p, s := r89Short(t)
	w := dsync.NewWeighted(s, path, 1)
	c := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	if err := w.Acquire(ctx, 1); err != nil { // A
		t.Fatal(err)
	}
	r89Expire(t, p, s, obs, path+"/leases")   // A's lease goes with session 1
	if err := w.Acquire(ctx, 1); err != nil { // B, on session 2
		t.Fatal(err)
	}
	bLease := awaitChildren(t, obs, path+"/leases", 1)[0]
	w.Release(1) // A, done
	if c.TryAcquire(1) {
		t.Errorf("c acquired while B holds its live lease %s (A's release deleted it; leases now %v)",
			bLease, children(t, obs, path+"/leases"))
		c.Release(1)
	}
	w.Release(1) // B, done
	awaitChildren(t, obs, path+"/leases", 0)
}

// TestReviewR89RUnlockEndsLostReadFirst: RUnlock's form of the same
// defect. Two goroutines of one process share an RWMutex: A's RLock was on
// session 1, which expired (A is not told: RLock watches nothing); B's is on
// session 2. A, done, calls RUnlock: it must end A's lost read hold, not
// B's live one, or a writer of another process holds while B reads.
func TestReviewR89RUnlockEndsLostReadFirst(t *testing.T) {
	t.Parallel()
	_, path, obs := r45Start(t)
	p, s := r89Short(t)
	rw := dsync.NewRWMutex(s, path)
	other := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	rw.RLock()                    // A
	r89Expire(t, p, s, obs, path) // A's read node goes with session 1
	rw.RLock()                    // B, on session 2
	bNode := awaitChildren(t, obs, path, 1)[0]
	rw.RUnlock() // A, done
	if other.TryLock() {
		t.Errorf("another process's writer holds while B reads (A's RUnlock deleted B's node %s; children now %v)",
			bNode, children(t, obs, path))
		other.Unlock()
	}
	rw.RUnlock() // B, done
	awaitChildren(t, obs, path, 0)
	if !other.TryLock() {
		t.Fatal("no writer holds once every read hold has ended")
	}
	other.Unlock()
}

// TestReviewR89ObserveFinalLeaderAfterPartition: an Observe loop through a
// proxy has yielded leader a; its connection is partitioned (black hole)
// while a resigns, b leads and resigns, and c leads; the partition heals
// (the connection closes, the session reconnects: with expire set, only
// after the session expired). Observe yields c next, never b, and nothing
// after c.
func TestReviewR89ObserveFinalLeaderAfterPartition(t *testing.T) {
	t.Parallel()
	for _, expire := range []bool{false, true} {
		t.Run(fmt.Sprintf("expire=%v", expire), func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			p := zktest.NewProxy(t, shared.Addr())
			timeout := 20 * time.Second
			if expire {
				timeout = 2 * time.Second
			}
			s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(timeout))
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			got := r77Observe(t, octx, dsync.NewElection(s, path))
			ls := dial(t, []string{shared.Addr()})
			a, b, c := dsync.NewElection(ls, path), dsync.NewElection(ls, path), dsync.NewElection(ls, path)
			if _, err := a.Campaign(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			r77Reported(t, ctx, got, "a")
			aNode := a.Key()
			awaitWatchOf(t, shared, aNode, s)
			old := sessionID(t, s)
			sub := s.Subscribe()
			defer sub.Stop()
			p.BlackHole()
			if err := a.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Campaign(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			if err := b.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Campaign(ctx, "c"); err != nil {
				t.Fatal(err)
			}
			if expire {
				// zkconn gives the session up shortly before the
				// session timeout since the server last heard from it;
				// the server expires it then.
				awaitState(t, sub, zkconn.StateLost)
			}
			p.Heal()
			r77Reported(t, ctx, got, "c")
			// Nothing after c: the next yield is the next leader's.
			d := dsync.NewElection(ls, path)
			dres := make(chan error, 1)
			go func() { _, err := d.Campaign(ctx, "d"); dres <- err }()
			awaitChildren(t, obs, path, 2)
			if err := c.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if err := reviewRecv(t, "d's Campaign", dres); err != nil {
				t.Fatal(err)
			}
			r77Reported(t, ctx, got, "d")
			if expire && sessionID(t, s) == old {
				t.Fatalf("session %#x not expired", old)
			}
			ocancel()
			for range got {
			}
			if err := d.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewR89CountLoweredWhileWaiting: a Weighted on a shared count of
// 3; a holds 2 (its own session), b waits to acquire 2. The count goes
// down to 1: a's releases never let b in (2 > 1) and c's TryAcquire(1)
// fails while b's leases wait; the count goes up to 2 and b acquires; c
// still cannot.
func TestReviewR89CountLoweredWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, path, obs := r45Start(t)
	sa, sb, sc := dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()})
	count := dsync.NewCount(sa, path+"-max", 3)
	if err := count.Set(ctx, 3); err != nil {
		t.Fatal(err)
	}
	a := dsync.NewWeightedCount(sa, path, count)
	b := dsync.NewWeightedCount(sb, path, dsync.NewCount(sb, path+"-max", 3))
	c := dsync.NewWeightedCount(sc, path, dsync.NewCount(sc, path+"-max", 3))
	if err := a.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	bres := make(chan error, 1)
	go func() { bres <- b.Acquire(ctx, 2) }()
	awaitChildren(t, obs, path+"/leases", 4)
	if err := count.Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	a.Release(1)
	awaitChildren(t, obs, path+"/leases", 3)
	r38Pending(t, "b's Acquire (count 1)", bres)
	a.Release(1)
	awaitChildren(t, obs, path+"/leases", 2)
	r38Pending(t, "b's Acquire (count 1, a gone)", bres)
	if c.TryAcquire(1) {
		t.Fatal("c acquired while b's leases wait")
	}
	if err := count.Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := reviewRecv(t, "b's Acquire (count 2)", bres); err != nil {
		t.Fatal(err)
	}
	if c.TryAcquire(1) {
		t.Fatal("c acquired beside b's 2 (count 2)")
	}
	b.Release(2)
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
}

// TestReviewR89WeightedRidesOutEachStep: as TestReviewR89WeightedGivesUpAtEachStep,
// with b's ctx alive: the request of each step is lost, cut or its reply
// dropped, and b goes on after the reconnect. b waits while a holds, and
// acquires once a releases, with one lease node and no lock node left;
// c's TryAcquire fails beside it.
func TestReviewR89WeightedRidesOutEachStep(t *testing.T) {
	t.Parallel()
	type step struct {
		name  string
		match zktest.Match
		nth   int
	}
	steps := func(path string) []step {
		return []step{
			{"lockCreate", createOf(path + "/locks"), 1},
			{"lockListing", zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/locks"}, 1},
			{"leaseCreate", createOf(path + "/leases"), 1},
			{"leaseListing", zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}, 1},
			{"watchedListing", zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}, 2},
			{"lockRead", zktest.Match{Op: zktest.OpGetData, Path: path + "/locks/", Prefix: true}, 1},
			{"wakeListing", zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}, 3},
			{"lockDelete", zktest.Match{Op: zktest.OpDelete, Path: path + "/locks/", Prefix: true}, 1},
		}
	}
	for i := range steps("") {
		for _, act := range []zktest.Action{zktest.Lose, zktest.Cut, zktest.Drop} {
			t.Run(steps("")[i].name+"/"+act.String(), func(t *testing.T) {
				t.Parallel()
				ctx, path, obs := r45Start(t)
				st := steps(path)[i]
				a := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
				p, s := r45Proxied(t)
				b := dsync.NewWeighted(s, path, 1)
				c := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
				if err := a.Acquire(ctx, 1); err != nil {
					t.Fatal(err)
				}
				awaitChildren(t, obs, path+"/leases", 1)
				var faults []*zktest.Fault
				for range st.nth - 1 {
					faults = append(faults, p.Strike(st.match, zktest.Pass))
				}
				f := p.Strike(st.match, act)
				faults = append(faults, f)
				for _, x := range faults {
					defer x.Disarm()
				}
				bres := make(chan error, 1)
				go func() { bres <- b.Acquire(ctx, 1) }()
				if st.name == "wakeListing" || st.name == "lockDelete" {
					awaitChildren(t, obs, path+"/leases", 2)
					awaitClientWatch(t, connOf(t, s), path+"/leases", bres)
					a.Release(1)
					if st.name == "lockDelete" {
						// Acquire does not wait for its internal lock's delete.
						if err := reviewRecv(t, "b's Acquire", bres); err != nil {
							t.Fatal(err)
						}
						bres <- nil
						r38Struck(t, f, (chan error)(nil))
					} else {
						r38Struck(t, f, bres)
					}
				} else {
					r38Struck(t, f, bres)
					awaitChildren(t, obs, path+"/leases", 2)
					awaitClientWatch(t, connOf(t, s), path+"/leases", bres)
					a.Release(1)
				}
				if err := reviewRecv(t, "b's Acquire", bres); err != nil {
					t.Fatal(err)
				}
				awaitChildren(t, obs, path+"/locks", 0)
				awaitChildren(t, obs, path+"/leases", 1)
				if c.TryAcquire(1) {
					t.Fatalf("c acquired beside b; leases %v", children(t, obs, path+"/leases"))
				}
				b.Release(1)
				awaitChildren(t, obs, path+"/leases", 0)
				awaitChildren(t, obs, path+"/locks", 0)
			})
		}
	}
}

// r89Short returns a Session through a fresh proxy with a 2s session
// timeout, which r89Expire ends within a few seconds.
func r89Short(t *testing.T) (*zktest.Proxy, *zkconn.Session) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	return p, dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second))
}

// r89Expire black-holes p, through which s is connected, until zkconn
// gives s's ZooKeeper session up and the server has expired it (no node of
// it is left under parent), then heals p: s's next request goes on a new
// session.
func r89Expire(t *testing.T, p *zktest.Proxy, s *zkconn.Session, obs *zk.Conn, parent string) {
	t.Helper()
	sub := s.Subscribe()
	defer sub.Stop()
	p.BlackHole()
	awaitState(t, sub, zkconn.StateLost)
	awaitChildren(t, obs, parent, 0)
	p.Heal()
}

// TestReviewR89LeaderExpiresBeforeNextLeads: a leads through a proxy,
// under each LossPolicy, with b waiting on another session; a's connection
// is partitioned until its session expires. When b's Campaign returns, a's
// leadership context is canceled already (a cause wrapping ErrLockLost),
// and a's Resign then leaves b leading.
func TestReviewR89LeaderExpiresBeforeNextLeads(t *testing.T) {
	t.Parallel()
	for name, policy := range map[string]dsync.LossPolicy{"LostOnSuspension": dsync.LostOnSuspension, "LostOnExpiry": dsync.LostOnExpiry} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, path, obs := r45Start(t)
			p, s := r89Short(t)
			a := dsync.NewElection(s, path, dsync.WithLossPolicy(policy))
			b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			led, err := a.Campaign(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			bres := campaign(ctx, b, "b")
			awaitChildren(t, obs, path, 2)
			p.BlackHole()
			if err := reviewRecv(t, "b's Campaign", bres); err != nil {
				t.Fatal(err)
			}
			select {
			case <-led.Done():
			default:
				t.Fatalf("b leads while a's leadership context is live")
			}
			if !errors.Is(context.Cause(led), dsync.ErrLockLost) {
				t.Fatalf("cause = %v; want ErrLockLost", context.Cause(led))
			}
			p.Heal()
			if err := a.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if l := leaderID(t, b); l != "b" {
				t.Fatalf("leader = %q; want b", l)
			}
			if err := b.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 0)
		})
	}
}
