package dsync_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR113DeleteIfEmptyTakesOthersNode: a first use of a path whose
// parent is missing gets NoNode, and its CreateParents' create of the parent
// is black-holed. Meanwhile someone else makes the parent: an operator (a
// persistent node with data), or another process's Count at that path. The
// use gives up (ctx canceled). Its cleanup of the parent (then
// DeleteIfEmpty: any childless node, version -1) deleted that node, which
// it never made; DeleteUnused reads the parent (struck: Pass) and leaves a
// node that holds data. (TestDeleteUnused pins the decision itself.)
func TestReviewR113DeleteIfEmptyTakesOthersNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		use  func(ctx context.Context, s *zkconn.Session, parent string) error
		make func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string)
	}{
		{"MutexOperatorParent", func(ctx context.Context, s *zkconn.Session, parent string) error {
			_, err := dsync.NewMutex(s, parent).LockContext(ctx)
			return err
		}, func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string) {
			if _, err := obs.Create(parent, []byte("operator"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}},
		{"CountSetUnderOtherCount", func(ctx context.Context, s *zkconn.Session, parent string) error {
			return dsync.NewCount(s, parent+"/count", 0).Set(ctx, 1)
		}, func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string) {
			other := dial(t, []string{shared.Addr()})
			if err := dsync.NewCount(other, parent, 0).Set(ctx, 7); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, parent, obs := r45Start(t)
			proxy, s := r45Proxied(t)
			f := proxy.Strike(zktest.Match{Op: zktest.OpCreateContainer, Path: parent}, zktest.BlackHole)
			defer f.Disarm()
			read := proxy.Strike(zktest.Match{Op: zktest.OpExists, Path: parent}, zktest.Pass)
			defer read.Disarm()
			uctx, cancel := context.WithCancel(ctx)
			res := make(chan error, 1)
			go func() { res <- tc.use(uctx, s, parent) }()
			r38Struck(t, f, res)
			tc.make(ctx, t, obs, parent) // someone else's node at parent
			data, _, err := obs.Get(parent)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := reviewRecv(t, "the use", res); err == nil {
				t.Fatal("the use = nil with its ctx canceled")
			}
			proxy.Heal()
			reviewRecv(t, "the cleanup's read of the parent", read.Struck())
			// A request after the cleanup's decision, on its connection.
			if _, err := dsync.NewCount(s, parent+"-probe", 0).Get(ctx); err != nil {
				t.Fatal(err)
			}
			if d, _, err := obs.Get(parent); err != nil || !bytes.Equal(d, data) {
				t.Fatalf("%s (data %q), made by someone else, after the given-up use's cleanup: %q, %v", parent, data, d, err)
			}
		})
	}
}

// TestReviewR113ObserverSeesLeaderAfterParentDropped: an observer watches
// an Election's path; a campaign makes the path (CreateParents) and gives
// up with its latch create black-holed, so its DeleteUnused deletes the
// path the observer watches (empty, children watch). Another campaign then
// leads: the observer must report it.
func TestReviewR113ObserverSeesLeaderAfterParentDropped(t *testing.T) {
	t.Parallel()
	ctx, parent, obs := r45Start(t)
	proxy, s := r45Proxied(t)
	f1 := proxy.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.Pass)
	f2 := proxy.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.BlackHole)
	defer f1.Disarm()
	defer f2.Disarm()

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
	for { // the path is dropped by a's DeleteUnused
		there, _, gone, err := obs.ExistsW(parent)
		if err != nil {
			t.Fatal(err)
		}
		if !there {
			break
		}
		reviewRecv(t, parent+"'s delete", gone)
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
