package zkconn

import (
	"testing"
	"time"
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
	ps, addrs := r96Proxies(t, 10, 0)
	s := dial(t, addrs, WithSessionTimeout(3*time.Second))
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
	r96CutReconnects(t, h.ID(), sub, ps, "every server reachable, 500ms round trip now, 3s timeout, fast at connect")
}
