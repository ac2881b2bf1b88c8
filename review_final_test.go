package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// rfNoDeleteParent creates path (its parent must exist) with an ACL that lets
// anyone create, list and read children, but not delete them: every delete
// of a child fails with NoAuth, a settled delete (logged, not retried) of a
// node that stays.
func rfNoDeleteParent(t *testing.T, obs *zk.Conn, path string) {
	t.Helper()
	if _, err := obs.Create(path, nil, 0, zk.WorldACL(zk.PermAll&^zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		obs.SetACL(path, zk.WorldACL(zk.PermAll), -1)
		kids, _, _ := obs.Children(path)
		for _, k := range kids {
			obs.Delete(path+"/"+k, -1)
		}
		obs.Delete(path, -1)
	})
}

// TestReviewFinalTryLockSpinsOnStaleDeleting: queue.past keeps the
// Deleting snapshot taken before the create (deleting) for every round, and
// counts a blocking node as "own, being deleted" if either snapshot names
// it. Once that delete has settled without removing the node (here NoAuth:
// the parent's ACL forbids deletes; the delete is logged, not retried, and
// the node stays), deleting[p] is a closed channel for ever: past "waits"
// on it (no wait), lists again, finds the node, and loops, a getChildren
// per round, until ctx ends. TryLockContext with a ctx without deadline
// never returns; TryLock returns false only after the session timeout
// (instead of at once), having hammered ZooKeeper all along. Before that,
// while the delete's reply is lost on a live connection (Drop), TryLock
// waits behind a node that is going nowhere.
//
// Interleaving: m1 holds n1; m1.Unlock sends delete(n1) (Drop: applied,
// NoAuth, reply swallowed; pending); m2.TryLockContext snapshots Deleting
// ({n1}), creates n2, lists [n1, n2]: past waits on n1's delete. The
// connection drops (Cut); delete(n1) is sent again, NoAuth, settled; past
// lists [n1, n2] again: n1 is not in now, but deleting[n1] (closed) counts
// it as own: it loops. (Since the Session closes a connection at a reply
// out of turn, here m2's create's, the delete sent again may settle before
// m2 lists; TestTryOwnDeleteRefusedNoSpin makes the interleaving on
// purpose.)
func TestReviewFinalTryLockSpinsOnStaleDeleting(t *testing.T) {
	t.Parallel()
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	rfNoDeleteParent(t, obs, path)
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)

	m1 := dsync.NewMutex(s, path)
	m1.Lock()
	n1 := path + "/" + awaitChildren(t, obs, path, 1)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: n1}, zktest.Drop)
	defer f.Disarm()
	m1.Unlock()
	zktest.AwaitStruck(t, f) // applied (NoAuth), reply swallowed: n1 stays, its delete pending

	m2 := dsync.NewMutex(s, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := m2.TryLockContext(ctx)
		if err == nil {
			m2.Unlock()
		}
		res <- err
	}()
	awaitChildren(t, obs, path, 2) // n2 created; n1 is there for good

	// While n1's delete is under way (its reply lost on a live connection)
	// TryLockContext waits for it, bounded by its ctx. Once the delete
	// settles (sent again after the reconnect, refused again: NoAuth) with
	// n1 still there, it must fail with ErrWouldBlock, not list again and
	// again waiting on the settled delete.
	p.Cut()
	rlAwait(t, sub, zkconn.StateSuspended)
	rlAwait(t, sub, zkconn.StateReconnected)
	select {
	case err := <-res:
		if !errors.Is(err, dsync.ErrWouldBlock) {
			t.Fatalf("TryLockContext = %v after the delete settled, want ErrWouldBlock", err)
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("TryLockContext (no deadline) still running 30s after n1's delete settled (refused): it loops on the settled delete; after cancel it returned %v", <-res)
	}
}
