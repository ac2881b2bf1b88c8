package zktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestAwaitChildren(t *testing.T) {
	srv := Start(t)
	c := Observer(t, srv.Addr())
	if kids := AwaitChildren(t, c, "/missing", 0); len(kids) != 0 {
		t.Fatalf("AwaitChildren(/missing, 0) = %v; want none", kids)
	}
	errs := make(chan error, 1)
	go func() { // the parent appears, then its children, while the test waits
		for _, p := range []string{"/p", "/p/a", "/p/b"} {
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	if kids := AwaitChildren(t, c, "/p", 2); len(kids) != 2 {
		t.Fatalf("AwaitChildren(/p, 2) = %v; want 2 children", kids)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestCreatePersistent: the nodes CreatePersistent makes stay when emptied,
// on a server that removes empty containers every 10 ms; an existing node is
// accepted, a missing parent is an error, and a server that answers nothing
// ends the call at its ctx.
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

	hole := NewProxy(t, srv.Addr())
	hole.BlackHole()
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := CreatePersistent(short, []string{hole.Addr()}, "/d"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreatePersistent through a black hole = %v; want the ctx's error", err)
	}
}
