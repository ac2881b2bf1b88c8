package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 38: the tap's out-of-turn close against Value/Count,
// Election, Once, MultiLock, revocation and Participants.

// reviewBound is the bound of every wait of the review rounds' tests from
// round 38 on: one that passes it fails the test rather than hang.
const reviewBound = 30 * time.Second

// r38Struck waits until f has struck, failing if res (nil: none) yields
// first or the bound passes.
func r38Struck[T any](t *testing.T, f *zktest.Fault, res <-chan T) {
	t.Helper()
	select {
	case <-f.Struck():
	case r := <-res:
		t.Fatalf("the call returned (%v) before the fault struck", r)
	case <-time.After(reviewBound):
		t.Fatal("the fault never struck")
	}
}

// reviewRecv receives from ch within the bound.
func reviewRecv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(reviewBound):
		t.Fatalf("%s did not return within %v", what, reviewBound)
		panic("unreachable")
	}
}

// r38Count returns a Count at a fresh path holding 1 at version 0, on a
// Session through a proxy, with a session timeout long enough that no ping
// comes (and closes the connection) within a test's few steps.
func r38Count(t *testing.T) (p *zktest.Proxy, s *zkconn.Session, c *dsync.Count, obs *zk.Conn, path string) {
	t.Helper()
	path = valuePath(t) + "/count"
	obs = observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{0, 0, 0, 1})
	p = zktest.NewProxy(t, shared.Addr())
	s = dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(30*time.Second))
	return p, s, dsync.NewCount(s, path, 1), obs, path
}

// TestReviewR38WriteReplySwallowedThenCloseUnknown: a CompareAndSet or Set
// is applied, its reply swallowed (Drop), and the Session is closed before
// the tap notices: the write's error wraps ErrOutcomeUnknown, with a ctx
// that can never end (the request runs inline; go-zookeeper's request
// returns zk.ErrConnectionClosed once Close starts, not zk.ErrClosing) and
// with one that can (callOr sees the loss first).
func TestReviewR38WriteReplySwallowedThenCloseUnknown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ctx   func() context.Context
		write func(ctx context.Context, c *dsync.Count) error
	}{
		{"CompareAndSet/Background", context.Background, func(ctx context.Context, c *dsync.Count) error {
			ok, err := c.CompareAndSet(ctx, dsync.Versioned[int32]{Value: 1, Version: 0}, 6)
			if ok {
				return errors.New("swapped")
			}
			return err
		}},
		{"Set/Background", context.Background, func(ctx context.Context, c *dsync.Count) error { return c.Set(ctx, 6) }},
		{"CompareAndSet/WithCancel", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			return ctx
		}, func(ctx context.Context, c *dsync.Count) error {
			ok, err := c.CompareAndSet(ctx, dsync.Versioned[int32]{Value: 1, Version: 0}, 6)
			if ok {
				return errors.New("swapped")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s, c, obs, path := r38Count(t)
			f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Drop)
			defer f.Disarm()
			res := make(chan error, 1)
			ctx := tc.ctx()
			go func() { res <- tc.write(ctx, c) }()
			r38Struck(t, f, res)
			assertNode(t, obs, path, 6, 1) // applied
			s.Close()
			err := reviewRecv(t, "the write", res)
			if !errors.Is(err, dsync.ErrOutcomeUnknown) {
				t.Fatalf("%s applied, its reply swallowed, then Session.Close = %v; want an error wrapping ErrOutcomeUnknown "+
					"(the node holds the write: it is not \"not written\")", tc.name, err)
			}
		})
	}
}

// r38Fast returns a Session through a new proxy with a 3s session timeout:
// a ping each second, whose reply closes a connection on which a reply was
// swallowed.
func r38Fast(t *testing.T) (*zktest.Proxy, *zkconn.Session) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	return p, dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(3*time.Second))
}

