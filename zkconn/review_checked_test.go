package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// checkedSetup dials a Session through a proxy to the shared server and
// makes kin, a protected node of it, under root/locks.
func checkedSetup(t *testing.T) (p *zktest.Proxy, h Handle, obs *zk.Conn, root, kin string) {
	t.Helper()
	p = zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
	h = current(t, s)
	obs = zktest.Observer(t, shared.Addr())
	root = testRoot(t)
	kin, err := h.CreateProtected(context.Background(), root+"/locks", "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CreateParents(context.Background(), root+"/leases"); err != nil {
		t.Fatal(err)
	}
	return p, h, obs, root, kin
}

// TestReviewCheckedReplyLostApplied: the multi of CreateProtectedWhile is
// applied and its reply lost (Lose): the node is recovered, not made twice.
func TestReviewCheckedReplyLostApplied(t *testing.T) {
	t.Parallel()
	p, h, obs, root, kin := checkedSetup(t)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: root + "/leases/", Prefix: true}, zktest.Lose)
	defer f.Disarm()
	got, err := h.CreateProtectedWhile(context.Background(), root+"/leases", "lease-", nil, kin)
	if err != nil {
		t.Fatalf("CreateProtectedWhile = %v", err)
	}
	select {
	case <-f.Struck():
	default:
		t.Fatal("the fault did not strike")
	}
	kids, _, err := obs.Children(root + "/leases")
	if err != nil || len(kids) != 1 || root+"/leases/"+kids[0] != got {
		t.Fatalf("leases = %v, %v; want exactly %s", kids, err, got)
	}
	<-settledOf(h.Delete(got))
	<-settledOf(h.Delete(kin))
}

// TestReviewCheckedKinGoneWhileReplyLost: the multi never reaches the server
// (BlackHole); kin is deleted meanwhile; after the reconnect the recovery
// finds nothing and the multi sent again fails: ErrKinGone, no node.
func TestReviewCheckedKinGoneWhileReplyLost(t *testing.T) {
	t.Parallel()
	p, h, obs, root, kin := checkedSetup(t)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: root + "/leases/", Prefix: true}, zktest.BlackHole)
	defer f.Disarm()
	res := make(chan error, 1)
	go func() {
		_, err := h.CreateProtectedWhile(context.Background(), root+"/leases", "lease-", nil, kin)
		res <- err
	}()
	zktest.AwaitStruck(t, f)
	if err := obs.Delete(kin, -1); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	p.Heal()
	if err := <-res; !errors.Is(err, ErrKinGone) {
		t.Fatalf("CreateProtectedWhile = %v; want ErrKinGone", err)
	}
	if kids, _, err := obs.Children(root + "/leases"); err != nil || len(kids) != 0 {
		t.Fatalf("leases = %v, %v; want none", kids, err)
	}
}

// TestReviewCheckedCtxEndsInFlight: the multi is applied, its reply
// swallowed on a live connection (Drop); ctx ends: the call returns
// ctx.Err() at once, and once the connection goes (the request fails
// transient) the node is deleted in the background: no orphan.
func TestReviewCheckedCtxEndsInFlight(t *testing.T) {
	t.Parallel()
	p, h, obs, root, kin := checkedSetup(t)
	_, _, watch, err := obs.ChildrenW(root + "/leases")
	if err != nil {
		t.Fatal(err)
	}
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: root + "/leases/", Prefix: true}, zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := h.CreateProtectedWhile(ctx, root+"/leases", "lease-", nil, kin)
		res <- err
	}()
	zktest.AwaitStruck(t, f)
	<-watch // the lease exists
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateProtectedWhile = %v; want context.Canceled", err)
	}
	if kids := zktest.AwaitChildren(t, obs, root+"/leases", 1); len(kids) != 1 {
		t.Fatalf("leases = %v", kids)
	}
	p.Cut() // the abandoned request fails: forgetProtected
	zktest.AwaitChildren(t, obs, root+"/leases", 0)
	<-settledOf(h.Delete(kin))
}

// TestReviewCheckedParentAndKinGone: both the parent of the new node and kin
// are missing: ErrKinGone (the check comes first), and no parent is made.
func TestReviewCheckedParentAndKinGone(t *testing.T) {
	_, h, obs, root, kin := checkedSetup(t)
	<-settledOf(h.Delete(kin))
	_, err := h.CreateProtectedWhile(context.Background(), root+"/nowhere/leases", "lease-", nil, kin)
	if !errors.Is(err, ErrKinGone) {
		t.Fatalf("CreateProtectedWhile = %v; want ErrKinGone", err)
	}
	if ok, _, err := obs.Exists(root + "/nowhere"); err != nil || ok {
		t.Fatalf("Exists(%s/nowhere) = %v, %v; want no parent made", root, ok, err)
	}
}
