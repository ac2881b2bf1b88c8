package dsync_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// persistentParents creates p and its missing ancestors as persistent nodes,
// deleted when the test ends (and, for a p ending in /leases, its parent's
// locks child).
func persistentParents(t *testing.T, obs *zk.Conn, p string) {
	t.Helper()
	var made []string
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := obs.Create(p[:i], nil, 0, zk.WorldACL(zk.PermAll))
		switch {
		case err == nil:
			made = append(made, p[:i])
		case !errors.Is(err, zk.ErrNodeExists):
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if parent, ok := strings.CutSuffix(p, "/leases"); ok {
			obs.Delete(parent+"/locks", -1)
		}
		for i := len(made) - 1; i >= 0; i-- {
			obs.Delete(made[i], -1)
		}
	})
}

// TestReviewCheckedLockGoneBetweenCreates: Acquire(2) of a max-2 Weighted;
// the first lease's multi is applied with its reply swallowed, the
// acquirer's internal lock node is deleted by an operator, the connection is
// cut: the first lease is recovered, the second create fails its check
// (ErrKinGone), the first lease is deleted and the acquirer queues again. It
// ends with exactly the 2 leases, kin of its new lock node, and nothing left
// once released.
func TestReviewCheckedLockGoneBetweenCreates(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), path, 2)
	persistentParents(t, obs, path+"/leases") // so that the first multi makes the lease
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/leases/", Prefix: true}, zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- w.Acquire(ctx, 2) }()
	zktest.AwaitStruck(t, f)
	first := awaitChildren(t, obs, path+"/leases", 1)[0]
	lock := awaitChildren(t, obs, path+"/locks", 1)[0]
	if !zkconn.Kin(first, lock) {
		t.Fatalf("lease %s is not kin of lock node %s", first, lock)
	}
	if err := obs.Delete(path+"/locks/"+lock, -1); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := <-res; err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	leases := children(t, obs, path+"/leases")
	if len(leases) != 2 {
		t.Fatalf("leases = %v; want 2", leases)
	}
	for _, l := range leases {
		if l == first {
			t.Errorf("lease %s made while the deleted lock node was held is still there", l)
		}
	}
	if !zkconn.Kin(leases[0], leases[1]) {
		t.Errorf("leases %v are not kin of one lock node", leases)
	}
	w.Release(2)
	assertEmpty(t, path)
}

// TestReviewCheckedTryAcquireLockGone: TryAcquire's lease multi never
// reaches the server (BlackHole); its internal lock node is deleted; after
// the reconnect, the multi fails its check and TryAcquire queues again, and
// succeeds: one lease, no lock node left.
func TestReviewCheckedTryAcquireLockGone(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	w := dsync.NewWeighted(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), path, 1)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/leases/", Prefix: true}, zktest.BlackHole)
	defer f.Disarm()
	res := make(chan bool, 1)
	go func() { res <- w.TryAcquire(1) }()
	zktest.AwaitStruck(t, f)
	lock := awaitChildren(t, obs, path+"/locks", 1)[0]
	if err := obs.Delete(path+"/locks/"+lock, -1); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	p.Heal()
	if !<-res {
		t.Fatal("TryAcquire = false on a free semaphore")
	}
	leases := children(t, obs, path+"/leases")
	if len(leases) != 1 || zkconn.Kin(leases[0], lock) {
		t.Fatalf("leases = %v; want 1, not kin of the deleted lock node %s", leases, lock)
	}
	awaitChildren(t, obs, path+"/locks", 0)
	w.Release(1)
	assertEmpty(t, path)
}
