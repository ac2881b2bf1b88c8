package zkconn

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR18AuthReplyLost (a check, passes): the first setAuth is
// applied on a connection whose reply is lost (the connection closes);
// go-zookeeper reconnects to the same session without the credentials
// (AddAuth failed, so it has none to re-send); run tries once more a second
// later, on the new connection, and only then reports the session:
// a node with a digest ACL made right after is readable.
func TestReviewR18AuthReplyLost(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, shared.Addr())
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.Lose)
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	s := dial(t, []string{p.Addr()}, WithDigestAuth("alice", "secret"), WithACL(acl...), WithSessionTimeout(10*time.Second))
	select {
	case <-f.Struck():
	default:
		t.Fatal("the setAuth was not struck")
	}
	h := current(t, s)
	node, err := h.CreateProtected(context.Background(), "/zkconn-acl-"+t.Name(), "lock-", []byte("x"))
	if err != nil {
		t.Fatalf("CreateProtected = %v", err)
	}
	if _, _, err := h.Conn().Get(node); err != nil {
		t.Fatalf("Get = %v", err)
	}
	_ = s
}