// TestReviewR38GetReplySwallowed: Get's sync, or its getData, is answered
// and the reply swallowed on a live connection: the tap closes the
// connection at the next reply (a ping's), Do sends the read again, and Get
// returns the value, the node written once.
func TestReviewR38GetReplySwallowed(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, op := range []zktest.Op{zktest.OpSync, zktest.OpGetData} {
		t.Run(op.String(), func(t *testing.T) {
			path := valuePath(t) + "/count"
			obs := observer(t, shared.Addr())
			createRaw(t, obs, path, []byte{0, 0, 0, 7})
			p, s := r38Fast(t)
			c := dsync.NewCount(s, path, 1)
			f := p.Strike(zktest.Match{Op: op, Path: path}, zktest.Drop)
			defer f.Disarm()
			type got struct {
				v   dsync.Versioned[int32]
				err error
			}
			res := make(chan got, 1)
			ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
			defer cancel()
			go func() {
				v, err := c.Get(ctx)
				res <- got{v, err}
			}()
			r38Struck(t, f, res)
			g := reviewRecv(t, "Get", res)
			if g.err != nil || g.v.Value != 7 || g.v.Version != 0 {
				t.Fatalf("Get with its %s reply swallowed = %+v, %v; want 7 at version 0", op, g.v, g.err)
			}
			assertNode(t, obs, path, 7, 0)
		})
	}
}

// TestReviewR38WatchReplySwallowed: a Watch loop's getData (with its watch)
// is answered and the reply swallowed: the loop yields the value once the
// read is sent again on the next connection, then a write made by another
// session, and the session holds one watch on the node on the server (the
// one set on the swallowed request went with its connection).
func TestReviewR38WatchReplySwallowed(t *testing.T) {
	path := valuePath(t) + "/count"
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{0, 0, 0, 1})
	p, s := r38Fast(t)
	c := dsync.NewCount(s, path, 1)
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path}, zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	seen := make(chan dsync.Versioned[int32], 4)
	ended := make(chan error, 1)
	go func() {
		var last error
		for v, err := range c.Watch(ctx) {
			if err != nil {
				last = err
				continue
			}
			seen <- v
		}
		ended <- last
	}()
	r38Struck(t, f, seen)
	if v := reviewRecv(t, "the first value", seen); v.Value != 1 || v.Version != 0 {
		t.Fatalf("Watch yielded %+v first; want 1 at version 0", v)
	}
	awaitWatchOf(t, shared, path, s)
	if _, err := obs.Set(path, []byte{0, 0, 0, 2}, 0); err != nil {
		t.Fatal(err)
	}
	if v := reviewRecv(t, "the value after a write", seen); v.Value != 2 || v.Version != 1 {
		t.Fatalf("Watch yielded %+v after the write; want 2 at version 1", v)
	}
	id := awaitWatchOf(t, shared, path, s)
	n := 0
	for _, w := range watches(t, shared)[path] {
		if w == id {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the session holds %d watches on %s on the server; want 1", n, path)
	}
	cancel()
	if err := reviewRecv(t, "the Watch loop", ended); err != nil {
		t.Errorf("Watch yielded an error: %v", err)
	}
}

// r38NoWatches waits until no session but obs's watches path or a node
// below it, failing at the bound.
func r38NoWatches(t *testing.T, path string, obs *zk.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	if err := shared.AwaitWatches(ctx, func(m map[string][]int64) bool {
		for p, ids := range m {
			if p == path || len(p) > len(path) && p[:len(path)+1] == path+"/" {
				for _, id := range ids {
					if id != obs.SessionID() {
						return false
					}
				}
			}
		}
		return true
	}); err != nil {
		t.Fatalf("watches left: %v", watchesUnder(t, path, obs))
	}
}

// r38BySequence sorts node names by their 10-digit sequence suffix.
func r38BySequence(names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	return out
}

// r38Pending fails if res has a result.
func r38Pending(t *testing.T, what string, res <-chan error) {
	t.Helper()
	select {
	case err := <-res:
		t.Fatalf("%s returned %v while another participant leads", what, err)
	default:
	}
}

