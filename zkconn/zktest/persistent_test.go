package zktest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// TestCreatePersistent: the nodes CreatePersistent makes stay when emptied,
// on a server that removes empty containers every 10 ms; an existing node is
// accepted, and a missing parent is an error.
func TestCreatePersistent(t *testing.T) {
	t.Parallel()
	srv := Start(t, WithSystemProperty("znode.container.checkIntervalMs", "10"))
	c := Observer(t, srv.Addr())
	if _, err := c.Create("/a", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	made := []string{"/a", "/a/b", "/c"}
	if err := CreatePersistent(ctx, []string{srv.Addr()}, made...); err != nil {
		t.Fatalf("CreatePersistent(%v) = %v", made, err)
	}
	// Each made node has had a child and is empty: a container would now be
	// removed at the next check. A container emptied after them is removed
	// at that check or a later one, and a second one's removal comes after
	// every delete of an earlier check (the server applies them in order).
	for _, p := range made[1:] {
		if _, err := c.Create(p+"/kid", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(p+"/kid", -1); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/x1", "/x2"} {
		if _, err := c.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(p+"/kid", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		ok, _, gone, err := c.ExistsW(p)
		if err != nil || !ok {
			t.Fatalf("ExistsW(%s) = %v, %v", p, ok, err)
		}
		if err := c.Delete(p+"/kid", -1); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-gone:
			if ev.Type != zk.EventNodeDeleted {
				t.Fatalf("%s: event %v; want its removal", p, ev)
			}
		case <-ctx.Done():
			t.Fatalf("the empty container %s was not removed", p)
		}
	}
	for _, p := range made {
		ok, st, err := c.Exists(p)
		if err != nil || !ok || st.EphemeralOwner != 0 {
			t.Fatalf("Exists(%s) = %v, %+v, %v; want a persistent node, still there", p, ok, st, err)
		}
	}

	if err := CreatePersistent(ctx, []string{srv.Addr()}, "/none/x"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("CreatePersistent(/none/x) = %v; want zk.ErrNoNode", err)
	}
}

// TestCreatePersistentLostConnection: a create whose connection is cut
// fails the call, and a server that closes every connection at once, as one
// still starting does, fails it with zk.ErrNoServer.
func TestCreatePersistentLostConnection(t *testing.T) {
	srv := Start(t)
	p := NewProxy(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := p.Strike(Match{Op: OpCreate, Path: "/cut"}, Cut)
	if err := CreatePersistent(ctx, []string{p.Addr()}, "/cut"); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("CreatePersistent, its create cut = %v; want zk.ErrConnectionClosed", err)
	}
	select {
	case <-f.Struck():
	default:
		t.Fatal("the fault at the create did not strike")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := CreatePersistent(ctx, []string{ln.Addr().String()}, "/a"); !errors.Is(err, zk.ErrNoServer) {
		t.Fatalf("CreatePersistent, every connection closed at once = %v; want zk.ErrNoServer", err)
	}
}

// TestCreatePersistentLeavesNothing: through a black hole, where
// go-zookeeper's handshake would wait for over a minute (ten read timeouts),
// CreatePersistent returns at its ctx, give or take go-zookeeper's second of
// waiting for its close, with no goroutine of its connection left.
func TestCreatePersistentLeavesNothing(t *testing.T) {
	srv := Start(t)
	hole := NewProxy(t, srv.Addr())
	hole.BlackHole()
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := CreatePersistent(ctx, []string{hole.Addr()}, "/d")
	deadline, _ := ctx.Deadline()
	if over := time.Since(deadline); over > 5*time.Second {
		t.Fatalf("CreatePersistent returned %v after its ctx's deadline; want about a second at most", over)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreatePersistent through a black hole = %v; want the ctx's error", err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("after CreatePersistent returned: %v", err)
	}
}

// TestCreatePersistentSeveralDownServers: with six addresses of hosts that
// are down, where each dial waits for its timeout (a second), CreatePersistent
// still returns about a second after its ctx, not after a dial to each.
func TestCreatePersistentSeveralDownServers(t *testing.T) {
	var addrs []string
	for range 6 {
		addrs = append(addrs, Unreachable(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := CreatePersistent(ctx, addrs, "/a")
	deadline, _ := ctx.Deadline()
	// A dial under way at the deadline ends at most a second after it; one
	// more would end later still.
	if over := time.Since(deadline); over > 1500*time.Millisecond {
		t.Fatalf("CreatePersistent returned %v after its ctx's deadline; want about a second at most", over)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreatePersistent, every host down = %v; want the ctx's error", err)
	}
}

// TestConnSetDialEndingAfterClose: a dial under way when the set closes
// gives no connection, even when it succeeds: go-zookeeper would otherwise
// start a handshake on it, which on a server answering nothing holds
// CreatePersistent's close for over a minute.
func TestConnSetDialEndingAfterClose(t *testing.T) {
	srv := Start(t)
	hole := NewProxy(t, srv.Addr())
	hole.BlackHole()
	var s connSet
	dialing, release := make(chan struct{}), make(chan struct{})
	held := func(network, address string, timeout time.Duration) (net.Conn, error) {
		close(dialing)
		<-release
		return net.DialTimeout(network, address, timeout)
	}
	type result struct {
		c   net.Conn
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := s.dialer(held)("tcp", hole.Addr(), time.Second)
		res <- result{c, err}
	}()
	<-dialing
	s.close()
	close(release)
	r := <-res
	if r.c != nil {
		r.c.Close()
	}
	if r.c != nil || !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("dial ending after close = %v, %v; want no connection and net.ErrClosed", r.c, r.err)
	}
}
