package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewUsurpFirstListingRetriedAfterUsurperLease: usurped trusts grant's
// first listing (known) to hold only leases made while the acquirer's lock
// node existed. But that listing is a Do, retried after a reconnect, and it
// is not ordered before the acquirer's creates either: it can be served
// after an operator deleted the acquirer's lock node and the next head made
// its lease. Then known holds the usurper's lease, usurped never fires, and
// with a maximum of 1 both heads wait for each other forever: the max-1
// deadlock usurped was made for. (Fixed: before its first wait, the
// acquirer checks that its lock node is still there after that listing.)
//
// Here A's create goes through (while its lock node exists) and the reply to
// its first listing is swallowed; the operator deletes A's lock node; B
// becomes head and makes its lease (it waits: A's lease counts); then A's
// connection is cut, and its listing, sent again, shows B's lease.
func TestReviewUsurpFirstListingRetriedAfterUsurperLease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	for _, p := range []string{path, path + "/leases", path + "/locks"} {
		if _, err := obs.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	p := zktest.NewProxy(t, shared.Addr())
	a := dsync.NewWeighted(dial(t, []string{p.Addr()}), path, 1)
	b := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)

	f := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path + "/leases"}, zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	aRes := make(chan error, 1)
	go func() { aRes <- a.Acquire(ctx, 1) }()
	zktest.AwaitStruck(t, f)                 // A's first listing applied, its reply swallowed
	awaitChildren(t, obs, path+"/leases", 1) // A's lease made (its lock node existed)
	locks := awaitChildren(t, obs, path+"/locks", 1)
	if err := obs.Delete(path+"/locks/"+locks[0], -1); err != nil { // the operator
		t.Fatal(err)
	}

	bRes := make(chan error, 1)
	go func() { bRes <- b.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/leases", 2) // B, the head now, made its lease
	p.Cut()                                  // A lists again, and sees B's lease in its "first" listing

	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	select {
	case err := <-bRes:
		if err != nil {
			t.Fatalf("B's Acquire = %v", err)
		}
		b.Release(1)
	case err := <-aRes:
		t.Fatalf("A's Acquire = %v while B's lease is held or waiting, with a maximum of 1", err)
	case <-bctx.Done():
		t.Errorf("deadlock: A and B each wait for the other's lease (leases %v, internal lock nodes %v)",
			children(t, obs, path+"/leases"), children(t, obs, path+"/locks"))
		cancel()
		<-bRes
	}
	if err := <-aRes; err == nil {
		a.Release(1)
	}
	assertEmpty(t, path)
}
