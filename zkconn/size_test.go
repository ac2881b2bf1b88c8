package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestRequestTooLarge: the largest create the server takes goes through; one
// byte more fails with ErrTooLarge before it is sent. The connection stays
// up, where a server given the request closes it (and one sent again after
// each reconnect would close every connection).
func TestRequestTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dial(t, []string{shared.Addr()})
	sub := s.Subscribe()
	defer sub.Stop()
	if ev := <-sub.C(); ev.State != StateConnected {
		t.Fatalf("state %v; want connected", ev.State)
	}
	h := current(t, s)
	root := testRoot(t)
	plainRoot(t, h.Conn(), root, nil)
	path := root + "/n"
	acl := zk.WorldACL(zk.PermAll)
	// A create: the header (xid, opcode), the path and the data (each after
	// its length), the ACL (a count, then the permissions, the scheme and
	// the id) and the flags.
	overhead := 4 + 4 + 4 + len(path) + 4 + 4 + 4 + 4 + len(acl[0].Scheme) + 4 + len(acl[0].ID) + 4
	create := func(n int) error {
		return h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Create(path, make([]byte, n), 0, acl)
			return err
		})
	}
	if err := create(maxRequest - overhead + 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a create of %d bytes = %v; want ErrTooLarge", maxRequest+1, err)
	}
	if err := create(maxRequest - overhead); err != nil {
		t.Fatalf("a create of %d bytes, the most the server takes = %v", maxRequest, err)
	}
	for _, p := range []string{path, root} {
		if err := h.Conn().Delete(p, -1); err != nil {
			t.Fatalf("Delete(%s) = %v", p, err)
		}
	}
	if n := h.gen.c.wire.dialed.Load(); n != 1 {
		t.Errorf("%d connections dialed; want 1", n)
	}
	select {
	case ev := <-sub.C():
		t.Errorf("the Session went %v", ev.State)
	default:
	}
}

// TestCheckMulti: CheckMulti counts a transaction's bytes as go-zookeeper
// encodes them: the largest it lets through is sent and answered, and one
// byte more is what go-zookeeper refuses to send.
func TestCheckMulti(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	root := testRoot(t)
	plainRoot(t, h.Conn(), root, nil)
	ops := func(n int) []any {
		return []any{
			&zk.CheckVersionRequest{Path: root, Version: -1},
			&zk.CreateRequest{Path: root + "/n", Data: make([]byte, n), Acl: s.ACL()},
		}
	}
	n := 0 // the most data CheckMulti lets through: bisected
	for hi := maxRequest; n+1 < hi; {
		if mid := (n + hi) / 2; CheckMulti(ops(mid)...) == nil {
			n = mid
		} else {
			hi = mid
		}
	}
	send := func(n int) error {
		return h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Multi(ops(n)...)
			return err
		})
	}
	if err := CheckMulti(ops(n + 1)...); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("CheckMulti of %d bytes of data = %v; want ErrTooLarge", n+1, err)
	}
	if err := send(n + 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a transaction CheckMulti refuses = %v; want ErrTooLarge", err)
	}
	if err := send(n); err != nil {
		t.Fatalf("a transaction CheckMulti lets through (%d bytes of data) = %v", n, err)
	}
	for _, p := range []string{root + "/n", root} {
		if err := h.Conn().Delete(p, -1); err != nil {
			t.Fatalf("Delete(%s) = %v", p, err)
		}
	}
	if n := h.gen.c.wire.dialed.Load(); n != 1 {
		t.Errorf("%d connections dialed; want 1", n)
	}
}
