package zktest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// awaitGone waits, on exists watches of the rig's observer, until path is
// gone.
func (r *faultRig) awaitGone(t *testing.T, path string) {
	t.Helper()
	for {
		ok, _, ev, err := r.observer.ExistsW(path)
		if err != nil {
			t.Fatalf("ExistsW(%s) = %v", path, err)
		}
		if !ok {
			return
		}
		select {
		case <-ev:
		case <-r.ctx.Done():
			t.Fatalf("waiting for %s to go: %v", path, r.ctx.Err())
		}
	}
}

// A witness is a session through a proxy of its own, with three times the
// timeout of the rig's client and an ephemeral node: partitioned at a
// strike, the server expires it only after it would have expired a session
// of the rig's client last heard before that strike.
type witness struct {
	p    *zktest.Proxy
	node string
}

func newWitness(t *testing.T, r *faultRig, s *zktest.Server, timeout time.Duration) *witness {
	t.Helper()
	w := &witness{p: zktest.NewProxy(t, s.Addr()), node: "/witness-" + strings.ReplaceAll(t.Name(), "/", "_")}
	c := connect(t, []string{w.p.Addr()}, 3*timeout)
	c.waitState(r.ctx, t, zk.StateHasSession)
	if _, err := c.Create(w.node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.p.Heal) // before the client closes
	return w
}

// partition cuts the witness off; expired waits until the server expired
// it.
func (w *witness) partition()                        { w.p.BlackHole() }
func (w *witness) expired(t *testing.T, r *faultRig) { t.Helper(); r.awaitGone(t, w.node) }

// TestStrikeHold: a request struck by Hold is not applied, and its client
// gives the connection up as in a black hole; the proxy keeps the session
// alive at the server past its timeout, and Release delivers the request
// there: applied for that session, late. The connection then ends, and the
// session expires.
func TestStrikeHold(t *testing.T) {
	s := zktest.Start(t)
	r := newFaultRig(t, s, 2*time.Second)
	w := newWitness(t, r, s, 2*time.Second)
	if _, err := r.c.Create("/held-session", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := create(r.observer, "/held"); err != nil {
		t.Fatal(err)
	}
	before := r.p.Requests()
	f := r.p.Strike(zktest.Match{Op: zktest.OpDelete, Path: "/held"}, zktest.Hold)
	done := async(func() error { return r.c.Delete("/held", -1) })
	zktest.AwaitStruck(t, f)
	w.partition()
	// The client cannot come back on a new connection. Heal before the
	// client closes.
	r.p.BlackHole()
	t.Cleanup(r.p.Heal)
	if !r.exists(t, "/held") {
		t.Error("/held is gone; want a request struck by Hold not applied before Release")
	}
	if n := r.p.Requests() - before; n != 0 {
		t.Errorf("Requests() grew by %d over a held delete; want 0", n)
	}
	r.failsClosed(t, done, "Delete(/held) held")
	w.expired(t, r)
	if !r.exists(t, "/held-session") {
		t.Fatal("the held session expired; want it kept alive at the server until Release")
	}
	for range 2 { // Release again returns the same
		if err := f.Release(r.ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
	}
	if r.exists(t, "/held") {
		t.Error("/held is still there after Release; want the held delete applied")
	}
	if n := r.p.Requests() - before; n != 1 {
		t.Errorf("Requests() grew by %d over a held delete released; want 1", n)
	}
	r.awaitGone(t, "/held-session") // no longer kept alive
}

// TestStrikeHoldEnded: a held request whose connection ends (Cut) is never
// applied, and Release says so; Release of a fault that has not struck, or
// that is not Hold, fails.
func TestStrikeHoldEnded(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)
	f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/never"}, zktest.Hold)
	if err := f.Release(r.ctx); err == nil {
		t.Error("Release before the fault struck = nil; want an error")
	}
	done := async(func() error { return create(r.c, "/never") })
	zktest.AwaitStruck(t, f)
	r.p.Cut()
	r.failsClosed(t, done, "Create(/never) held, then cut")
	if err := f.Release(r.ctx); err == nil {
		t.Error("Release after Cut = nil; want an error")
	}
	if r.exists(t, "/never") {
		t.Error("/never exists; want a held request that was cut never applied")
	}
	r.c.waitState(r.ctx, t, zk.StateHasSession)
	pass := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/passed"}, zktest.Pass)
	if err := create(r.c, "/passed"); err != nil {
		t.Fatal(err)
	}
	zktest.AwaitStruck(t, pass)
	if err := pass.Release(r.ctx); err == nil || errors.Is(err, r.ctx.Err()) {
		t.Errorf("Release of a Pass fault = %v; want an error", err)
	}
}
