package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR77ObserveMissingPathFault: Observe on a path that does not
// exist, its CreatedW's exists with a watch struck (Pass then a cut; Cut;
// Lose), then a campaign by another session: Observe must report the
// leader (the watch set again by Do, or carried as plain by setWatches).
// And once the loop ends, at most one exists watch is left in go-zookeeper.
func TestReviewR77ObserveMissingPathFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		action zktest.Action
		cut    bool // cut the connection after the reply
	}{
		{"PassThenCut", zktest.Pass, true},
		{"Cut", zktest.Cut, false},
		{"Lose", zktest.Lose, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			path := lockPath(t)
			p := zktest.NewProxy(t, shared.Addr())
			sess := dial(t, []string{p.Addr()})
			e := dsync.NewElection(sess, path)
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			got := r77ObserveMissing(t, octx, p, e, path, tc.action)
			if tc.cut {
				r66Flush(t, ctx, sess, "/")
				p.Cut()
			}
			leader := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			if _, err := leader.Campaign(ctx, "leader"); err != nil {
				t.Fatal(err)
			}
			defer leader.Resign(context.Background())
			r77Reported(t, ctx, got, "leader")
			ocancel()
			for range got {
			}
			r66Flush(t, ctx, sess, "/")
			if n := zktest.ClientWatchTable(t, connOf(t, sess))[zktest.ClientWatch{Path: path, Kind: zktest.ExistWatch}]; n > 1 {
				t.Errorf("go-zookeeper holds %d exists watches at %s once the loop ended; want at most 1", n, path)
			}
		})
	}
}

// r77Observe runs e.Observe(ctx) on a goroutine of its own, sending each
// participant it yields on the returned channel (errors are logged), which
// it closes when the loop ends.
func r77Observe(t *testing.T, ctx context.Context, e *dsync.Election) <-chan dsync.Participant {
	got := make(chan dsync.Participant, 64)
	go func() {
		defer close(got)
		for pt, err := range e.Observe(ctx) {
			if err != nil {
				t.Logf("Observe yielded %v", err)
				continue
			}
			got <- pt
		}
	}()
	return got
}

// r77ObserveMissing starts r77Observe(t, ctx, e), e's path (path) having
// no node, and strikes the loop's exists that sets a watch with action
// (the listing and the exists without a watch before it pass); it returns
// once that has struck.
func r77ObserveMissing(t *testing.T, ctx context.Context, p *zktest.Proxy, e *dsync.Election, path string, action zktest.Action) <-chan dsync.Participant {
	t.Helper()
	// A request takes the first fault armed that it matches.
	faults := []*zktest.Fault{
		p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path}, zktest.Pass),
		p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, zktest.Pass),
		p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, action),
	}
	got := r77Observe(t, ctx, e)
	for _, f := range faults {
		zktest.AwaitStruck(t, f)
	}
	return got
}

// r77Reported fails the test unless the next participant on got, from
// r77Observe, has data want.
func r77Reported(t *testing.T, ctx context.Context, got <-chan dsync.Participant, want string) {
	t.Helper()
	select {
	case pt := <-got:
		if string(pt.Data) != want {
			t.Errorf("Observe yielded %+v; want %s", pt, want)
		}
	case <-ctx.Done():
		t.Fatalf("Observe never reported %s", want)
	}
}
