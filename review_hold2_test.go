package dsync_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// ownedChild returns the child of path whose ephemeral owner is id.
func ownedChild(t *testing.T, obs *zk.Conn, path string, id int64) string {
	t.Helper()
	for _, k := range children(t, obs, path) {
		p := path + "/" + k
		if _, st, err := obs.Get(p); err == nil && st.EphemeralOwner == id {
			return p
		}
	}
	t.Fatalf("no child of %s owned by %#x", path, id)
	return ""
}

// TestReviewHold2ClaimAfterReconnectOwnDeleted: waiter B (behind holder A,
// with C behind B) has its connection cut, so its own Watch's link
// (e.own's ownLink) is closed and claim must read its node again. Its node
// and A's are then deleted:
//
//   - "down": while B's connection is down (an operator deletes B's node,
//     A unlocks); both deletions reach B from setWatches on the reconnect,
//     in either order;
//   - "multi": after the reconnect, in one multi (A's node, then B's), so
//     that B's predecessor's deletion comes first and its own's right after:
//     claim either sees it in e.own, or takes the re-read path (Stop of the
//     old Watch, which may drop its NodeDeleted as it arrives, then a new
//     read, which must find the node gone).
//
// C takes the lock. B must not report first on its deleted node: it queues
// again behind C and gets the lock only after C unlocks. Covers claim's
// Stop-then-re-read. Passes.
func TestReviewHold2ClaimAfterReconnectOwnDeleted(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, variant := range []string{"down", "multi"} {
		t.Run(variant, func(t *testing.T) {
			srv, px, s, obs := rhSetup(t, 20*time.Second)
			sa := dial(t, []string{srv.Addr()})
			sc := dial(t, []string{srv.Addr()})
			idA, idB, idC := sessionID(t, sa), sessionID(t, s), sessionID(t, sc)
			for round := 0; round < 4; round++ {
				path := lockPath(t) + "/" + strconv.Itoa(round)
				a := dsync.NewMutex(sa, path)
				heldA, err := a.LockContext(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				type res struct {
					held context.Context
					err  error
				}
				b := dsync.NewMutex(s, path)
				gotB := make(chan res, 1)
				go func() {
					h, err := b.LockContext(ctx)
					gotB <- res{h, err}
				}()
				awaitChildren(t, obs, path, 2)
				nodeB := ownedChild(t, obs, path, idB)
				c := dsync.NewMutex(sc, path)
				gotC := make(chan res, 1)
				go func() {
					h, err := c.LockContext(ctx)
					gotC <- res{h, err}
				}()
				awaitChildren(t, obs, path, 3)
				nodeA := ownedChild(t, obs, path, idA)
				awaitWatch(t, srv, nodeB, idB) // B's own Watch
				awaitWatch(t, srv, nodeA, idB) // B follows A

				sub := s.Subscribe()
				if variant == "down" {
					px.BlackHole()
				}
				px.Cut()
				awaitState(t, sub, zkconn.StateSuspended)
				if variant == "down" {
					if err := obs.Delete(nodeB, -1); err != nil {
						t.Fatal(err)
					}
					a.Unlock()
					px.Heal()
				}
				awaitState(t, sub, zkconn.StateReconnected)
				sub.Stop()
				if variant == "multi" {
					if _, err := obs.Multi(&zk.DeleteRequest{Path: nodeA, Version: -1}, &zk.DeleteRequest{Path: nodeB, Version: -1}); err != nil {
						t.Fatal(err)
					}
					awaitLost(t, heldA, "deleted")
					a.Unlock()
				}
				rc := <-gotC
				if rc.err != nil {
					t.Fatal(rc.err)
				}
				// B queues again behind C: C's node and B's new one.
				kids := awaitChildren(t, obs, path, 2)
				if nodeC := ownedChild(t, obs, path, idC); nodeC != path+"/"+orderedNames(kids)[0] {
					t.Fatalf("round %d: C holds %s, not first in %v", round, nodeC, kids)
				}
				select {
				case r := <-gotB:
					t.Fatalf("round %d: B returned (err %v) while C holds; children %v", round, r.err, kids)
				default:
				}
				if err := rc.held.Err(); err != nil {
					t.Fatalf("round %d: C's hold ended: %v", round, context.Cause(rc.held))
				}
				c.Unlock()
				rb := <-gotB
				if rb.err != nil {
					t.Fatalf("round %d: B: %v", round, rb.err)
				}
				if err := rb.held.Err(); err != nil {
					t.Fatalf("round %d: B's hold ended: %v", round, context.Cause(rb.held))
				}
				if now := ownedChild(t, obs, path, idB); now == nodeB {
					t.Fatalf("round %d: B holds its deleted node %s", round, nodeB)
				}
				b.Unlock()
				cancel()
			}
		})
	}
}
