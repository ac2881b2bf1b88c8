package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// rlAwait reads sub until it reports state st, or fails the test after 30s.
func rlAwait(t *testing.T, sub *zkconn.Subscription, st zkconn.State) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription closed before %v", st)
			}
			if ev.State == st {
				return
			}
		case <-timeout:
			t.Fatalf("no %v within 30s", st)
		}
	}
}

// TestReviewReleaseUnlockBlocksWhileAuthResent: Unlock must not wait for the
// network (issue 12). Handle.Release waits until the delete is written, the
// connection drops, or the session is lost. With WithDigestAuth,
// go-zookeeper re-sends the credentials on every reconnect and waits for the
// reply before it starts its send loop (resendZkAuth), while the Session
// already reports the connection up (HasSession came first). If the network
// goes silent at that request, nothing queued is written, and the connection
// is declared down only after go-zookeeper's read timeout (2/3 of the
// session timeout): Unlock blocks that long.
func TestReviewReleaseUnlockBlocksWhileAuthResent(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithDigestAuth("rr", "pw"), zkconn.WithSessionTimeout(6*time.Second))
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	m := dsync.NewMutex(s, path)
	m.Lock()
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.BlackHole)
	defer f.Disarm()
	p.Cut()
	rlAwait(t, sub, zkconn.StateSuspended)
	rlAwait(t, sub, zkconn.StateReconnected)
	<-f.Struck() // the re-sent credentials went into the black hole

	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Unlock()
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		<-done
		t.Fatalf("Unlock blocked %v on a silent network (connection reported up, go-zookeeper's send loop waiting for the auth reply)", time.Since(start).Round(time.Millisecond))
	}
	awaitChildren(t, obs, path, 0)
}

// TestReviewReleaseTryLockAfterUnlockWhileSuspended: Mutex.Unlock's doc says
// requests this process sends through the same Session later are applied
// after the delete, "so a Lock here never queues behind its own release".
// Release returns at once when the connection is down, and the gate no
// longer carries the delete: the delete then waits for the reconnect in
// Handle.Do, and so does the next acquisition's create; whichever reaches
// go-zookeeper's queue first is applied first. When the create wins, a
// TryLock of the same Mutex, right after its own Unlock, with no other
// holder anywhere, finds its own released node ahead and fails with
// ErrWouldBlock (the old gate waited for the delete to settle, so it could
// not). Two proxies to one server make the reconnects quick (go-zookeeper
// waits a second before it dials the only server again).
func TestReviewReleaseTryLockAfterUnlockWhileSuspended(t *testing.T) {
	p1 := zktest.NewProxy(t, shared.Addr())
	p2 := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p1.Addr(), p2.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
	obs := observer(t, shared.Addr())
	path := lockPath(t)
	m := dsync.NewMutex(s, path)
	sub := s.Subscribe()
	defer sub.Stop()
	rlAwait(t, sub, zkconn.StateConnected)
	const attempts = 300 // the race is lost in about 1 in 60 (1 in 12 under -race)
	failed, tried := 0, 0
	for ; tried < attempts && failed == 0; tried++ {
		m.Lock()
		p1.Cut()
		p2.Cut()
		rlAwait(t, sub, zkconn.StateSuspended)
		m.Unlock() // the connection is down: returns at once
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := m.TryLockContext(ctx)
		cancel()
		switch {
		case err == nil:
			m.Unlock()
		case errors.Is(err, dsync.ErrWouldBlock):
			failed++
		default:
			t.Fatalf("TryLockContext = %v", err)
		}
		rlAwait(t, sub, zkconn.StateReconnected)
		awaitChildren(t, obs, path, 0)
	}
	if failed > 0 {
		t.Fatalf("TryLockContext right after Unlock of the same Mutex (no other holder) = ErrWouldBlock in attempt %d: its create was applied before its own release's delete", tried)
	}
}

// TestReviewReleaseRaceHoldWithDigestAuth: under -race, tap.hold keeps
// go-zookeeper from reading replies on a reconnected connection until its
// setWatches request is written (or 100 ms), so that go-zookeeper's read of
// Conn.lastZxid for that request happens before its receive loop writes it
// (go-zookeeper/zk#35). With WithDigestAuth, go-zookeeper re-sends the
// credentials first and starts its send loop only once their reply is read:
// that reply is held, so the setWatches request cannot be written and the
// hold always runs its full 100 ms: every reconnect stalls every request
// (a release's delete that waited for the reconnect, here) for 100 ms, and
// the hold ends by its timer, which gives the race detector no
// happens-before edge from the read of lastZxid to the write it guards
// against. Without -race there is no hold and the test passes.
func TestReviewReleaseRaceHoldWithDigestAuth(t *testing.T) {
	stall := func(t *testing.T, opts ...zkconn.Option) time.Duration {
		p := zktest.NewProxy(t, shared.Addr())
		s := dial(t, []string{p.Addr()}, append(opts, zkconn.WithSessionTimeout(10*time.Second))...)
		obs := observer(t, shared.Addr())
		path := lockPath(t)
		ms := make([]*dsync.Mutex, 4)
		for i := range ms {
			ms[i] = dsync.NewMutex(s, fmt.Sprintf("%s/%d", path, i))
		}
		sub := s.Subscribe()
		defer sub.Stop()
		rlAwait(t, sub, zkconn.StateConnected)
		var stalls []time.Duration
		for range 5 {
			// Tracked holds: a getData watch on each node, which
			// go-zookeeper sets again on the reconnect (their deletes
			// are not applied yet).
			for _, m := range ms {
				if _, err := m.LockContext(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			p.Cut()
			rlAwait(t, sub, zkconn.StateSuspended)
			for _, m := range ms {
				m.Unlock() // the delete waits for the reconnect
			}
			rlAwait(t, sub, zkconn.StateReconnected)
			start := time.Now()
			for i := range ms {
				awaitChildren(t, obs, fmt.Sprintf("%s/%d", path, i), 0)
			}
			stalls = append(stalls, time.Since(start))
		}
		slices.Sort(stalls)
		t.Logf("deletes applied after the reconnect was reported: %v", stalls)
		return stalls[len(stalls)/2]
	}
	var plain, authed time.Duration
	t.Run("plain", func(t *testing.T) { plain = stall(t) })
	t.Run("digest", func(t *testing.T) { authed = stall(t, zkconn.WithDigestAuth("rr", "pw")) })
	if authed >= 100*time.Millisecond && authed > 3*plain {
		t.Fatalf("median stall after a reconnect: %v with WithDigestAuth, %v without: tap.hold ran its full 100 ms (go-zookeeper's send loop waits for the auth reply the hold keeps back)", authed.Round(time.Millisecond), plain.Round(time.Millisecond))
	}
}