// TestReviewR38CampaignReplySwallowed: b campaigns third in line (a leads,
// c waits) and the reply to one of its requests is swallowed on a live
// connection: its create, the listing sent with it, the first getData
// (its own node's watch or its predecessor's), or the exists watch on c's
// handoff signal. In one case b's session is then lost before it has
// listed again (as a loaded machine's CI once did): b waits again, last,
// on the next session. b leads only once a and c have resigned, with one
// node, and nothing is left (nodes, watches) after b resigns.
func TestReviewR38CampaignReplySwallowed(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	listing := func(path string) zktest.Match { return zktest.Match{Op: zktest.OpGetChildren2, Path: path} }
	for _, tc := range []struct {
		name  string
		match func(path string) zktest.Match
		lose  bool // b's session is lost once the fault has struck
	}{
		{"create", createOf, false},
		{"listing", listing, false},
		{"listing, session lost", listing, true},
		{"getData", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}
		}, false},
		{"exists", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpExists, Path: path + "/", Prefix: true}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			c := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			p, s := r38Fast(t)
			b := dsync.NewElection(s, path)
			if _, err := a.Campaign(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			cres := campaign(ctx, c, "c")
			awaitChildren(t, obs, path, 2)
			f := p.Strike(tc.match(path), zktest.Drop)
			defer f.Disarm()
			bres := campaign(ctx, b, "b")
			r38Struck(t, f, bres)
			kids := r38BySequence(awaitChildren(t, obs, path, 3))
			cNode := path + "/" + kids[1]
			if tc.lose {
				hsLose(t, p, s)
			}
			awaitWatchOf(t, shared, cNode, s) // b waits behind c
			r38Pending(t, "b's Campaign", bres)
			if err := a.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if err := reviewRecv(t, "c's Campaign", cres); err != nil {
				t.Fatalf("c's Campaign = %v", err)
			}
			r38Pending(t, "b's Campaign", bres)
			if got := leaderID(t, c); got != "c" {
				t.Fatalf("leader %q; want c", got)
			}
			if err := c.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if err := reviewRecv(t, "b's Campaign", bres); err != nil {
				t.Fatalf("b's Campaign = %v", err)
			}
			if kids := children(t, obs, path); len(kids) != 1 || path+"/"+kids[0] != b.Key() {
				t.Fatalf("children %v; want b's node %s alone", kids, b.Key())
			}
			if got := leaderID(t, a); got != "b" {
				t.Fatalf("leader %q; want b", got)
			}
			if err := b.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 0)
			r38NoWatches(t, path, obs)
		})
	}
}

// TestReviewR38CampaignGivenUpThenAgain: b's Campaign, behind a, is given
// up (ctx canceled) once its create is applied and its reply swallowed;
// b campaigns again at once. The given-up node goes (its create is
// recovered or forgotten), b's second node waits behind a, leads only
// after a resigns, and is b's only node.
func TestReviewR38CampaignGivenUpThenAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	p, s := r38Fast(t)
	b := dsync.NewElection(s, path)
	if _, err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	f := p.Strike(createOf(path), zktest.Drop)
	defer f.Disarm()
	bctx, bcancel := context.WithCancel(ctx)
	bres := campaign(bctx, b, "b")
	r38Struck(t, f, bres)
	gaveUp := path + "/" + r38BySequence(awaitChildren(t, obs, path, 2))[1]
	bcancel()
	if err := reviewRecv(t, "b's Campaign", bres); !errors.Is(err, context.Canceled) {
		t.Fatalf("b's Campaign given up = %v; want context.Canceled", err)
	}
	bres = campaign(ctx, b, "b")
	if !r34Gone(t, obs, gaveUp, reviewBound) {
		t.Fatalf("the given-up node %s is still there", gaveUp)
	}
	kids := r38BySequence(awaitChildren(t, obs, path, 2)) // a's, and b's second node alone
	bNode := path + "/" + kids[1]
	awaitWatchOf(t, shared, path+"/"+kids[0], s)
	r38Pending(t, "b's second Campaign", bres)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reviewRecv(t, "b's second Campaign", bres); err != nil {
		t.Fatalf("b's second Campaign = %v", err)
	}
	if b.Key() != bNode {
		t.Fatalf("b leads with %s; want %s", b.Key(), bNode)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR38ResignDeleteReplyLostThenCampaign: b leads and resigns
// with a done ctx (as "dsync elect" does), the reply to its delete
// swallowed (Drop: applied) or the delete cut (Cut: not applied, sent
// again); b campaigns again at once while c waits. No two leaders: c leads
// (it was next), b's new node waits behind c, and leads once c resigns.
func TestReviewR38ResignDeleteReplyLostThenCampaign(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, action := range []zktest.Action{zktest.Drop, zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			p, s := r38Fast(t)
			b := dsync.NewElection(s, path)
			cs := dial(t, []string{shared.Addr()})
			c := dsync.NewElection(cs, path)
			if _, err := b.Campaign(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			bNode := b.Key()
			cres := campaign(ctx, c, "c")
			awaitChildren(t, obs, path, 2)
			awaitWatchOf(t, shared, bNode, cs)
			f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: bNode}, action)
			defer f.Disarm()
			done, stop := context.WithCancel(ctx)
			stop()
			if err := b.Resign(done); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("Resign = %v", err)
			}
			bres := campaign(ctx, b, "b")
			if err := reviewRecv(t, "c's Campaign", cres); err != nil {
				t.Fatalf("c's Campaign = %v", err)
			}
			r38Struck(t, f, bres)
			awaitChildren(t, obs, path, 2) // c's, and b's new node
			r38Pending(t, "b's Campaign", bres)
			if got := leaderID(t, c); got != "c" {
				t.Fatalf("leader %q; want c", got)
			}
			if err := c.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if err := reviewRecv(t, "b's Campaign", bres); err != nil {
				t.Fatalf("b's Campaign = %v", err)
			}
			if kids := children(t, obs, path); len(kids) != 1 || path+"/"+kids[0] != b.Key() {
				t.Fatalf("children %v; want b's new node %s alone", kids, b.Key())
			}
			if err := b.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 0)
			r38NoWatches(t, path, obs)
		})
	}
}

