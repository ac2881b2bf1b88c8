package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// awaitClosed fails the test unless ch is closed within 30s.
func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not closed within 30s", what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nodeData reads node's data with the observer.
func nodeData(t *testing.T, obs *zk.Conn, node string) string {
	t.Helper()
	data, _, err := obs.Get(node)
	if err != nil {
		t.Fatalf("Get(%s) = %v", node, err)
	}
	return string(data)
}

type locked struct {
	held context.Context
	err  error
}

// lockAsync runs m.LockContext on a goroutine and reports on the channel.
func lockAsync(m *dsync.Mutex) <-chan locked {
	out := make(chan locked, 1)
	go func() {
		held, err := m.LockContext(context.Background())
		out <- locked{held, err}
	}()
	return out
}

// TestRevokeWhileHolding: a request written into a revocable hold's node
// closes Revoked; the hold stays held until Unlock (cooperative), a second
// request is written again, and nothing is left behind.
func TestRevokeWhileHolding(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.WithData([]byte("overridden")), dsync.Revocable())
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	if got := nodeData(t, obs, node); got != "" {
		t.Errorf("revocable node data = %q; want none (Revocable overrides WithData)", got)
	}
	revoked := dsync.Revoked(held)
	if revoked == nil {
		t.Fatal("Revoked(hold context of a revocable hold) = nil")
	}
	if m.Revoked() != revoked {
		t.Error("m.Revoked() is not Revoked(held)")
	}
	if isClosed(revoked) {
		t.Fatal("Revoked closed before any request")
	}

	revoker := dial(t, []string{shared.Addr()})
	if err := dsync.Revoke(ctx, revoker, node); err != nil {
		t.Fatalf("Revoke = %v", err)
	}
	awaitClosed(t, revoked, "Revoked after a request")
	if got := nodeData(t, obs, node); got != "__REVOKE__" {
		t.Errorf("node data = %q; want __REVOKE__", got)
	}

	// Cooperative: the hold is still held.
	if held.Err() != nil {
		t.Fatalf("hold context ended by a request: %v", context.Cause(held))
	}
	other := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := other.TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryLockContext by another after a request = %v; want ErrWouldBlock", err)
	}
	// Asked again: written again, the hold unchanged.
	if err := dsync.Revoke(ctx, revoker, node); err != nil {
		t.Fatalf("second Revoke = %v", err)
	}
	if _, err := m.LockContext(held); err != nil { // re-enters, still held
		t.Fatalf("LockContext(held) after requests = %v", err)
	}
	m.Unlock()
	if held.Err() != nil {
		t.Fatal("hold ended after one of two Unlocks")
	}

	m.Unlock()
	if !errors.Is(context.Cause(held), context.Canceled) {
		t.Errorf("cause after Unlock = %v; want context.Canceled", context.Cause(held))
	}
	if m.Revoked() != nil {
		t.Error("m.Revoked() of an unlocked Mutex is not nil")
	}
	awaitChildren(t, obs, path, 0)
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("watches left after Unlock: %v", left)
	}
}

// TestRevokeWhileWaiting: a request written into a revocable node while it
// waits in line, after its own watch is set (which the wait consumes), is
// seen as the hold starts: Revoked is closed when LockContext returns.
func TestRevokeWhileWaiting(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	a.Lock()
	got := lockAsync(b)
	kids := orderedNames(awaitChildren(t, obs, path, 2))
	bNode := path + "/" + kids[1]
	awaitWatch(t, shared, bNode, mustSessionOf(t, obs, bNode))

	if err := dsync.Revoke(context.Background(), dial(t, []string{shared.Addr()}), bNode); err != nil {
		t.Fatalf("Revoke(waiting node) = %v", err)
	}
	a.Unlock()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !isClosed(dsync.Revoked(r.held)) {
		t.Fatal("Revoked not closed when the hold started after a request written while it waited")
	}
	if r.held.Err() != nil {
		t.Fatalf("hold context ended: %v", context.Cause(r.held))
	}
	b.Unlock()
}

