package zkconn

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR96SlowLinkReconnect: a Session on ten server addresses (here
// ten proxies to one server), all over a link whose round trip is about
// 500ms, with a 3s session timeout. The link is well inside what the
// session needs: Dial connects (greetWait gives a first connect a second)
// and the session lives on it (pings every 1s, answered within the 2s deaf
// bound). Then the connection drops (Cut), every server healthy and
// reachable. Were greetWait after the grant 3s/10 = 300ms, under the round
// trip, every reconnect would be closed before its connect response and
// the session lost, where go-zookeeper alone came back at the first
// attempt: it gives twice the last connect's round trip, up to a third of
// the timeout.
func TestReviewR96SlowLinkReconnect(t *testing.T) {
	ps, addrs := r96Proxies(t, 10, 250*time.Millisecond) // each way
	s := dial(t, addrs, WithSessionTimeout(3*time.Second))
	sub := s.Subscribe()
	t.Cleanup(sub.Stop)
	await(t, sub, StateConnected, 30*time.Second)
	r96CutReconnects(t, current(t, s).ID(), sub, ps, "every server reachable, 500ms round trip, 3s timeout")
}

// r96Proxies returns n proxies to the shared server, each delaying what
// passes by delay each way, and their addresses.
func r96Proxies(t *testing.T, n int, delay time.Duration) (ps []*zktest.Proxy, addrs []string) {
	t.Helper()
	for range n {
		p := zktest.NewProxy(t, shared.Addr())
		p.SetDelay(delay)
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	return ps, addrs
}

// r96CutReconnects cuts the connection of session id, which goes through
// one of ps, and requires sub to tell of its suspension and then of its
// reconnection, not of its loss (setup says how the link is).
func r96CutReconnects(t *testing.T, id int64, sub *Subscription, ps []*zktest.Proxy, setup string) {
	t.Helper()
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
	if ev := r93Next(t, sub, 30*time.Second); ev.State != StateReconnected {
		t.Fatalf("session %#x: %v %v after the cut (%s); want reconnected", id, ev.State, time.Since(start).Round(time.Millisecond), setup)
	}
	t.Logf("reconnected after %v", time.Since(start).Round(time.Millisecond))
}
