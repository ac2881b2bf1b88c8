package zkconn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// listingSetup dials a Session through a proxy to the shared server, and
// makes root.
func listingSetup(t *testing.T) (p *zktest.Proxy, h Handle, obs *zk.Conn, root string) {
	t.Helper()
	p = zktest.NewProxy(t, shared.Addr())
	h = current(t, dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second)))
	obs = zktest.Observer(t, shared.Addr())
	root = testRoot(t)
	if err := h.CreateParents(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	return p, h, obs, root
}

// createMatch matches the protected create under root.
func createMatch(root string) zktest.Match {
	return zktest.Match{Op: zktest.OpCreate, Path: root + "/" + ProtectedPrefix, Prefix: true}
}

// checkListing fails the test unless node is root's only child, owned by
// h's session, and children is nil or shows it.
func checkListing(t *testing.T, h Handle, obs *zk.Conn, root, node string, children []string) {
	t.Helper()
	if children != nil && !slices.Contains(children, node[len(root)+1:]) {
		t.Fatalf("listing %v lacks %s", children, node)
	}
	kids, _, err := obs.Children(root)
	if err != nil || len(kids) != 1 || root+"/"+kids[0] != node {
		t.Fatalf("children of %s = %v, %v; want exactly %s", root, kids, err, node)
	}
	if _, st, err := obs.Get(node); err != nil || st.EphemeralOwner != h.ID() {
		t.Fatalf("Get(%s) = %v; want a node of session %#x", node, err, h.ID())
	}
}

// TestReviewListingCreateStruck: the create is applied and its reply lost
// (Lose), or it never reaches the server (Cut), on a connection where the
// listing followed it; both go out again on the next connection. After an
// applied create the listing shows the node; after a cut one it may go out
// before the create sent again, and must then not be returned as the
// queue. Either way the node is made once. With a ctx that cannot end
// (every request inline) and with one that can.
func TestReviewListingCreateStruck(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Lose, zktest.Cut} {
		for _, cancellable := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/cancellable=%v", action, cancellable), func(t *testing.T) {
				p, h, obs, root := listingSetup(t)
				ctx := context.Background()
				if cancellable {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
					defer cancel()
				}
				f := p.Strike(createMatch(root), action)
				defer f.Disarm()
				node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
				if err != nil {
					t.Fatalf("CreateProtectedListing = %v", err)
				}
				zktest.AwaitStruck(t, f)
				if action == zktest.Lose && !slices.Contains(children, node[len(root)+1:]) {
					t.Errorf("listing %v lacks %s: it was sent after an applied create", children, node)
				}
				checkListing(t, h, obs, root, node, children)
				<-settledOf(h.Delete(node))
			})
		}
	}
}

// TestReviewListingListingCut: the create is answered, the listing that
// followed it is cut; sent again after the reconnect, it shows the node.
func TestReviewListingListingCut(t *testing.T) {
	t.Parallel()
	p, h, obs, root := listingSetup(t)
	f := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: root}, zktest.Cut)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
	if err != nil {
		t.Fatalf("CreateProtectedListing = %v", err)
	}
	zktest.AwaitStruck(t, f)
	checkListing(t, h, obs, root, node, children)
	<-settledOf(h.Delete(node))
}

// TestReviewListingParentsMissing: the first create fails (no parent), the
// listing sent after it fails too or lacks the node; parents are made, the
// create is sent again: children is nil or shows the node.
func TestReviewListingParentsMissing(t *testing.T) {
	_, h, obs, root := listingSetup(t)
	parent := root + "/a/b"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, children, err := h.CreateProtectedListing(ctx, parent, "lock-", nil)
	if err != nil {
		t.Fatalf("CreateProtectedListing = %v", err)
	}
	checkListing(t, h, obs, parent, node, children)
	<-settledOf(h.Delete(node))
}