// TestReviewR38ObserveReplySwallowed: Observe on a path nobody has
// campaigned on yet; the reply to its exists watch on the path is
// swallowed, and later the reply to its getData of the new leader's node.
// It yields a when a campaigns and b when a resigns, nothing else, and
// leaves no watch once b resigns.
func TestReviewR38ObserveReplySwallowed(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p, s := r38Fast(t)
	o := dsync.NewElection(s, path)
	a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, zktest.Pass) // the read without a watch first
	f := p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, zktest.Drop)
	defer f.Disarm()
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen := make(chan string, 8)
	ended := make(chan error, 1)
	go func() {
		var last error
		for l, err := range o.Observe(octx) {
			if err != nil {
				last = err
				continue
			}
			seen <- string(l.Data)
		}
		ended <- last
	}()
	r38Struck(t, f, seen)
	awaitWatchOf(t, shared, path, s) // set again on the next connection
	if _, err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := reviewRecv(t, "the first leader", seen); got != "a" {
		t.Fatalf("Observe yielded %q; want a", got)
	}
	g := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}, zktest.Drop)
	defer g.Disarm()
	bres := campaign(ctx, b, "b")
	awaitChildren(t, obs, path, 2)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reviewRecv(t, "b's Campaign", bres); err != nil {
		t.Fatal(err)
	}
	r38Struck(t, g, seen)
	if got := reviewRecv(t, "the second leader", seen); got != "b" {
		t.Fatalf("Observe yielded %q; want b", got)
	}
	ocancel()
	if err := reviewRecv(t, "the Observe loop", ended); err != nil {
		t.Errorf("Observe yielded an error: %v", err)
	}
	select {
	case got := <-seen:
		t.Errorf("Observe yielded %q more", got)
	default:
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	r38NoWatches(t, path, obs)
}