// TestRevokeNotRevocable: a hold that is not revocable has no Revoked
// channel, and its node keeps its data: Revoke refuses it.
func TestRevokeNotRevocable(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	if dsync.Revoked(held) != nil || m.Revoked() != nil {
		t.Error("Revoked of a hold that is not revocable is not nil")
	}
	if dsync.Revoked(ctx) != nil {
		t.Error("Revoked(context.Background()) is not nil")
	}
	node := path + "/" + children(t, obs, path)[0]
	before := nodeData(t, obs, node)
	if !strings.HasPrefix(before, "host=") {
		t.Fatalf("node data = %q; want the default host=… pid=…", before)
	}
	revoker := dial(t, []string{shared.Addr()})
	if err := dsync.Revoke(ctx, revoker, node); !errors.Is(err, dsync.ErrNotRevocable) {
		t.Errorf("Revoke(node not revocable) = %v; want ErrNotRevocable", err)
	}
	asked, err := dsync.RevokeHolders(ctx, revoker, path)
	if len(asked) != 0 || !errors.Is(err, dsync.ErrNotRevocable) {
		t.Errorf("RevokeHolders = %v, %v; want none asked and ErrNotRevocable", asked, err)
	}
	if after := nodeData(t, obs, node); after != before {
		t.Errorf("node data = %q after Revoke; want %q kept", after, before)
	}
	if held.Err() != nil {
		t.Fatal("hold ended")
	}
}

// TestRevokeGoneNode: Revoke of a node that does not exist, or no longer
// does, returns ErrNoNode; bad input and a done ctx fail before anything is
// sent; RevokeHolders on a path nobody holds asks nobody.
func TestRevokeGoneNode(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	sess := dial(t, []string{shared.Addr()})
	missing := path + "/_c_00000000-0000-4000-8000-000000000000-lock-0000000001"
	err := dsync.Revoke(ctx, sess, missing)
	if !errors.Is(err, dsync.ErrNoNode) || !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("Revoke(missing node) = %v; want ErrNoNode and zk.ErrNoNode", err)
	}

	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	if _, err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	m.Unlock()
	if err := dsync.Revoke(ctx, sess, node); !errors.Is(err, dsync.ErrNoNode) {
		t.Errorf("Revoke(released node) = %v; want ErrNoNode", err)
	}

	asked, err := dsync.RevokeHolders(ctx, sess, path)
	if len(asked) != 0 || err != nil {
		t.Errorf("RevokeHolders(nobody holds) = %v, %v; want none, nil", asked, err)
	}
	if asked, err := dsync.RevokeHolders(ctx, sess, path+"/never"); len(asked) != 0 || err != nil {
		t.Errorf("RevokeHolders(missing path) = %v, %v; want none, nil", asked, err)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := dsync.Revoke(done, sess, node); !errors.Is(err, context.Canceled) {
		t.Errorf("Revoke(done ctx) = %v; want context.Canceled", err)
	}
	if _, err := dsync.RevokeHolders(done, sess, path); !errors.Is(err, context.Canceled) {
		t.Errorf("RevokeHolders(done ctx) = %v; want context.Canceled", err)
	}
	for _, tt := range []struct {
		name string
		sess *zkconn.Session
		path string
		want error
	}{
		{"nil session", nil, node, dsync.ErrNilSession},
		{"relative", sess, "x/y", dsync.ErrBadPath},
		{"trailing slash", sess, path + "/", dsync.ErrBadPath},
	} {
		if err := dsync.Revoke(ctx, tt.sess, tt.path); !errors.Is(err, tt.want) {
			t.Errorf("%s: Revoke = %v; want %v", tt.name, err, tt.want)
		}
		if _, err := dsync.RevokeHolders(ctx, tt.sess, tt.path); !errors.Is(err, tt.want) {
			t.Errorf("%s: RevokeHolders = %v; want %v", tt.name, err, tt.want)
		}
	}
}

