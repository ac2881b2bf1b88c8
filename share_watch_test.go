package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestObserveLoopsWithoutLeaderShareWatch: Observe loops that end (ctx)
// while no one campaigns must not each leave a watch in go-zookeeper, which
// keeps every watch until its event: on the path's children while the path
// is there, on the path while it is not (30 after 30). The loops of one
// Session now share it, it still tells a loop waiting on it of the next
// leader, and it goes when the children or the path change.
func TestObserveLoopsWithoutLeaderShareWatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		made bool             // the path is there, with no children
		kind zktest.WatchKind // of the watch shared
	}{
		{"empty", true, zktest.ChildWatch},
		{"missing", false, zktest.ExistWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const loops = 30
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			if tc.made {
				if _, err := obs.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			p := zktest.NewProxy(t, shared.Addr())
			sess := dial(t, []string{p.Addr()})
			e := dsync.NewElection(sess, path)
			// observe starts a loop that returns the first participant
			// it yields, and returns once the loop has read what it
			// waits on: the listing, then, if the path is there, the
			// listing with a watch, or else an exists without a watch
			// and, if the watch is not there yet (shares is false), one
			// with it.
			observe := func(ctx context.Context, shares bool) <-chan dsync.Participant {
				t.Helper()
				reads := []zktest.Match{{Op: zktest.OpGetChildren2, Path: path}}
				switch {
				case tc.made:
					reads = append(reads, zktest.Match{Op: zktest.OpGetChildren2, Path: path})
				case shares:
					reads = append(reads, zktest.Match{Op: zktest.OpExists, Path: path})
				default:
					reads = append(reads, zktest.Match{Op: zktest.OpExists, Path: path}, zktest.Match{Op: zktest.OpExists, Path: path})
				}
				faults := make([]*zktest.Fault, len(reads))
				for i, m := range reads {
					faults[i] = p.Strike(m, zktest.Pass)
				}
				got := make(chan dsync.Participant, 1)
				go func() {
					defer close(got)
					for p, err := range e.Observe(ctx) {
						if err != nil {
							t.Errorf("Observe yielded %v", err)
						}
						got <- p
						return
					}
				}()
				for i, f := range faults {
					select {
					case <-f.Struck():
					case p, ok := <-got:
						t.Fatalf("Observe ended (%v, %+v) before read %d (%+v)", ok, p, i, reads[i])
					}
				}
				r66Flush(t, ctx, sess, "/") // the last read's reply is in: its watch is set
				return got
			}
			for i := range loops {
				octx, ocancel := context.WithCancel(ctx)
				got := observe(octx, i > 0)
				ocancel()
				if p, ok := <-got; ok {
					t.Fatalf("Observe yielded %+v with no one campaigning", p)
				}
			}
			if n := clientWatches(t, connOf(t, sess), path); n != 1 {
				t.Errorf("after %d Observe loops ended with no leader, go-zookeeper holds %d watches on %s; want 1", loops, n, path)
			}
			got := observe(ctx, true) // waits on the shared watch
			leader := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			if _, err := leader.Campaign(ctx, "leader"); err != nil {
				t.Fatal(err)
			}
			if p := <-got; string(p.Data) != "leader" {
				t.Errorf("Observe yielded %+v; want the leader", p)
			}
			// The events are in. (While the path was made and still
			// empty, a loop may have set a child watch there: it stays
			// until the children next change.)
			r66Flush(t, ctx, sess, "/")
			if n := zktest.ClientWatchTable(t, connOf(t, sess))[zktest.ClientWatch{Path: path, Kind: tc.kind}]; n != 0 {
				t.Errorf("go-zookeeper holds %d watches of kind %d on %s once a leader came; want 0", n, tc.kind, path)
			}
			if err := leader.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
