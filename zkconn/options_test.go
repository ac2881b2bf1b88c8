package zkconn

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestDigestAuthAndACL: nodes made with a digest ACL are readable by a
// Session authenticated as their owner, also after it moves to a new
// ZooKeeper session, and by nobody else.
func TestDigestAuthAndACL(t *testing.T) {
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	p := zktest.NewProxy(t, shared.Addr())
	owner := dial(t, []string{p.Addr()}, WithDigestAuth("alice", "secret"), WithACL(acl...), WithSessionTimeout(time.Second))
	stranger := current(t, dial(t, []string{shared.Addr()}))
	ctx := context.Background()
	root := "/zkconn-acl-" + t.Name() // parents get the ACL too: keep them apart
	sub := owner.Subscribe()
	defer sub.Stop()
	for round := 0; round < 2; round++ {
		h := current(t, owner)
		node, err := h.CreateProtected(ctx, root+"/locks", "lock-", []byte("x"))
		if err != nil {
			t.Fatalf("round %d: CreateProtected with a digest ACL = %v", round, err)
		}
		if _, _, err := stranger.Conn().Get(node); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("round %d: stranger Get = %v; want zk.ErrNoAuth", round, err)
		}
		if _, err := stranger.Conn().Create(root+"/locks/x", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("round %d: stranger Create under the container = %v; want zk.ErrNoAuth", round, err)
		}
		if data, _, err := h.Conn().Get(node); err != nil || string(data) != "x" {
			t.Fatalf("round %d: owner Get = %q, %v", round, data, err)
		}
		if round == 0 { // move to a new ZooKeeper session on a new connection
			p.BlackHole()
			await(t, sub, StateLost, 10*time.Second)
			p.Heal()
			await(t, sub, StateConnected, 20*time.Second)
		}
	}
}

// TestDigestAuthWrong: wrong credentials do not open an ACL'd node.
func TestDigestAuthWrong(t *testing.T) {
	acl := zk.DigestACL(zk.PermAll, "bob", "right")
	h := current(t, dial(t, []string{shared.Addr()}, WithDigestAuth("bob", "right"), WithACL(acl...)))
	p, err := h.CreateProtected(context.Background(), "/zkconn-acl-"+t.Name(), "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	wrong := current(t, dial(t, []string{shared.Addr()}, WithDigestAuth("bob", "wrong")))
	if _, _, err := wrong.Conn().Get(p); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("Get with wrong credentials = %v; want zk.ErrNoAuth", err)
	}
}

// TestWithDialer: every connection goes through the given dialer.
func TestWithDialer(t *testing.T) {
	var dials atomic.Int32
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, addr, timeout)
	}
	s := dial(t, []string{shared.Addr()}, WithDialer(dialer))
	if dials.Load() < 1 {
		t.Fatalf("dialer called %d times; want at least 1", dials.Load())
	}
	if _, err := current(t, s).CreateProtected(context.Background(), testRoot(t), "lock-", nil); err != nil {
		t.Fatal(err)
	}
}
