package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 49: DoOnce's outcome for a request it never sent.

// TestReviewR49CloseBeforeInlineSend pins callOr's closed check on its
// inline path (a ctx that can never be done, context.Background's kind):
// Close lands between DoOnce's wait for a connection and its request. The
// request is never sent, and DoOnce says so: ErrClosed, not an unknown
// outcome. (Without the check, op runs on the closed *zk.Conn, which fails
// it with zk.ErrConnectionClosed: a dropped connection, which DoOnce
// reports as an unknown outcome.) TestReviewR48CloseBeforeSend is the same
// with a ctx that can be done.
func TestReviewR49CloseBeforeInlineSend(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
	h := current(t, s)
	path := testRoot(t)
	sent := p.Strike(zktest.Match{Path: path}, zktest.Pass)
	defer sent.Disarm()
	ctx := &closingCtx{Context: context.Background(), s: s} // Done: nil, after Close
	err := h.DoOnce(ctx, func(c *zk.Conn) error {
		_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	})
	if !errors.Is(err, ErrClosed) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("DoOnce = %v; want ErrClosed, the request never sent", err)
	}
	select {
	case <-sent.Struck():
		t.Fatal("the request was sent")
	default:
	}
	obs := zktest.Observer(t, shared.Addr())
	if ok, _, err := obs.Exists(path); err != nil || ok {
		t.Fatalf("Exists(%s) = %v, %v; want false: nothing sent", path, ok, err)
	}
}
