package zkconn

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR97LinkSlowedSinceConnect: round 96's case, but the link was
// fast when the session connected and slowed since (about 500ms round
// trip, 3s timeout, ten server addresses: ten proxies to one server). The
// session lives on the slowed link (a request is answered, and a ping
// interval passes connected). Then the connection drops, every server
// healthy and reachable. Were greetWait to count the fast connect's round
// trip (~1ms) alone, as round 96 had it, it would be 3s/10 = 300ms, under
// the round trip: every reconnect closed before its connect response and
// the session lost, where go-zookeeper alone came back at the first
// attempt. It counts the recent round trips (RoundTrip).
func TestReviewR97LinkSlowedSinceConnect(t *testing.T) {
	const timeout = 3 * time.Second
	var ps []*zktest.Proxy
	var addrs []string
	for range 10 {
		p := zktest.NewProxy(t, shared.Addr())
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	s := dial(t, addrs, WithSessionTimeout(timeout))
	sub := s.Subscribe()
	t.Cleanup(sub.Stop)
	await(t, sub, StateConnected, 30*time.Second)
	h := current(t, s)
	for _, p := range ps {
		p.SetDelay(250 * time.Millisecond) // each way
	}
	// The session lives on the slowed link: requests answered over it,
	// across more than a ping interval.
	for range 3 {
		at := time.Now()
		if _, _, err := h.Conn().Exists("/"); err != nil {
			t.Fatalf("exists over the slowed link: %v", err)
		}
		if d := time.Since(at); d < 400*time.Millisecond {
			t.Fatalf("exists answered in %v: the link is not slowed", d)
		}
	}
	select {
	case ev := <-sub.C():
		t.Fatalf("on the slowed link: %v; want it connected", ev.State)
	default:
	}
	var cur *zktest.Proxy
	for _, p := range ps {
		if p.Conns() == 1 {
			cur = p
		}
	}
	if cur == nil {
		t.Fatal("no proxy holds the connection")
	}
	start := time.Now()
	cur.Cut()
	if ev := r93Next(t, sub, 30*time.Second); ev.State != StateSuspended {
		t.Fatalf("after the cut: %v; want suspended", ev.State)
	}
	ev := r93Next(t, sub, 30*time.Second)
	if ev.State != StateReconnected {
		t.Fatalf("session %#x: %v %v after the cut (every server reachable, 500ms round trip now, 3s timeout, fast at connect); want reconnected", h.ID(), ev.State, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("reconnected after %v", time.Since(start).Round(time.Millisecond))
}
