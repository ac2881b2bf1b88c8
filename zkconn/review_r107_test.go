package zkconn

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR107FailoverInLastTenth (review round 107): the failover that
// greetWait was made for (round 93: two servers, the other one accepts
// connections but does not answer, the connection in use drops) comes back
// on the first server (T/2 for the silent one, then go-zookeeper's pause of
// 1s) within the session timeout of heard, while the server still holds the
// session, in its last tenth but before the give-up's margin: the session
// resumes (Reconnected, not Lost).
//
// The drop comes as the next ping arrives (CutAtPing), a third of T after
// the last ping, whose write is heard: with T = 12s the connection is back
// at heard + 4s + 6s + 1s = heard + 11s (and a little): after heard +
// 10.8s, where a give-up a tenth of T ahead (220c9b2) loses it, and before
// heard + 11.75s, the give-up with a margin of at most 250ms.
func TestReviewR107FailoverInLastTenth(t *testing.T) {
	const T = 12 * time.Second
	p0 := zktest.NewProxy(t, shared.Addr())
	p1 := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p0.Addr(), p1.Addr()}, WithSessionTimeout(T))
	sub := s.Subscribe()
	t.Cleanup(sub.Stop)
	first := current(t, s)
	if got := s.SessionTimeout(); got != T {
		t.Fatalf("granted %v, not %v", got, T)
	}
	cur, other := p0, p1
	if p1.Conns() == 1 {
		cur, other = p1, p0
	}
	other.BlackHole() // accepts, never answers: greetWait closes it after T/2
	var cut time.Time
	select {
	case cut = <-cur.CutAtPing():
	case <-time.After(T):
		t.Fatal("no ping through the proxy")
	}
	await(t, sub, StateSuspended, 30*time.Second)
	ev := r93Next(t, sub, 30*time.Second)
	t.Logf("%v %v after the cut, which came a third of %v after heard", ev.State, ev.Time.Sub(cut).Round(time.Millisecond), T)
	if ev.State != StateReconnected {
		// Did the server still hold the session? A connection that comes
		// back with it says so: the next session tells.
		h := current(t, s)
		t.Fatalf("session %#x: %v %v after the cut, the server holding it until %v after; want reconnected (now session %#x)",
			first.ID(), ev.State, ev.Time.Sub(cut).Round(time.Millisecond), T-T/3, h.ID())
	}
}