// TestReviewR38OnceReplySwallowed: the reply to one of Once.Do's requests
// is swallowed on a live connection — the record's getData (Done), the
// lock's create, its listing, the watch on its node, the listing under the
// lock (state), the record's multi, the lock node's delete — and another
// process calls Do as soon as the fault has struck. f runs once in all,
// the run is recorded, a Do that fails fails before f with ErrLockLost, and
// nothing is left under the lock.
func TestReviewR38OnceReplySwallowed(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, tc := range []struct {
		name  string
		match func(path string) zktest.Match
	}{
		{"done-getData", func(path string) zktest.Match { return zktest.Match{Op: zktest.OpGetData, Path: path + "/done"} }},
		{"lock-create", func(path string) zktest.Match { return createOf(path + "/lock") }},
		{"lock-listing", func(path string) zktest.Match { return zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/lock"} }},
		{"lock-watch", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetData, Path: path + "/lock/", Prefix: true}
		}},
		{"state", func(path string) zktest.Match { return zktest.Match{Op: zktest.OpGetChildren2, Path: path} }},
		{"record", func(path string) zktest.Match { return zktest.Match{Op: zktest.OpMulti, Path: path + "/done"} }},
		{"unlock", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpDelete, Path: path + "/lock/", Prefix: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			p, s := r38Fast(t)
			a := dsync.NewOnce(s, path)
			b := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
			var runs atomic.Int32
			f := func(context.Context) error { runs.Add(1); return nil }
			fault := p.Strike(tc.match(path), zktest.Drop)
			defer fault.Disarm()
			ares := make(chan error, 1)
			go func() { ares <- a.Do(ctx, f) }()
			if tc.name == "unlock" { // Do returns once the delete has gone out
				r38Struck[error](t, fault, nil)
			} else {
				r38Struck(t, fault, ares)
			}
			bres := make(chan error, 1)
			go func() { bres <- b.Do(ctx, f) }()
			for who, res := range map[string]chan error{"a": ares, "b": bres} {
				if err := reviewRecv(t, who+"'s Do", res); err != nil && !errors.Is(err, dsync.ErrLockLost) {
					t.Errorf("%s's Do = %v; want nil or ErrLockLost", who, err)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("f ran %d times; want 1", n)
			}
			if done, err := b.Done(ctx); err != nil || !done {
				t.Fatalf("Done = %v, %v; want true", done, err)
			}
			if err := a.Do(ctx, f); err != nil || runs.Load() != 1 {
				t.Fatalf("Do after the run = %v, f ran %d times; want nil, 1", err, runs.Load())
			}
			awaitChildren(t, obs, path+"/lock", 0)
		})
	}
}

// TestReviewR38MultiLockTryReplySwallowed: a MultiLock of a Mutex, a
// SemaphoreMutex and a Mutex on one Session; the reply to the create of the
// last member, or of the SemaphoreMutex's lease, is swallowed on a live
// connection while the members before it are held (their holds are lost
// as the tap closes the connection, and the MultiLock takes them all
// again). TryLock, with nothing else holding, returns true with one node
// per member; Unlock leaves nothing.
func TestReviewR38MultiLockTryReplySwallowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(path string) zktest.Match
	}{
		{"last-create", func(path string) zktest.Match { return createOf(path + "/c") }},
		{"lease-create", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpCreate, Path: path + "/b/leases/", Prefix: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			p, s := r38Fast(t)
			ml := dsync.NewMultiLock(multiMembers(s, path))
			f := p.Strike(tc.match(path), zktest.Drop)
			defer f.Disarm()
			res := make(chan bool, 1)
			go func() { res <- ml.TryLock() }()
			r38Struck(t, f, res)
			if !reviewRecv(t, "TryLock", res) {
				t.Fatalf("TryLock with nothing else holding = false; children a %v, b/leases %v, c %v",
					children(t, obs, path+"/a"), children(t, obs, path+"/b/leases"), children(t, obs, path+"/c"))
			}
			for _, m := range []string{"a", "b/leases", "c"} {
				if kids := children(t, obs, path+"/"+m); len(kids) != 1 {
					t.Errorf("children of %s while held = %v; want one", m, kids)
				}
			}
			ml.Unlock()
			awaitMultiEmpty(t, path)
		})
	}
}

