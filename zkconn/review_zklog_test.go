package zkconn

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// reviewZKSink is a slog.Handler at Debug whose Handle, once armed, blocks
// every record until release is closed: a synchronous network sink that the
// same partition cuts off, with debug logging on.
type reviewZKSink struct {
	armed   atomic.Bool
	release chan struct{}
	first   atomic.Value // message of the first record blocked
}

func (g *reviewZKSink) Enabled(context.Context, slog.Level) bool { return true }
func (g *reviewZKSink) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *reviewZKSink) WithGroup(string) slog.Handler            { return g }
func (g *reviewZKSink) Handle(_ context.Context, r slog.Record) error {
	if g.armed.Load() {
		g.first.CompareAndSwap(nil, r.Message)
		<-g.release
	}
	return nil
}

// TestReviewBlockedLoggerDelaysSuspension (review round 13): a logger
// with Debug on whose sink the partition cuts off. The Session handed it
// to go-zookeeper, which logs "recv loop terminated" on its loop goroutine
// before it reports StateDisconnected: with the sink blocked the Session
// stayed Connected, never suspended nor given up, while the server expired
// the session. go-zookeeper's lines now go through the Session's log
// goroutine, dropped when it is behind.
func TestReviewBlockedLoggerDelaysSuspension(t *testing.T) {
	g := &reviewZKSink{release: make(chan struct{})}
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(2*time.Second), WithLogger(slog.New(g)))
	t.Cleanup(func() { close(g.release) }) // before s.Close
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, time.Second)
	h := current(t, s)
	g.armed.Store(true)
	p.BlackHole()
	start := time.Now()
	select {
	case <-h.Suspended():
		t.Logf("suspended after %v", time.Since(start))
	case <-time.After(3 * time.Second):
		t.Errorf("partitioned for 3s (session timeout 2s), logger blocked on %q: the Session is %v, not suspended; Err() = %v",
			g.first.Load(), s.State(), h.Err())
	}
	select {
	case <-h.Lost():
	case <-time.After(10 * time.Second):
		t.Errorf("partitioned for 10s (session timeout 2s, expired on the server): session not given up, Session %v", s.State())
	}
}
