package zkconn

import (
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewStallNotDeaf (review round 10): a Session and go-zookeeper
// alone (the control) each send a request every 20ms; once the Session has
// had a timeout's worth of replies, the server stalls (its JVM stopped, as
// a long garbage collection or a slow disk stalls it) for half the session
// timeout, 1.5s of 3s. go-zookeeper reads nothing for 1.5s, less than its
// read deadline (two thirds of the timeout), and stays connected; so does
// the session on the server, which heard it right before. The tap's check
// closed the connection a third of the timeout after the first request the
// stall left unanswered, and suspended the Session; it now waits two
// thirds of the timeout after heard, as go-zookeeper waits that long after
// the last frame it read.
func TestReviewStallNotDeaf(t *testing.T) {
	const timeout = 3 * time.Second
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(timeout))
	controlled(t, func() []string {
		zc, evs := control(t, srv.Addr(), timeout)
		s := dial(t, []string{srv.Addr()}, WithSessionTimeout(timeout))
		sub := s.Subscribe()
		defer sub.Stop()
		first := await(t, sub, StateConnected, 5*time.Second)
		h := current(t, s)
		// Each sends a request every 20ms; the stall comes once the Session
		// has had a timeout's worth of replies, as on any Session up a while.
		const every = 20 * time.Millisecond
		stop, warm := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range []*zk.Conn{zc, h.Conn()} {
			wg.Go(func() {
				tick := time.NewTicker(every)
				defer tick.Stop()
				for n := 1; ; n++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					at := time.Now()
					c.Exists("/")
					if d := time.Since(at); d > 200*time.Millisecond {
						t.Logf("%p: Exists took %v", c, d)
					}
					if c == h.Conn() && n == int(timeout/every) {
						close(warm)
					}
				}
			})
		}
		defer func() { close(stop); wg.Wait() }()
		<-warm
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resumed := make(chan error, 1)
		time.AfterFunc(timeout/2, func() { resumed <- srv.Resume() }) // the stall: T/2
		defer func() {
			if err := <-resumed; err != nil {
				t.Error(err)
			}
		}()
		got, control := transitions(sub, evs, start, timeout/2+timeout)
		if len(control) == 0 && len(got) > 0 {
			t.Errorf("session %#x, server stalled %v (T/2) and then answered: %v", first.SessionID, timeout/2, got)
		}
		return control
	})
}
