package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/go-zookeeper/zk"
)

// waiting returns the Waiting flags of ps.
func waiting(ps []dsync.Participant) []bool {
	w := make([]bool, len(ps))
	for i, p := range ps {
		w[i] = p.Waiting
	}
	return w
}

// checkWaiting fails the test unless w's participants are want (true:
// Waiting), in order.
func checkWaiting(t *testing.T, w *dsync.Weighted, want ...bool) {
	t.Helper()
	ps, err := w.Participants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := waiting(ps); len(got) != len(want) || func() bool {
		for i := range got {
			if got[i] != want[i] {
				return true
			}
		}
		return false
	}() {
		t.Fatalf("Participants Waiting = %v; want %v (%+v)", got, want, ps)
	}
}

// TestWeightedParticipantsSharedSession pins a held lease shown as Waiting:
// two Weighted values a and b on one Session, b queued for the internal lock
// before a, ahead of it, created its lease. Curator peers hold the lease and
// then the internal lock meanwhile.
func TestWeightedParticipantsSharedSession(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	x, err := java.Hold(ctx, curator.Semaphore, shared.Addr(), path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Kill()
	<-x.Acquired()
	y, err := java.Hold(ctx, curator.Semaphore, shared.Addr(), path, 1) // holds the internal lock, waiting
	if err != nil {
		t.Fatal(err)
	}
	defer y.Kill()
	awaitChildren(t, obs, path+"/leases", 2)
	s := dial(t, []string{shared.Addr()})
	a, b := dsync.NewWeighted(s, path, 1), dsync.NewWeighted(s, path, 1)
	aerr, berr := make(chan error, 1), make(chan error, 1)
	go func() { aerr <- a.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/locks", 2)
	go func() { berr <- b.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/locks", 3)
	if err := x.Release(); err != nil { // y gets in, a creates its lease and waits
		t.Fatal(err)
	}
	<-y.Acquired()
	awaitChildren(t, obs, path+"/leases", 2)
	viewer := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	checkWaiting(t, viewer, false, true)
	if err := y.Release(); err != nil { // a gets in, b creates its lease and waits
		t.Fatal(err)
	}
	if err := <-aerr; err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path+"/leases", 2)
	checkWaiting(t, viewer, false, true)
	a.Release(1)
	if err := <-berr; err != nil {
		t.Fatal(err)
	}
	// Acquire does not wait for its internal lock's delete: while that node
	// is listed, b's lease (its kin) shows as waiting.
	awaitChildren(t, obs, path+"/locks", 0)
	checkWaiting(t, viewer, false)
	b.Release(1)
	assertEmpty(t, path)
}

// TestWeightedParticipantsCuratorThreads pins the same for two threads of
// one Curator InterProcessSemaphoreV2 (one ZooKeeper session), replayed
// request by request with Curator's node names: thread 1 and thread 2 queue
// for the internal lock, thread 1 creates its lease, gets room and lets the
// lock go, thread 2 creates its lease and waits.
func TestWeightedParticipantsCuratorThreads(t *testing.T) {
	path := lockPath(t)
	c := observer(t, shared.Addr()) // the Curator client's session
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{path, path + "/locks", path + "/leases"} {
		if _, err := c.Create(p, nil, 0, acl); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	create := func(p string) string {
		t.Helper()
		n, err := c.Create(p, []byte("127.0.0.1"), zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const uuid = "_c_9b6e2a3c-5d4f-4e1a-8c7b-0a1b2c3d4e5" // + one digit: version 4, Curator's
	lock1 := create(path + "/locks/" + uuid + "1-lock-")
	create(path + "/locks/" + uuid + "2-lock-")
	create(path + "/leases/" + uuid + "3-lease-")
	if err := c.Delete(lock1, -1); err != nil {
		t.Fatal(err)
	}
	create(path + "/leases/" + uuid + "4-lease-")
	viewer := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 1)
	checkWaiting(t, viewer, false, true)
}

// TestWeightedParticipantsAllOrNothingWaits pins an acquirer of 2 leases
// shown half held: with 2 of 3 leases held, all of its 2 nodes wait (Acquire
// is all or nothing), though only one is over the maximum.
func TestWeightedParticipantsAllOrNothingWaits(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	holder := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	if err := holder.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	done := make(chan error, 1)
	go func() { done <- w.Acquire(ctx, 2) }()
	awaitChildren(t, obs, path+"/leases", 4)
	viewer := dsync.NewWeighted(dial(t, []string{shared.Addr()}), path, 3)
	checkWaiting(t, viewer, false, false, true, true)
	holder.Release(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// w got room once one of the holder's leases went, and does not wait
	// for its internal lock's delete (its leases show as waiting while that
	// node is listed); the holder's other delete may be in flight too.
	awaitChildren(t, obs, path+"/leases", 2)
	awaitChildren(t, obs, path+"/locks", 0)
	checkWaiting(t, viewer, false, false)
	w.Release(2)
	assertEmpty(t, path)
}

// TestWeightedParticipantsSharedSessionCountLowered pins a held lease shown
// as Waiting: a and b share a Session and both queued for the internal lock
// before a made its lease; b waits for room, and then the count is lowered,
// so that more leases are over it than b made.
func TestWeightedParticipantsSharedSessionCountLowered(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	// Persistent, so that the stranger's plain create below finds locks:
	// ZooKeeper reaps an empty container (locks, once other's lock node is
	// gone) at a check every 60 s.
	r33Parents(t, obs, path)
	count := dsync.NewCount(dial(t, []string{shared.Addr()}), path+"-count", 2)
	other := dsync.NewWeightedCount(dial(t, []string{shared.Addr()}), path, count)
	if err := other.Acquire(ctx, 2); err != nil { // full
		t.Fatal(err)
	}
	// A stranger holds the internal lock while a and b queue behind it.
	blocker, err := obs.Create(path+"/locks/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, []string{shared.Addr()})
	a := dsync.NewWeightedCount(s, path, count)
	b := dsync.NewWeightedCount(s, path, count)
	aerr, berr := make(chan error, 1), make(chan error, 1)
	go func() { aerr <- a.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/locks", 2)
	go func() { berr <- b.Acquire(ctx, 1) }()
	awaitChildren(t, obs, path+"/locks", 3)
	if err := obs.Delete(blocker, -1); err != nil { // a makes its lease and waits
		t.Fatal(err)
	}
	awaitChildren(t, obs, path+"/leases", 3)
	other.Release(1) // a gets room, then b makes its lease and waits
	if err := <-aerr; err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path+"/leases", 3)
	viewer := dsync.NewWeightedCount(dial(t, []string{shared.Addr()}), path, count)
	checkWaiting(t, viewer, false, false, true)
	if err := count.Set(ctx, 1); err != nil {
		t.Fatal(err)
	}
	checkWaiting(t, viewer, false, false, true)
	other.Release(1)
	a.Release(1)
	if err := <-berr; err != nil {
		t.Fatal(err)
	}
	b.Release(1)
	assertEmpty(t, path)
}
