package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 35: give-ups among the deletes under way, for every kind of
// lock node.

// TestReviewR35TryAfterGiveUpInFlight: a blocking acquisition's create is
// applied, its reply swallowed on a live connection (Drop), and its ctx
// ends: the create is given up in flight. A Try of the same session right
// after, with nothing held anywhere, must succeed: the given-up node is
// among the session's deletes under way (zkconn.Deletes.Of matches it by
// its UUID), so queue.past waits for it rather than fail on it. Pinned for
// the Mutex, a writer before a reader and a reader before a writer
// (passes).
func TestReviewR35TryAfterGiveUpInFlight(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, tc := range []struct {
		name string
		run  func(s *zkconn.Session, path string) (giveUp func(context.Context) error, try func() (ok bool, undo func()))
	}{
		{"mutex", func(s *zkconn.Session, path string) (func(context.Context) error, func() (bool, func())) {
			m := dsync.NewMutex(s, path)
			return func(ctx context.Context) error { _, err := m.LockContext(ctx); return err },
				func() (bool, func()) { return m.TryLock(), m.Unlock }
		}},
		{"writer-then-reader", func(s *zkconn.Session, path string) (func(context.Context) error, func() (bool, func())) {
			rw := dsync.NewRWMutex(s, path)
			return func(ctx context.Context) error { _, err := rw.LockContext(ctx); return err },
				func() (bool, func()) { return rw.TryRLock(), rw.RUnlock }
		}},
		{"reader-then-writer", func(s *zkconn.Session, path string) (func(context.Context) error, func() (bool, func())) {
			rw := dsync.NewRWMutex(s, path)
			return func(ctx context.Context) error { _, err := rw.RLockContext(ctx); return err },
				func() (bool, func()) { return rw.TryLock(), rw.Unlock }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			persistentParents(t, obs, path) // the create makes its node at once
			p := zktest.NewProxy(t, shared.Addr())
			s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
			giveUp, try := tc.run(s, path)
			f := p.Strike(createOf(path), zktest.Drop)
			defer f.Disarm()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- giveUp(ctx) }()
			zktest.AwaitStruck(t, f)
			orphan := awaitChildren(t, obs, path, 1) // applied, its reply swallowed
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("acquisition = %v; want context.Canceled", err)
			}
			ok, undo := try()
			if !ok {
				t.Fatalf("Try on a free lock right after a give-up in flight = false; children %v (%v: the given-up node)", children(t, obs, path), orphan)
			}
			undo()
			awaitChildren(t, obs, path, 0)
		})
	}
}
