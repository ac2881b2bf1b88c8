package dsync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// TestReviewUsurpLeaseFromBeforeSequenceWrap: PATH/leases' cversion (the
// sequence of the lease nodes) is a signed 32-bit counter that goes up by 2
// per lease (its create and its delete) and is never reset while a lease is
// held: after 2^31 leases it wraps through -1 back to 0. A lease made just
// before that wrap (sequence -16, 0xfffffff0 read as unsigned) is still held
// by A when H acquires on a semaphore of 2 and gets a small sequence: there
// is room (A's lease and H's), and nobody but H makes leases. A usurped
// that ordered sequences (unsigned, as compare does) read A's lease as newer
// than H's, and H gave its lease up and queued again, again and again, for
// as long as A held: a livelock although there was room. usurped now looks
// for a lease missing from the acquirer's first listing, not a newer one. The state after the wrap is set up
// directly: A's lease is an ephemeral node named as ZooKeeper would have
// named it (Java's %010d of -16).
func TestReviewUsurpLeaseFromBeforeSequenceWrap(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	for _, p := range []string{path, path + "/leases"} {
		if _, err := obs.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	aLease := fmt.Sprintf("%s/leases/%s00000000-0000-4000-8000-000000000000-lease-%010d", path, zkconn.ProtectedPrefix, -16)
	if _, err := obs.Create(aLease, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	h := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.Acquire(ctx, 1)
	_, st, serr := obs.Get(path + "/locks")
	if serr != nil {
		t.Fatal(serr)
	}
	// One acquisition creates and deletes one internal lock node: a cversion
	// of 2 once its delete is in (1 while it is still there).
	if err != nil || st.Cversion > 2 {
		t.Errorf("Acquire of 1 of 2 beside one held lease = %v, after %d internal lock nodes made or removed", err, st.Cversion)
	}
	if err == nil {
		h.Release(1)
	}
	if err := obs.Delete(aLease, -1); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, path)
}