// TestReviewR38OnceResetRetryDeletesLaterRecord: an operator's Reset
// deletes the record (any version) through Do, which sends the delete
// again after a lost reply. The delete is applied and its reply lost
// (swallowed, then the connection goes: Drop and a partition until Heal);
// meanwhile another process's Do finds no record, runs f and records its
// run. The Reset's second delete then removes that new record: Done is
// false again, and the next Do runs f a third time, for one Reset.
func TestReviewR38OnceResetRetryDeletesLaterRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	operator := dsync.NewOnce(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(9*time.Second)), path)
	x := dsync.NewOnce(dial(t, []string{shared.Addr()}), path)
	var runs atomic.Int32
	f := func(context.Context) error { runs.Add(1); return nil }
	if err := x.Do(ctx, f); err != nil {
		t.Fatal(err)
	}
	if done, err := operator.Done(ctx); err != nil || !done {
		t.Fatalf("Done after the first run = %v, %v", done, err)
	}
	fault := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/done"}, zktest.Drop)
	defer fault.Disarm()
	res := make(chan error, 1)
	go func() { res <- operator.Reset(ctx) }()
	r38Struck(t, fault, res) // the record is deleted; the reply is lost
	p.BlackHole()            // no reply (a ping's) closes the connection before x's run
	if err := x.Do(ctx, f); err != nil || runs.Load() != 2 {
		t.Fatalf("Do after the Reset's delete was applied = %v, f ran %d times; want nil, 2", err, runs.Load())
	}
	p.Heal() // the operator's connection drops; it reconnects
	if err := reviewRecv(t, "Reset", res); err != nil {
		t.Fatalf("Reset = %v", err)
	}
	if done, err := x.Done(ctx); err != nil || !done {
		t.Errorf("Done after one Reset and the run that followed it = %v, %v; want true: "+
			"the Reset's delete, sent again after its lost reply, deleted the next run's record", done, err)
	}
	if err := x.Do(ctx, f); err != nil || runs.Load() != 2 {
		t.Errorf("Do after that run = %v, f ran %d times in all; want nil, 2 (one run, one Reset, one run)", err, runs.Load())
	}
}

// TestReviewR38RevokeHoldersReplySwallowed: RevokeHolders on a Mutex held
// by a revocable hold, the reply to one of its requests swallowed on a live
// connection (the listing, the holder's getData, the write): it asks the
// holder once (the node's data version 1), returns it with a nil error, and
// the holder sees the request.
func TestReviewR38RevokeHoldersReplySwallowed(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, tc := range []struct {
		name  string
		match func(path string) zktest.Match
	}{
		{"listing", func(path string) zktest.Match { return zktest.Match{Op: zktest.OpGetChildren2, Path: path} }},
		{"getData", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpGetData, Path: path + "/", Prefix: true}
		}},
		{"setData", func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpSetData, Path: path + "/", Prefix: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
			held, err := m.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Unlock()
			node := path + "/" + children(t, obs, path)[0]
			p, s := r38Fast(t)
			f := p.Strike(tc.match(path), zktest.Drop)
			defer f.Disarm()
			type result struct {
				asked []dsync.Participant
				err   error
			}
			res := make(chan result, 1)
			go func() {
				asked, err := dsync.RevokeHolders(context.Background(), s, path)
				res <- result{asked, err}
			}()
			r38Struck(t, f, res)
			r := reviewRecv(t, "RevokeHolders", res)
			if r.err != nil || len(r.asked) != 1 || r.asked[0].Path != node {
				t.Fatalf("RevokeHolders = %v, %v; want [%s], nil", r.asked, r.err, node)
			}
			awaitClosed(t, dsync.Revoked(held), "Revoked")
			if _, st, err := obs.Get(node); err != nil || st.Version != 1 {
				t.Fatalf("holder's node: version %v, %v; want written once (version 1)", st, err)
			}
		})
	}
}

