package dsync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR80ObserveSharedChildrenFault: two Observe loops on one
// proxied Session wait on an election path that exists with no one in it
// (ChildrenW; the second shares the first's child watch). The listing
// with a watch of the first, then the second's read (shared, without a
// watch), are struck (Cut, Lose, Drop); then leaders come and go on
// another session, with the connection cut while both wait. Both loops
// must report every leader, and once they end at most one child watch per
// loop is left at the path, whatever the four changes and two cuts did:
// the loops wake on the same event and list at once, and two reads out at
// once each set a watch (zkconn.Handle.ChildrenW). That took a loaded
// machine: usually the test ends the loops before they list again.
func TestReviewR80ObserveSharedChildrenFault(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop, zktest.Pass} {
		t.Run(fmt.Sprint(action), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			if _, err := obs.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			p := zktest.NewProxy(t, shared.Addr())
			sess := dial(t, []string{p.Addr()})
			e := dsync.NewElection(sess, path)
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			strike := func() []*zktest.Fault {
				return []*zktest.Fault{
					p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path}, zktest.Pass),
					p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path}, action),
				}
			}
			fa := strike()
			a := r77Observe(t, octx, e)
			for _, f := range fa {
				zktest.AwaitStruck(t, f)
			}
			fb := strike()
			b := r77Observe(t, octx, e)
			for _, f := range fb {
				zktest.AwaitStruck(t, f)
			}
			ls := dial(t, []string{shared.Addr()})
			for i := range 4 {
				if i%2 == 1 {
					r66Flush(t, ctx, sess, "/")
					p.Cut()
				}
				le := dsync.NewElection(ls, path)
				id := fmt.Sprintf("leader-%d", i)
				if _, err := le.Campaign(ctx, id); err != nil {
					t.Fatal(err)
				}
				r77Reported(t, ctx, a, id)
				r77Reported(t, ctx, b, id)
				if err := le.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ocancel()
			for range a {
			}
			for range b {
			}
			r66Flush(t, ctx, sess, "/")
			for k, n := range zktest.ClientWatchTable(t, connOf(t, sess)) {
				t.Logf("go-zookeeper holds %d %+v", n, k)
				if n > 2 {
					t.Errorf("go-zookeeper holds %d watches %+v", n, k)
				}
			}
		})
	}
}
