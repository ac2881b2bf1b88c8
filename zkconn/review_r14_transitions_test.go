package zkconn

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR14CloseDropsTransitions (review round 14): WithLogger says
// that while l is behind "transitions wait for it" (only other lines are
// dropped) and "Close returns once l has logged what was queued". The
// transitions wait in logs's Subscription; at Close its pump hands on only
// what fits in C's buffer of 16 and closes C (Subscription.drain), so a
// logger more than 16 transitions behind when Close is called never gets
// the rest, StateClosed included, though Close waited for it. Here the
// logger blocks on the first suspension (a sink the outage cuts off) while
// the connection drops and comes back 12 times (25 transitions queued).
func TestReviewR14CloseDropsTransitions(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	g := newLogGate("zkconn: session suspended")
	s := dial(t, []string{p.Addr()}, WithLogger(slog.New(g)))
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, 10*time.Second)
	const drops = 12
	for i := range drops {
		p.Cut()
		await(t, sub, StateSuspended, 30*time.Second)
		await(t, sub, StateReconnected, 30*time.Second)
		if i == 0 {
			select {
			case <-g.blocked:
			case <-time.After(10 * time.Second):
				t.Fatal("the logger got no suspension in 10s")
			}
		}
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	// Every Subscription's pump has seen the Session close (drained and
	// closed C) before the logger is let go.
	awaitGoroutines(t, "the Subscriptions ended", func(gs [][]byte) bool {
		return !slices.ContainsFunc(gs, func(g []byte) bool { return bytes.Contains(g, []byte("zkconn.(*Subscription).pump(")) })
	})
	close(g.release)
	<-closed
	count := map[string]int{}
	for _, m := range g.messages() {
		count[m]++
	}
	want := map[string]int{
		"zkconn: session connected":   1,
		"zkconn: session suspended":   drops,
		"zkconn: session reconnected": drops,
		"zkconn: session closed":      1,
	}
	for m, n := range want {
		if count[m] != n {
			t.Errorf("logged %q %d times; want %d (the logger was behind by %d transitions when Close was called)", m, count[m], n, 2*drops)
		}
	}
}
