package dsync_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Two acquirers of one Weighted: the first's deferred gate handoff writes
// w.undoing = nil after leave, while the second, now inside the gate, uses it.
func TestReview3WeightedUndoingRace(t *testing.T) {
	t.Parallel()
	w := dsync.NewWeighted(dial(t, []string{shared.Addr()}), lockPath(t), 1)
	if err := w.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 8; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i+1)*150*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := w.Acquire(ctx, 1)
				_ = start
				if err == nil {
					t.Error("acquired a full semaphore")
				}
			}(i)
		}
		wg.Wait()
	}
	w.Release(1)
}

// unlockAfterReconnect: a Mutex held through a dropped connection (same
// session, hold still valid) is unlocked on a slow but answering network;
// the same Session then tries the lock through another Mutex. Unlock
// returns once the delete has gone out on the connection up now (not the
// one the hold began on), so the create that follows comes after it, as it
// does without the reconnect.
func unlockAfterReconnect(t *testing.T, reconnect bool) bool {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
	m := dsync.NewMutex(s, path)
	m.Lock()
	if reconnect {
		sub := s.Subscribe()
		p.Cut()
		for ev := range sub.C() {
			if ev.State == zkconn.StateReconnected {
				break
			}
		}
		sub.Stop()
	}
	p.SetDelay(30 * time.Millisecond)
	for i := 0; i < 3; i++ { // the wire learns the round trip
		if _, err := m.Participants(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	other := dsync.NewMutex(s, path) // same Session: its create comes after the delete
	start := time.Now()
	m.Unlock()
	took := time.Since(start)
	ok := other.TryLock()
	t.Logf("reconnect=%v: Unlock took %v; other.TryLock() = %v", reconnect, took, ok)
	if ok {
		other.Unlock()
	}
	return ok
}

func TestReview3UnlockVisibleAfterReconnect(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	if !unlockAfterReconnect(t, false) {
		t.Fatal("control: release not visible after Unlock without a reconnect")
	}
	if !unlockAfterReconnect(t, true) {
		t.Fatal("release not applied before the next create: the hold's Handle kept the link of the dropped connection, so Unlock did not wait for its delete to go out")
	}
}