// TestReviewR38CtxBoundsSwallowedReply: with a reply swallowed on a
// connection that stays up for seconds (a 30s session timeout: the next
// ping, whose reply closes it, comes 10s later), each call returns soon
// after its ctx's deadline, with the deadline's error (a write's wrapping
// ErrOutcomeUnknown): Get, Leader, Participants, Campaign, Resign, Revoke.
func TestReviewR38CtxBoundsSwallowedReply(t *testing.T) {
	type rig struct {
		obs  *zk.Conn
		path string
		s    *zkconn.Session // through the proxy
		p    *zktest.Proxy
	}
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, r rig) zktest.Match
		call    func(ctx context.Context, r rig) error
		unknown bool
	}{
		{"Get", func(t *testing.T, r rig) zktest.Match {
			createRaw(t, r.obs, r.path+"/v", []byte{0, 0, 0, 1})
			return zktest.Match{Op: zktest.OpGetData, Path: r.path + "/v"}
		}, func(ctx context.Context, r rig) error {
			_, err := dsync.NewCount(r.s, r.path+"/v", 1).Get(ctx)
			return err
		}, false},
		{"Leader", func(t *testing.T, r rig) zktest.Match {
			return zktest.Match{Op: zktest.OpGetChildren2, Path: r.path}
		}, func(ctx context.Context, r rig) error {
			_, err := dsync.NewElection(r.s, r.path).Leader(ctx)
			return err
		}, false},
		{"Participants", func(t *testing.T, r rig) zktest.Match {
			if _, err := dsync.NewElection(dial(t, []string{shared.Addr()}), r.path).Campaign(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			return zktest.Match{Op: zktest.OpGetData, Path: r.path + "/", Prefix: true}
		}, func(ctx context.Context, r rig) error {
			_, err := dsync.NewElection(r.s, r.path).Participants(ctx)
			return err
		}, false},
		{"Campaign", func(t *testing.T, r rig) zktest.Match {
			return createOf(r.path)
		}, func(ctx context.Context, r rig) error {
			_, err := dsync.NewElection(r.s, r.path).Campaign(ctx, "b")
			return err
		}, false},
		{"Resign", func(t *testing.T, r rig) zktest.Match {
			return zktest.Match{Op: zktest.OpDelete, Path: r.path + "/", Prefix: true}
		}, func(ctx context.Context, r rig) error {
			e := dsync.NewElection(r.s, r.path)
			if _, err := e.Campaign(context.Background(), "b"); err != nil {
				return err
			}
			return e.Resign(ctx)
		}, false},
		{"Revoke", func(t *testing.T, r rig) zktest.Match {
			createRaw(t, r.obs, r.path+"/n", nil)
			return zktest.Match{Op: zktest.OpSetData, Path: r.path + "/n"}
		}, func(ctx context.Context, r rig) error {
			return dsync.Revoke(ctx, r.s, r.path+"/n")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rig{obs: observer(t, shared.Addr()), path: valuePath(t)}
			r.p = zktest.NewProxy(t, shared.Addr())
			r.s = dial(t, []string{r.p.Addr()}, zkconn.WithSessionTimeout(30*time.Second))
			f := r.p.Strike(tc.setup(t, r), zktest.Drop)
			defer f.Disarm()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- tc.call(ctx, r) }()
			r38Struck(t, f, res)
			cancel()
			start := time.Now()
			err := reviewRecv(t, tc.name, res)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s returned %v after its ctx ended; want at once", tc.name, d)
			}
			if !errors.Is(err, context.Canceled) || tc.unknown != errors.Is(err, dsync.ErrOutcomeUnknown) {
				t.Errorf("%s = %v; want context.Canceled (wrapped with ErrOutcomeUnknown: %v)", tc.name, err, tc.unknown)
			}
		})
	}
}

// TestReviewR38MultiLockGiveUpThenTry: a MultiLock's LockContext is given
// up (ctx canceled) once the create of its last member is applied and its
// reply swallowed; a TryLock right after, with nothing else holding,
// returns true with one node per member, and Unlock leaves nothing. The
// session timeout is long: the first ping, a third of it after the create,
// would close the connection, and the create's recovery on the next one
// could win the lock before the test gives the wait up (it did once, with
// r38Fast's 3s, on a loaded machine).
func TestReviewR38MultiLockGiveUpThenTry(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	ml := dsync.NewMultiLock(multiMembers(s, path))
	f := p.Strike(createOf(path+"/c"), zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := ml.LockContext(ctx)
		res <- err
	}()
	r38Struck(t, f, res)
	awaitChildren(t, obs, path+"/c", 1) // applied
	cancel()
	if err := reviewRecv(t, "LockContext", res); !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext given up = %v; want context.Canceled", err)
	}
	if !ml.TryLock() {
		t.Fatalf("TryLock right after a give-up, nothing else holding = false; children a %v, b/leases %v, c %v",
			children(t, obs, path+"/a"), children(t, obs, path+"/b/leases"), children(t, obs, path+"/c"))
	}
	for _, m := range []string{"a", "b/leases", "c"} {
		if kids := children(t, obs, path+"/"+m); len(kids) != 1 {
			t.Errorf("children of %s while held = %v; want one", m, kids)
		}
	}
	ml.Unlock()
	awaitMultiEmpty(t, path)
}
