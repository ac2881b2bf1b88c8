package zkconn

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r93Timeout is the session timeout of review round 93's sessions.
const r93Timeout = 6 * time.Second

// r93Pair returns a Session on an ensemble through two proxies, one to
// each of two members (not the leader), and the proxies: cur is the one
// the Session's connection goes through, other the other one, with its
// member's index.
func r93Pair(t *testing.T, e *zktest.Ensemble) (s *Session, sub *Subscription, cur, other *zktest.Proxy, otherMember int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var members []int
	for i := range e.Len() {
		if i != leader {
			members = append(members, i)
		}
	}
	p0 := zktest.NewProxy(t, e.Server(members[0]).Addr())
	p1 := zktest.NewProxy(t, e.Server(members[1]).Addr())
	s = dial(t, []string{p0.Addr(), p1.Addr()}, WithSessionTimeout(r93Timeout))
	sub = s.Subscribe()
	t.Cleanup(sub.Stop)
	await(t, sub, StateConnected, 30*time.Second)
	switch {
	case p0.Conns() == 1 && p1.Conns() == 0:
		return s, sub, p0, p1, members[1]
	case p1.Conns() == 1 && p0.Conns() == 0:
		return s, sub, p1, p0, members[0]
	}
	t.Fatalf("connections through the proxies: %d and %d; want one", p0.Conns(), p1.Conns())
	return
}

// r93Next returns the next transition of sub, within d; it fails the test
// if there is none.
func r93Next(t *testing.T, sub *Subscription, d time.Duration) Event {
	t.Helper()
	select {
	case ev, ok := <-sub.C():
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(d):
		t.Fatalf("no transition within %v", d)
	}
	return Event{}
}

// TestReviewR93FailoverPastUnansweringServer: a Session on a 3-server
// ensemble, through two members (proxies). The member it is not connected
// to stops answering: its link to the client is partitioned (BlackHole:
// TCP accepted, nothing comes back), or its JVM is paused (a long GC: the
// kernel accepts, the server reads nothing). Then the connection the
// Session uses drops (Cut), while its member stays healthy and reachable
// and the quorum serves. go-zookeeper moves to the next server and waits
// ten times two thirds of the session timeout for its connect response;
// the Session gives the session up shortly before one session timeout,
// although a healthy server was reachable all along (ZooKeeper's own
// client gives each server the session timeout divided by the number of
// servers, and moves on). The session must survive: Reconnected, not Lost. (A timeout
// of 6s: back on the first server after 3s and go-zookeeper's pause of 1s,
// with room for a loaded machine, as the cut comes right after the
// connect.)
func TestReviewR93FailoverPastUnansweringServer(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	for _, how := range []string{"blackhole", "paused"} {
		t.Run(how, func(t *testing.T) {
			s, sub, cur, other, member := r93Pair(t, e)
			first := current(t, s).ID()
			switch how {
			case "blackhole":
				other.BlackHole()
			case "paused":
				if err := e.Server(member).Pause(); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := e.Server(member).Resume(); err != nil {
						t.Error(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					if err := e.WaitQuorum(ctx); err != nil {
						t.Error(err)
					}
				}()
			}
			start := time.Now()
			cur.Cut()
			if ev := r93Next(t, sub, 30*time.Second); ev.State != StateSuspended {
				t.Fatalf("after the cut: %v; want suspended", ev.State)
			}
			ev := r93Next(t, sub, 30*time.Second)
			if ev.State != StateReconnected {
				t.Fatalf("session %#x: %v %v after the cut (a healthy server reachable all along); want reconnected", first, ev.State, time.Since(start).Round(time.Millisecond))
			}
			t.Logf("reconnected after %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestReviewR93DialPastUnansweringServer: Dial with two servers, one of
// which accepts connections but never answers (a black hole), must
// connect through the other within the session timeout. go-zookeeper
// tries the servers in a random order: six dials, each 1 in 2 to try the
// black hole first.
func TestReviewR93DialPastUnansweringServer(t *testing.T) {
	good := zktest.NewProxy(t, shared.Addr())
	bad := zktest.NewProxy(t, shared.Addr())
	bad.BlackHole()
	for i := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*r93Timeout)
		start := time.Now()
		s, err := Dial(ctx, []string{bad.Addr(), good.Addr()}, WithSessionTimeout(r93Timeout))
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v after %v (a healthy server reachable)", i, err, time.Since(start).Round(time.Millisecond))
		}
		s.Close()
	}
}
