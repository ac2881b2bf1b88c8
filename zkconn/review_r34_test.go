package zkconn

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 34: a reply lost on a connection that stays up.

// TestReviewR34ReplySwallowedFailsRequest: a request is applied and its
// reply swallowed on a connection that stays up (Drop), and nothing is sent
// after it but pings. go-zookeeper, which matches replies by xid, would wait
// for that reply as long as the connection lasts (a dsync acquirer's node
// stayed queued, its gate shut). The first ping's reply comes out of turn:
// the Session closes the connection, the request fails as on a dropped
// connection, Do sends it again, and the session goes on.
func TestReviewR34ReplySwallowedFailsRequest(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(3*time.Second)) // a ping each second
	sub := s.Subscribe()
	defer sub.Stop()
	h := current(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testRoot(t)
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: root}, zktest.Drop)
	defer f.Disarm()
	err := h.Do(ctx, func(c *zk.Conn) error {
		_, _, err := c.Get(root)
		return err
	})
	select {
	case <-f.Struck():
	default:
		t.Fatal("the fault did not strike the request")
	}
	if err != nil {
		t.Fatalf("Do(Get) with its first reply swallowed = %v; want nil (sent again on the next connection)", err)
	}
	await(t, sub, StateSuspended, time.Minute)
	await(t, sub, StateReconnected, time.Minute)
	if h2 := current(t, s); h2.ID() != h.ID() {
		t.Fatalf("session %#x after the close; want the same, %#x", h2.ID(), h.ID())
	}
}
