package zkconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR69WireStateFlat: a Session that does many lock cycles on
// distinct paths (a protected create with its listing, a Watch on the
// node, an exists watch on a signal that is sent, a guaranteed delete
// with a signal), and reconnects now and then, keeps nothing per path or
// per connection once they are over: wire.exists, writes, pending, taps,
// the Watches set, go-zookeeper's watch table.
func TestReviewR69WireStateFlat(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gs := gatedSession(t)
	h := current(t, gs.Session)
	w := h.gen.c.wire
	root := testRoot(t)
	other, nodeO := signalNode(t, ctx)
	kept := keepWatching(t, ctx, h, nodeO)
	state := func() string {
		w.mu.Lock()
		e, wr, p, tp := len(w.exists), len(w.writes), len(w.pending), len(w.taps)
		w.mu.Unlock()
		h.gen.c.watches.mu.Lock()
		ws := len(h.gen.c.watches.m)
		h.gen.c.watches.mu.Unlock()
		return fmt.Sprintf("exists %d, writes %d, pending %d, taps %d, Watches %d, go-zookeeper's under the root %d",
			e, wr, p, tp, ws, zktest.ClientWatches(t, h.Conn(), func(p string) bool { return strings.HasPrefix(p, root) }))
	}
	cycle := func(i int) {
		parent := fmt.Sprintf("%s/job%d", root, i)
		node, _, err := h.CreateProtectedListing(ctx, parent, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, own, err := h.GetW(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		sig := node + ".handoff"
		x := mustExistsW(t, ctx, h, sig)
		if err := other.Signal(ctx, nodeO, sig); err != nil {
			t.Fatal(err)
		}
		if ev := <-x.C; ev.Type != zk.EventNodeCreated {
			t.Fatalf("event %v", ev)
		}
		x.Unwatch()
		<-settledOf(h.Delete(node, node+".next"))
		if ev := <-own.C(); ev.Type != zk.EventNodeDeleted {
			t.Fatalf("own event %v", ev)
		}
	}
	// A first cycle and a reconnect, before the baseline: the maps are
	// made, go-zookeeper's goroutines of a reconnect started.
	cycle(-1)
	gs.reconnect(t, h, kept)
	base := state()
	i := 0
	for _, n := range []int{20, 40} {
		for range n {
			cycle(i)
			i++
		}
		gs.reconnect(t, h, kept)
		if got := state(); got != base {
			t.Errorf("after %d cycles and a reconnect: %s; want as before: %s", i, got, base)
		}
	}
}

// TestGetWSharesWatch: Watches at one path share go-zookeeper's watch of
// their kind there (getData for GetW, getChildren for ChildrenW, exists
// for CreatedW) while its event has not come, and fire together on it;
// once it has come, the next one sets a watch again. Across a reconnect
// the shared data or child watch is the one go-zookeeper's setWatches
// carries: a Watch added on the next connection (read without a watch)
// fires on the next change. An exists watch is shared only once a request
// on the connection has set it (setWatches does not say whether the node
// was made meanwhile). A Watch added before the connection dropped fires
// on a change made while it was down.
func TestGetWSharesWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  zktest.WatchKind
		watch func(Handle, context.Context, string) (*Watch, error)
		// change changes the node at p as the kind's watch sees: a
		// write, a child made, or the node made (absent: not there at
		// first; undo, after the event, deletes it again).
		change  func(c *zk.Conn, p string, i int) error
		undo    func(c *zk.Conn, p string) error
		absent  bool
		event   zk.EventType
		carried int // go-zookeeper's watches after a reconnect and a Watch
	}{
		{name: "GetW", kind: zktest.DataWatch,
			watch: func(h Handle, ctx context.Context, p string) (*Watch, error) {
				_, _, w, err := h.GetW(ctx, p)
				return w, err
			},
			change: func(c *zk.Conn, p string, _ int) error {
				_, err := c.Set(p, nil, -1)
				return err
			},
			event: zk.EventNodeDataChanged, carried: 1},
		{name: "ChildrenW", kind: zktest.ChildWatch,
			watch: func(h Handle, ctx context.Context, p string) (*Watch, error) {
				_, _, w, err := h.ChildrenW(ctx, p)
				return w, err
			},
			change: func(c *zk.Conn, p string, i int) error {
				_, err := c.Create(fmt.Sprintf("%s/c%d", p, i), nil, 0, zk.WorldACL(zk.PermAll))
				return err
			},
			event: zk.EventNodeChildrenChanged, carried: 1},
		{name: "CreatedW", kind: zktest.ExistWatch,
			watch: func(h Handle, ctx context.Context, p string) (*Watch, error) {
				there, w, err := h.CreatedW(ctx, p)
				if there {
					return nil, errors.New("a node is there")
				}
				return w, err
			},
			change: func(c *zk.Conn, p string, _ int) error {
				_, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
				return err
			},
			undo:   func(c *zk.Conn, p string) error { return c.Delete(p, -1) },
			absent: true, event: zk.EventNodeCreated, carried: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			gs := gatedSession(t)
			h := current(t, gs.Session)
			other := current(t, dial(t, []string{shared.Addr()})).Conn()
			root := testRoot(t)
			plainRoot(t, other, root, nil)
			kept := keepWatching(t, ctx, h, root)
			node := root + "/n"
			if !tc.absent {
				if _, err := other.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			watch := func() *Watch {
				t.Helper()
				w, err := tc.watch(h, ctx, node)
				if err != nil {
					t.Fatalf("%s(%s) = %v", tc.name, node, err)
				}
				return w
			}
			held := func(want int) {
				t.Helper()
				// go-zookeeper calls the Session's callback, which
				// fires the Watches, before it drops the watches an
				// event fired: a reply read after the event comes once
				// it has.
				if _, _, err := h.Conn().Exists(root); err != nil {
					t.Fatal(err)
				}
				if n := zktest.ClientWatchTable(t, h.Conn())[zktest.ClientWatch{Path: node, Kind: tc.kind}]; n != want {
					t.Fatalf("go-zookeeper holds %d watches of kind %d on %s; want %d", n, tc.kind, node, want)
				}
			}
			changes := 0
			change := func() {
				t.Helper()
				changes++
				if err := tc.change(other, node, changes); err != nil {
					t.Fatal(err)
				}
			}
			fired := func(what string, ws ...*Watch) {
				t.Helper()
				for _, w := range ws {
					if ev := <-w.C(); ev.Type != tc.event {
						t.Fatalf("event %v; want %s", ev, what)
					}
				}
				if tc.undo != nil {
					if err := tc.undo(other, node); err != nil {
						t.Fatal(err)
					}
				}
			}

			w1, w2 := watch(), watch()
			w3 := watch()
			w3.Stop() // a waiter that gave up
			held(1)
			change()
			fired("the change", w1, w2)
			held(0)
			w4 := watch() // set again
			held(1)
			gs.reconnect(t, h, kept)
			awaitSetWatchesSent(t) // go-zookeeper has read its reply: the server holds w4's watch here
			w5 := watch()          // shares w4's, which setWatches carried (an exists watch: sets its own)
			w6 := watch()          // shares
			held(tc.carried)
			change()
			fired("the change", w4, w5, w6)
			w7 := watch()
			gs.last().Conn.Close()
			change()
			fired("the change made while the connection was down", w7)
			w8 := watch()
			held(1)
			change()
			fired("the change", w8)
		})
	}
}
