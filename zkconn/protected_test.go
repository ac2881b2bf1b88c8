package zkconn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestCreateProtectedListing: the listing sent with the create is served
// after it, so it shows the node, every time, also with a ctx that can end
// (each request then goes out from a goroutine of its own, so the two race
// to go-zookeeper's queue unless one waits for the other).
func TestCreateProtectedListing(t *testing.T) {
	h := current(t, dial(t, []string{shared.Addr()}))
	root := testRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(children, node[len(root)+1:]) {
			t.Fatalf("create %d: listing %v lacks %s", i, children, node)
		}
		<-settledOf(h.Delete(node))
	}
}

// TestCreateProtectedListingFails: a create that fails before it is sent
// sends no listing, and a listing whose connection is cut leaves the node
// made, and children either nil or showing it (the listing is sent again
// on the next connection).
func TestCreateProtectedListingFails(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	h := current(t, dial(t, []string{p.Addr()}, WithSessionTimeout(10*time.Second)))
	ctx := context.Background()
	root := testRoot(t)
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}

	f := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: root}, zktest.Cut)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if node, children, err := h.CreateProtectedListing(canceled, root, "lock-", nil); !errors.Is(err, context.Canceled) || children != nil {
		t.Fatalf("CreateProtectedListing(canceled) = %q, %v, %v; want %v and no listing", node, children, err, context.Canceled)
	}
	select {
	case <-f.Struck():
		t.Fatal("a listing went out for a create that was not sent")
	default:
	}

	node, children, err := h.CreateProtectedListing(ctx, root, "lock-", nil)
	if err != nil || children != nil && !slices.Contains(children, node[len(root)+1:]) {
		t.Fatalf("CreateProtectedListing with the listing cut = %q, %v, %v; want the node, and a listing that shows it or none", node, children, err)
	}
	<-f.Struck()
	if ok, st, err := h.Conn().Exists(node); err != nil || !ok || st.EphemeralOwner != h.ID() {
		t.Fatalf("Exists(%s) = %v, %v; want a node of the session", node, ok, err)
	}
}
