package dsync_test

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR113ObserverSeesLeaderAfterParentDropped: an observer watches
// an Election's path; a campaign makes the path (CreateParents) and gives
// up with its latch create black-holed, so its cleanup marks the path the
// observer watches (a child created and deleted: a children watch fires;
// round 113 had it deleted). Another campaign then leads: the observer
// must report it.
func TestReviewR113ObserverSeesLeaderAfterParentDropped(t *testing.T) {
	t.Parallel()
	ctx, parent, obs := r45Start(t)
	proxy, s := r45Proxied(t)
	f1 := proxy.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.Pass)
	f2 := proxy.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.BlackHole)
	mark := proxy.Strike(zktest.Match{Op: zktest.OpMulti, Path: parent + "/", Prefix: true}, zktest.Pass)
	defer f1.Disarm()
	defer f2.Disarm()
	defer mark.Disarm()

	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen := make(chan dsync.Participant, 8)
	watcher := dial(t, []string{shared.Addr()})
	go func() {
		defer close(seen)
		for p, err := range dsync.NewElection(watcher, parent).Observe(octx) {
			if err == nil {
				seen <- p
			}
		}
	}()

	uctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { _, err := dsync.NewElection(s, parent).Campaign(uctx, "a"); res <- err }()
	r38Struck(t, f2, res)
	cancel()
	if err := reviewRecv(t, "a's campaign", res); err == nil {
		t.Fatal("a's campaign = nil")
	}
	proxy.Heal()
	reviewRecv(t, "a's cleanup's mark of the path", mark.Struck())
	if there, st, err := obs.Exists(parent); err != nil || !there || st.Cversion == 0 {
		t.Fatalf("the path after a's cleanup: %v, %+v, %v; want it there, marked", there, st, err)
	}
	other := dial(t, []string{shared.Addr()})
	if _, err := dsync.NewElection(other, parent).Campaign(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	p := reviewRecv(t, "the observer's report of b", seen)
	if string(p.Data) != "b" {
		t.Fatalf("observed %+v; want b", p)
	}
}
