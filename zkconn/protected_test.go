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

// TestCreateProtectedListing: the listing sent with the create is served
// after it, so it shows the node, every time, also with a ctx that can end
// (each request then goes out from a goroutine of its own, so the two race
// to go-zookeeper's queue unless one waits for the other).
func TestCreateProtectedListing(t *testing.T) {
	t.Parallel()
	h := current(t, dial(t, []string{shared.Addr()}))
	root := testRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	keepParent(t, h, root) // each node is deleted before the next is made
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
	t.Parallel()
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
	zktest.AwaitStruck(t, f)
	if ok, st, err := h.Conn().Exists(node); err != nil || !ok || st.EphemeralOwner != h.ID() {
		t.Fatalf("Exists(%s) = %v, %v; want a node of the session", node, ok, err)
	}
}

// TestRecoveryCatchesUpFirst pins catchUp's invariant: each read that
// decides what became of a request whose reply was lost (a protected
// create's recovery, the cleanup of one given up in flight, CreateTouching's
// recovery) is sent after a sync on the same connection, never before. A
// sync struck by Cut is sent again, then the read.
func TestRecoveryCatchesUpFirst(t *testing.T) {
	tests := []struct {
		name string
		read zktest.Op // the request that decides
		// run makes the request with its reply lost; it returns how
		// many nodes of the session's must be left under parent.
		run func(t *testing.T, h Handle, p *zktest.Proxy, parent string) int
	}{
		{"protected create recovered", zktest.OpGetChildren2, func(t *testing.T, h Handle, p *zktest.Proxy, parent string) int {
			p.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.Lose)
			if _, err := h.CreateProtected(context.Background(), parent, "lock-", nil); err != nil {
				t.Fatalf("CreateProtected = %v", err)
			}
			return 1
		}},
		{"protected create given up", zktest.OpGetChildren2, func(t *testing.T, h Handle, p *zktest.Proxy, parent string) int {
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.Drop)
			ctx, cancel := context.WithCancel(context.Background())
			res := make(chan error, 1)
			go func() {
				_, err := h.CreateProtected(ctx, parent, "lock-", nil)
				res <- err
			}()
			zktest.AwaitStruck(t, f) // applied, its reply swallowed
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("CreateProtected = %v; want %v", err, context.Canceled)
			}
			return 0
		}},
		{"CreateTouching recovered", zktest.OpExists, func(t *testing.T, h Handle, p *zktest.Proxy, parent string) int {
			touch := parent + "/touch"
			if _, err := h.Conn().Create(touch, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			node := parent + "/" + ProtectedName("read")
			p.Strike(zktest.Match{Op: zktest.OpMulti, Path: node}, zktest.Lose)
			if err := h.CreateTouching(context.Background(), node, nil, touch, []byte("x"), -1); err != nil {
				t.Fatalf("CreateTouching = %v", err)
			}
			return 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := zktest.NewProxy(t, shared.Addr())
			h := current(t, dial(t, []string{p.Addr()}, WithSessionTimeout(3*time.Second)))
			parent := testRoot(t)
			if err := h.CreateParents(context.Background(), parent); err != nil {
				t.Fatal(err)
			}
			read := parent // the listing's path; CreateTouching's node is below it
			if tt.read == zktest.OpExists {
				read += "/"
			}
			synced := p.Strike(zktest.Match{Op: zktest.OpSync, Path: read, Prefix: true}, zktest.Cut)
			decided := p.Strike(zktest.Match{Op: tt.read, Path: read, Prefix: true}, zktest.Cut)
			defer synced.Disarm()
			defer decided.Disarm()
			want := tt.run(t, h, p, parent)
			timeout := time.After(30 * time.Second)
			select {
			case <-decided.Struck():
			case <-timeout:
				t.Fatalf("no %v on %s within 30s", tt.read, read)
			}
			select {
			case <-synced.Struck():
			default:
				t.Fatalf("%v on %s went out before any sync on it", tt.read, read)
			}
			for _, ch := range h.Deleting(parent) {
				select {
				case <-ch:
				case <-timeout:
					t.Fatal("the given-up create's cleanup did not settle within 30s")
				}
			}
			obs := zktest.Observer(t, shared.Addr())
			// Once the cleanup has deleted the given-up node, ZooKeeper may
			// have reaped parent, an empty container: it has no nodes then.
			kids, _, err := obs.Children(parent)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				t.Fatal(err)
			}
			var mine int
			for _, k := range kids {
				if _, st, err := obs.Get(parent + "/" + k); err == nil && st.EphemeralOwner == h.ID() {
					mine++
				}
			}
			if mine != want {
				t.Fatalf("nodes of the session under %s: %d (%v); want %d", parent, mine, kids, want)
			}
		})
	}
}

// TestMarkUsed: MarkUsed leaves a node as it is, data and all, but for its
// cversion: a container marked is one that had a child; a node that is not
// there, or cannot have children, settles it without error.
func TestMarkUsed(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	obs := zktest.Observer(t, shared.Addr())
	root := testRoot(t)
	plainRoot(t, obs, root, nil)
	if err := h.CreateParents(context.Background(), root+"/container"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Create(root+"/data", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Create(root+"/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		there, used bool
	}{{"container", true, true}, {"data", true, true}, {"eph", true, false}, {"none", false, false}} {
		p := root + "/" + tc.name
		select {
		case <-h.MarkUsed(p):
		case <-time.After(30 * time.Second):
			t.Fatalf("MarkUsed(%s) not settled within 30s", p)
		}
		there, st, err := obs.Exists(p)
		if err != nil || there != tc.there || there && ((st.Cversion > 0) != tc.used || st.NumChildren != 0) {
			t.Errorf("%s after MarkUsed = %v, %+v, %v; want there %v, used %v, no children", p, there, st, err, tc.there, tc.used)
		}
	}
	if data, _, err := obs.Get(root + "/data"); err != nil || string(data) != "x" {
		t.Errorf("data after MarkUsed = %q, %v; want %q", data, err, "x")
	}
}