// TestRevokeHoldersMutex: RevokeHolders on a Mutex path asks the holder
// (taken by Lock, which watches its node because it is revocable), not the
// waiter.
func TestRevokeHoldersMutex(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	h := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	w := dsync.NewMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	h.Lock()
	revoked := h.Revoked()
	if revoked == nil {
		t.Fatal("Revoked() of a revocable Mutex held by Lock = nil")
	}
	got := lockAsync(w)
	kids := orderedNames(awaitChildren(t, obs, path, 2))

	asked, err := dsync.RevokeHolders(ctx, dial(t, []string{shared.Addr()}), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].Path != path+"/"+kids[0] {
		t.Fatalf("RevokeHolders asked %v; want the holder %s", asked, kids[0])
	}
	awaitClosed(t, revoked, "Revoked after RevokeHolders")
	if got := nodeData(t, obs, path+"/"+kids[1]); got != "" {
		t.Errorf("waiter's node data = %q; want none (not asked)", got)
	}
	h.Unlock()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if isClosed(dsync.Revoked(r.held)) {
		t.Error("the next holder's Revoked is closed: it was never asked")
	}
	w.Unlock()
}

// TestRevokeHoldersSemaphore: RevokeHolders on a SemaphoreMutex path asks
// the lease holder, not the lease still waiting for room.
func TestRevokeHoldersSemaphore(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	b := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	a.Lock()
	revoked := a.Revoked()
	if revoked == nil {
		t.Fatal("Revoked() of a revocable SemaphoreMutex held by Lock = nil")
	}
	aLease := path + "/leases/" + children(t, obs, path+"/leases")[0]
	if got := nodeData(t, obs, aLease); got != "" {
		t.Errorf("revocable lease data = %q; want none", got)
	}
	got := make(chan locked, 1)
	go func() {
		held, err := b.LockContext(ctx)
		got <- locked{held, err}
	}()
	leases := awaitChildren(t, obs, path+"/leases", 2) // b's waits for room
	bLease := path + "/leases/" + slices.DeleteFunc(leases, func(n string) bool { return path+"/leases/"+n == aLease })[0]

	asked, err := dsync.RevokeHolders(ctx, dial(t, []string{shared.Addr()}), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].Path != aLease {
		t.Fatalf("RevokeHolders asked %v; want the holder %s", asked, aLease)
	}
	awaitClosed(t, revoked, "Revoked after RevokeHolders")
	if got := nodeData(t, obs, bLease); got != "" {
		t.Errorf("waiting lease data = %q; want none (not asked)", got)
	}
	a.Unlock()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if rv := dsync.Revoked(r.held); rv == nil || isClosed(rv) {
		t.Error("the next holder's Revoked is nil or closed; want open")
	}
	b.Unlock()
}

// TestRevokeRearmLostConnection: the request makes the hold read its node
// and watch it again; that read's reply never comes, and then the
// connection drops for good. The hold must be lost at once, on the
// suspension (LostOnSuspension), while its node still exists: not when the
// read gives up with the session, after others may hold the lock.
func TestRevokeRearmLostConnection(t *testing.T) {
	ctx := context.Background()
	p := zktest.NewProxy(t, shared.Addr())
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second)), path, dsync.Revocable())
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Drop)
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), node); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f) // the re-arm is out, and stays out
	p.BlackHole()
	p.Cut() // the connection drops, and no other comes up
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("hold context live 30s after its connection dropped")
	}
	cause := context.Cause(held)
	if !errors.Is(cause, dsync.ErrLockLost) || errors.Is(cause, zkconn.ErrSessionLost) {
		t.Fatalf("cause = %v; want ErrLockLost on the suspension, not on the session's loss", cause)
	}
	if there, _, err := obs.Exists(node); err != nil || !there {
		t.Fatalf("Exists(%s) = %v, %v when the hold ended; want the node still there", node, there, err)
	}
	m.Unlock()
}

// TestRevokeRearmCut: under LostOnExpiry the hold rides out a connection
// cut at the read that sets its watch again, and still sees the request
// that read was for.
func TestRevokeRearmCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := zktest.NewProxy(t, shared.Addr())
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	m := dsync.NewMutex(dial(t, []string{p.Addr()}), path, dsync.Revocable(), dsync.WithLossPolicy(dsync.LostOnExpiry))
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + children(t, obs, path)[0]
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Cut)
	if err := dsync.Revoke(ctx, dial(t, []string{shared.Addr()}), node); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, f)
	awaitClosed(t, dsync.Revoked(held), "Revoked after the read was cut")
	if held.Err() != nil {
		t.Fatalf("hold lost: %v", context.Cause(held))
	}
	m.Unlock()
}
