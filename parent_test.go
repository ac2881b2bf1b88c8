package dsync_test

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestGivenUpCreateDropsItsParent: the first use of a path whose parent does
// not exist yet ends (its ctx canceled) as the parent's create goes out:
// the parent, a container that would never have a child, is deleted, not
// left for good (the server removes only containers that had a child). For
// a lock's node (made by a protected create) and a Value's.
func TestGivenUpCreateDropsItsParent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		use  func(ctx context.Context, s *zkconn.Session, parent string) error
	}{
		{"Mutex", func(ctx context.Context, s *zkconn.Session, parent string) error {
			_, err := dsync.NewMutex(s, parent).LockContext(ctx)
			return err
		}},
		{"CountSet", func(ctx context.Context, s *zkconn.Session, parent string) error {
			return dsync.NewCount(s, parent+"/count", 0).Set(ctx, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, parent, obs := r45Start(t)
			proxy, s := r45Proxied(t)
			f := proxy.Strike(zktest.Match{Op: zktest.OpCreateContainer, Path: parent}, zktest.Pass)
			defer f.Disarm()
			uctx, cancel := context.WithCancel(ctx)
			res := make(chan error, 1)
			go func() { res <- tc.use(uctx, s, parent) }()
			r38Struck(t, f, res)
			cancel()
			if err := reviewRecv(t, "the use", res); err == nil {
				t.Fatal("the use = nil with its ctx canceled at the parent's create")
			}
			for {
				there, _, gone, err := obs.ExistsW(parent)
				if err != nil {
					t.Fatal(err)
				}
				if !there {
					return
				}
				reviewRecv(t, parent+"'s delete", gone)
			}
		})
	}
}
