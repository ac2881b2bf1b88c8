package zkconn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 39: CreateProtectedWhileListing's failure paths, and the
// catchUp of a given-up create's cleanup against Close.

// r39Within runs f on a goroutine and fails the test if it does not return
// within 30s.
func r39Within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30s", what)
	}
}

// r39Awaited returns how many awaitWrite channels w still holds.
func r39Awaited(w *wire) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, as := range w.writes {
		n += len(as)
	}
	return n
}

// TestReviewR39CreateWhileListingFailures pins createListing on every way
// the create can fail or be given up (a bad name, kin gone, the parent
// missing, ctx done before and while in flight, the Session closed): it
// returns within the bound, with no listing (children nil) unless the node
// was made and the listing shows it, its awaitWrite is gone from the wire,
// and no node is left (goleak in TestMain checks the listing goroutine).
func TestReviewR39CreateWhileListingFailures(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(30*time.Second))
	h := current(t, s)
	w := h.gen.c.wire
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testRoot(t)
	kin, err := h.CreateProtected(ctx, root+"/locks", "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	leases := root + "/leases"
	obs := zktest.Observer(t, shared.Addr())
	call := func(ctx context.Context, parent, name, kin string) (node string, children []string, err error) {
		t.Helper()
		r39Within(t, "CreateProtectedWhileListing", func() {
			node, children, err = h.CreateProtectedWhileListing(ctx, parent, name, nil, kin)
		})
		if n := r39Awaited(w); n != 0 {
			t.Errorf("after CreateProtectedWhileListing(%s) = %v: %d awaitWrite channels left on the wire", parent, err, n)
		}
		if err != nil && children != nil {
			t.Errorf("CreateProtectedWhileListing(%s) = %v with a listing %v", parent, err, children)
		}
		if err == nil && children != nil && !slices.Contains(children, node[len(parent)+1:]) {
			t.Errorf("CreateProtectedWhileListing(%s): listing %v lacks %s", parent, children, node)
		}
		return node, children, err
	}

	if _, _, err := call(ctx, leases, "lease-", "relative"); !errors.Is(err, ErrBadPath) {
		t.Errorf("bad kin: err = %v; want ErrBadPath", err)
	}
	if _, _, err := call(ctx, leases, "a/b", kin); !errors.Is(err, ErrBadPath) {
		t.Errorf("bad name: err = %v; want ErrBadPath", err)
	}
	if _, _, err := call(ctx, leases, "lease-", root+"/locks/gone"); !errors.Is(err, ErrKinGone) {
		t.Errorf("kin gone: err = %v; want ErrKinGone", err)
	}
	node, _, err := call(ctx, leases, "lease-", kin) // leases missing: made on the way
	if err != nil {
		t.Fatalf("parent missing: err = %v", err)
	}
	<-settledOf(h.Delete(node))

	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	listed := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: leases}, zktest.Cut)
	if _, _, err := call(done, leases, "lease-", kin); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx done before: err = %v; want %v", err, context.Canceled)
	}
	select {
	case <-listed.Struck():
		t.Error("ctx done before: a listing went out")
	default:
	}
	listed.Disarm()

	// ctx ends with the create applied and its reply swallowed.
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, zktest.Drop)
	inFlight, cancelInFlight := context.WithCancel(ctx)
	go func() {
		select {
		case <-f.Struck():
		case <-time.After(30 * time.Second):
		}
		cancelInFlight()
	}()
	if _, _, err := call(inFlight, leases, "lease-", kin); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx done in flight: err = %v; want %v", err, context.Canceled)
	}
	select {
	case <-f.Struck():
	default:
		t.Fatal("the create was not sent")
	}
	p.Cut() // the swallowed reply: the create fails, its cleanup runs
	for _, ch := range h.Deleting(leases) {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatal("the given-up create's cleanup did not settle within 30s")
		}
	}
	kids, _, err := obs.Children(leases)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if len(kids) != 0 {
		t.Errorf("leases after the given-up create = %v; want none", kids)
	}

	s.Close()
	if _, _, err := call(ctx, leases, "lease-", kin); !errors.Is(err, ErrClosed) {
		t.Errorf("Session closed: err = %v; want ErrClosed", err)
	}
}

// TestReviewR39ForgetCatchUpBlackHoledClose: the cleanup of a create given
// up in flight (a guaranteed delete, run with no ctx) now sends a sync
// first; with that sync black-holed, Close still returns at once (its
// goroutine ends with the connection), and nothing is left running.
func TestReviewR39ForgetCatchUpBlackHoledClose(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(30*time.Second))
	h := current(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testRoot(t)
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	created := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: root + "/", Prefix: true}, zktest.Drop)
	defer created.Disarm()
	synced := p.Strike(zktest.Match{Op: zktest.OpSync, Path: root}, zktest.BlackHole)
	defer synced.Disarm()
	given, giveUp := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := h.CreateProtected(given, root, "lock-", nil)
		res <- err
	}()
	select {
	case <-created.Struck():
	case <-time.After(30 * time.Second):
		t.Fatal("the create was not sent")
	}
	giveUp()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("CreateProtected = %v; want %v", err, context.Canceled)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("CreateProtected did not return within 30s of its ctx's end")
	}
	p.Cut() // the create fails: its cleanup syncs first, into the black hole
	select {
	case <-synced.Struck():
	case <-time.After(30 * time.Second):
		t.Fatal("the cleanup sent no sync")
	}
	start := time.Now()
	r39Within(t, "Close", func() { s.Close() })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with the cleanup's sync black-holed; want it prompt", d)
	}
}
