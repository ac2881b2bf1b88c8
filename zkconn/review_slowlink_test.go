package zkconn

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// reviewQuiet drops go-zookeeper's log lines.
type reviewQuiet struct{}

func (reviewQuiet) Printf(string, ...any) {}

// TestReviewSlowLinkNotDeaf (review round 9): a healthy link with a round
// trip of a fifth of the session timeout (300ms each way, granted 3s), no
// fault at all, and a Session that sends nothing but go-zookeeper's pings.
// The wire's first deaf check closed a connection once heard was two thirds
// of the timeout old; but heard starts as the connect request's write time,
// and go-zookeeper's first ping goes out a third of the timeout after the
// connect response is read, so its reply came at connect + 2·RTT + T/3,
// past connect + 2T/3 as soon as the round trip reached T/6: the tap closed
// every connection right after it connected, and the Session lost one
// session after another. The check now counts a third of the timeout from
// the oldest request waiting for its reply, which tolerates round trips up
// to T/3, as go-zookeeper alone (the control, on the same link) does.
func TestReviewSlowLinkNotDeaf(t *testing.T) {
	const timeout = 3 * time.Second
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(timeout))
	p := zktest.NewProxy(t, srv.Addr())
	p.SetDelay(timeout / 10) // a round trip of T/5: between T/6 and T/3
	controlled(t, func() []string {
		// The control: go-zookeeper alone, on the same link.
		_, evs := control(t, p.Addr(), timeout)
		start := time.Now()
		s := dial(t, []string{p.Addr()}, WithSessionTimeout(timeout))
		sub := s.Subscribe()
		defer sub.Stop()
		first := await(t, sub, StateConnected, 3*timeout)
		got, control := transitions(sub, evs, start, 3*timeout)
		if len(control) == 0 && len(got) > 0 {
			t.Errorf("session %#x on a healthy link (round trip T/5, no fault): %v within %v of Dial", first.SessionID, got, 3*timeout)
		}
		return control
	})
}

// controlled runs attempt, which reports the transitions of a control
// (go-zookeeper alone, beside the Session it tests, in the same
// conditions), until the control sees none, three times at most: a machine
// too busy to keep even the control connected makes an attempt
// inconclusive, not failed. attempt checks the Session only when the
// control saw nothing.
func controlled(t *testing.T, attempt func() (control []string)) {
	t.Helper()
	for i := 1; ; i++ {
		control := attempt()
		if len(control) == 0 {
			return
		}
		if i == 3 {
			t.Fatalf("the control (go-zookeeper alone, same conditions) saw %v in each of %d attempts", control, i)
		}
		t.Logf("attempt %d inconclusive: the control saw %v", i, control)
	}
}

// transitions collects the transitions sub delivers for d, each with its
// time after start, and the events a control's go-zookeeper connection
// delivered (evs) meanwhile.
func transitions(sub *Subscription, evs <-chan zk.Event, start time.Time, d time.Duration) (got, control []string) {
	window := time.After(d)
wait:
	for {
		select {
		case ev := <-sub.C():
			got = append(got, ev.State.String()+" after "+ev.Time.Sub(start).Round(time.Millisecond).String())
		case <-window:
			break wait
		}
	}
	for {
		select {
		case ev := <-evs:
			control = append(control, ev.State.String())
			continue
		default:
		}
		return got, control
	}
}

// control connects go-zookeeper alone to addr, for a test to compare with
// a Session, and returns once it has a session; it closes when the test
// ends.
func control(t *testing.T, addr string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	zc, evs, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(reviewQuiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	for ev := range evs {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	return zc, evs
}
