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
			reads := []zktest.Match{{Op: zktest.OpGetChildren2, Path: path}, {Op: zktest.OpGetChildren2, Path: path}, {Op: zktest.OpExists, Path: path}}
			faults := make([]*zktest.Fault, len(reads))
			for i, m := range reads {
				faults[i] = p.Strike(m, zktest.Pass)
			}
			// the exists with a watch: armed once the plain one struck
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			got := make(chan dsync.Participant, 16)
			go func() {
				defer close(got)
				for pt, err := range e.Observe(octx) {
					if err != nil {
						t.Logf("Observe yielded %v", err)
						continue
					}
					got <- pt
				}
			}()
			for _, f := range faults[:2] {
				<-f.Struck()
			}
			wf := p.Strike(zktest.Match{Op: zktest.OpExists, Path: path}, tc.action)
			<-faults[2].Struck()
			<-wf.Struck()
			if tc.cut {
				r66Flush(t, ctx, sess, "/")
				p.Cut()
			}
			leader := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			if _, err := leader.Campaign(ctx, "leader"); err != nil {
				t.Fatal(err)
			}
			defer leader.Resign(context.Background())
			select {
			case pt := <-got:
				if string(pt.Data) != "leader" {
					t.Errorf("Observe yielded %+v; want the leader", pt)
				}
			case <-ctx.Done():
				t.Fatal("Observe never reported the leader")
			}
			ocancel()
			for range got {
			}
			r66Flush(t, ctx, sess, "/")
			tab := zktest.ClientWatchTable(t, connOf(t, sess))
			for k, n := range tab {
				t.Logf("go-zookeeper holds %d %v", n, k)
			}
		})
	}
}
