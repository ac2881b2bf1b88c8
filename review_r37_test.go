package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR37LockNoDoneCreateReplyDropped: Lock (Background) and
// LockContext(WithoutCancel) — ctxs whose Done is nil, so callOr runs the
// create inline and newGiveUp returns a zero giveUp (e2c451d). The create is
// applied, its reply swallowed on a live connection: the tap closes the
// connection at the next reply, the create is recovered, the lock is held
// with exactly one node, nothing is recorded as being deleted, and a TryLock
// after Unlock succeeds. No panic on a zero giveUp.
func TestReviewR37LockNoDoneCreateReplyDropped(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	persistentParents(t, obs, path)
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
	m := dsync.NewMutex(s, path)
	for round := range 4 {
		f := p.Strike(createOf(path), zktest.Drop)
		res := make(chan error, 1)
		go func() {
			if round%2 == 0 {
				m.Lock()
				res <- nil
				return
			}
			_, err := m.LockContext(context.WithoutCancel(context.Background()))
			res <- err
		}()
		zktest.AwaitStruck(t, f)
		awaitChildren(t, obs, path, 1)
		if err := <-res; err != nil {
			t.Fatalf("round %d: lock = %v", round, err)
		}
		if c := children(t, obs, path); len(c) != 1 {
			t.Fatalf("round %d: children %v; want 1", round, c)
		}
		h, err := s.Current(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := h.Deleting(path); len(d) != 0 {
			t.Fatalf("round %d: deletes under way while held: %v", round, d)
		}
		m.Unlock()
		if !m.TryLock() {
			t.Fatalf("round %d: TryLock after Unlock = false; children %v", round, children(t, obs, path))
		}
		m.Unlock()
		awaitChildren(t, obs, path, 0)
	}
}
