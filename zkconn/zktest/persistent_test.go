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

// TestCreatePersistentSendsAgain: a create whose connection is cut before
// the server has it (Cut), or after it applied it (Lose), is sent again on
// the next connection, and the call succeeds.
func TestCreatePersistentSendsAgain(t *testing.T) {
	srv := Start(t)
	c := Observer(t, srv.Addr())
	p := NewProxy(t, srv.Addr())
	for _, a := range []Action{Cut, Lose} {
		path := "/" + a.String()
		f := p.Strike(Match{Op: OpCreate, Path: path}, a)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := CreatePersistent(ctx, []string{p.Addr()}, path)
		cancel()
		select {
		case <-f.Struck():
		default:
			t.Fatalf("%v: the fault at the create did not strike", a)
		}
		if ok, _, xerr := c.Exists(path); err != nil || xerr != nil || !ok {
			t.Fatalf("%v: CreatePersistent(%s) = %v, then Exists = %v, %v; want nil and the node there", a, path, err, ok, xerr)
		}
	}
}

// TestCreatePersistentWaitsForAServer: while every connection is closed at
// once, as by a server that is starting, the create waits (go-zookeeper fails
// it with zk.ErrNoServer each time it has tried every server, once a second)
// until ctx is done.
func TestCreatePersistentWaitsForAServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- CreatePersistent(ctx, []string{ln.Addr().String()}, "/a") }()
	// A connection after the first comes after a failed round over the
	// servers, which fails the create waiting with zk.ErrNoServer; the third
	// comes a second after that one.
	for n := 0; n < 3; {
		select {
		case <-accepted:
			n++
		case err := <-result:
			t.Fatalf("CreatePersistent = %v while no server answered; want it to wait", err)
		}
	}
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreatePersistent, ctx canceled = %v; want the ctx's error", err)
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
	if over := time.Since(deadline); over > 20*time.Second {
		t.Fatalf("CreatePersistent returned %v after its ctx's deadline; want it within seconds", over)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreatePersistent through a black hole = %v; want the ctx's error", err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("after CreatePersistent returned: %v", err)
	}
}
