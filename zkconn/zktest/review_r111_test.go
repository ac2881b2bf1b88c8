package zktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR111HoldServerClosed: a held request whose connection the
// server closes (the client came back with the same session on a new
// connection, which makes the server close the stale one) is never
// applied; Release's doc says it then fails ("the server's closing it"),
// but the proxy ignores the end of a held connection's upstream: keep pings
// a dead socket, and Release waits for its ctx.
func TestReviewR111HoldServerClosed(t *testing.T) {
	r := newFaultRig(t, zktest.Start(t), 2*time.Second)
	f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/r111-held"}, zktest.Hold)
	done := async(func() error { return create(r.c, "/r111-held") })
	zktest.AwaitStruck(t, f)
	r.failsClosed(t, done, "Create(/r111-held) held")
	// The client reconnects through the proxy with its session: the server
	// closes the held connection.
	r.c.waitState(r.ctx, t, zk.StateHasSession)
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err := f.Release(ctx)
	t.Logf("Release = %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err == nil || ctx.Err() != nil {
		t.Errorf("Release after the server closed the held connection = %v after %v; want an error at once, not ctx's",
			err, time.Since(start).Round(time.Millisecond))
	}
	if r.exists(t, "/r111-held") {
		t.Error("/r111-held exists")
	}
}