// TestReviewListingBlackHoleDeadline: the create (and the listing behind it)
// vanish in a black hole: the call returns ctx's error by its deadline, and
// once the connection goes, the create, never applied, leaves nothing.
func TestReviewListingBlackHoleDeadline(t *testing.T) {
	p, h, obs, root := listingSetup(t)
	f := p.Strike(createMatch(root), zktest.BlackHole)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
	late := time.Since(mustDeadline(ctx))
	if !errors.Is(err, context.DeadlineExceeded) || node != "" || children != nil {
		t.Fatalf("CreateProtectedListing = %q, %v, %v; want %v", node, children, err, context.DeadlineExceeded)
	}
	if late > 2*time.Second { // go-zookeeper's own timeout would be 13s

		t.Errorf("returned %v after the deadline", late)
	}
	zktest.AwaitStruck(t, f)
	p.Heal()
	zktest.AwaitChildren(t, obs, root, 0)
	if _, err := h.CreateProtected(context.Background(), root, "x-", nil); err != nil {
		t.Fatal(err) // the session is still usable
	}
}

// TestReviewListingDropCancel: the create is applied and its reply swallowed
// on a live connection (Drop), the listing behind it answered; ctx ends:
// the call returns ctx.Err() at once, and once the connection goes the node
// is deleted in the background.
func TestReviewListingDropCancel(t *testing.T) {
	t.Parallel()
	p, h, obs, root := listingSetup(t)
	_, _, watch, err := obs.ChildrenW(root)
	if err != nil {
		t.Fatal(err)
	}
	f := p.Strike(createMatch(root), zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		node     string
		children []string
		err      error
	}
	res := make(chan result, 1)
	go func() {
		node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
		res <- result{node, children, err}
	}()
	zktest.AwaitStruck(t, f)
	<-watch // the node exists
	cancel()
	r := <-res
	if !errors.Is(r.err, context.Canceled) || r.node != "" || r.children != nil {
		t.Fatalf("CreateProtectedListing = %q, %v, %v; want %v", r.node, r.children, r.err, context.Canceled)
	}
	zktest.AwaitChildren(t, obs, root, 1)
	p.Cut() // the abandoned create fails: forgetProtected
	zktest.AwaitChildren(t, obs, root, 0)
}

// TestReviewListingSessionLost: the create goes into a black hole and so
// does every connection after it, until the session is given up: the call
// returns ErrSessionLost (no hang with a ctx that cannot end) and leaves
// nothing.
func TestReviewListingSessionLost(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(4*time.Second))
	h := current(t, s)
	obs := zktest.Observer(t, srv.Addr())
	root := testRoot(t)
	if err := h.CreateParents(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	f := p.Strike(createMatch(root), zktest.BlackHole)
	defer f.Disarm()
	type result struct {
		node     string
		children []string
		err      error
	}
	res := make(chan result, 1)
	go func() {
		node, children, err := h.CreateProtectedListing(context.Background(), root, "lock-", nil)
		res <- result{node, children, err}
	}()
	zktest.AwaitStruck(t, f)
	p.BlackHole()
	r := <-res
	if !errors.Is(r.err, ErrSessionLost) || r.node != "" || r.children != nil {
		t.Fatalf("CreateProtectedListing = %q, %v, %v; want ErrSessionLost", r.node, r.children, r.err)
	}
	p.Heal()
	zktest.AwaitChildren(t, obs, root, 0)
}

// TestReviewListingManyConcurrent: many joins at once on one session, with
// cancellable ctxs: every listing returned shows its node (each is served
// after its own create, whatever the others do on the connection).
func TestReviewListingManyConcurrent(t *testing.T) {
	h := current(t, dial(t, []string{shared.Addr()}))
	root := testRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	const n = 64
	errs := make(chan error, n)
	missing := make(chan int, n)
	nodes := make(chan string, n)
	for range n {
		go func() {
			node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
			if err == nil {
				nodes <- node
				if children == nil {
					missing <- 1
				} else if !slices.Contains(children, node[len(root)+1:]) {
					err = errors.New("listing lacks " + node)
				}
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(nodes)
	if len(missing) > 0 {
		t.Errorf("%d joins lost their listing on a healthy connection", len(missing))
	}
	for node := range nodes {
		<-settledOf(h.Delete(node))
	}
}
