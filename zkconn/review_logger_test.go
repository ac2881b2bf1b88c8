package zkconn

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// reviewGate is a slog.Handler at Info (slog.Default's level) whose
// Handle blocks on the first warning until release is closed: a slow log
// sink (a full stderr pipe, a synchronous network handler that the same
// outage cuts off). Every other record passes at once.
type reviewGate struct {
	once     sync.Once
	blocked  chan struct{} // closed once the first warning is in Handle
	release  chan struct{} // closed by the test
	returned chan struct{} // closed once that Handle has returned
}

func newReviewGate() *reviewGate {
	return &reviewGate{blocked: make(chan struct{}), release: make(chan struct{}), returned: make(chan struct{})}
}

func (g *reviewGate) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (g *reviewGate) WithAttrs([]slog.Attr) slog.Handler           { return g }
func (g *reviewGate) WithGroup(string) slog.Handler                { return g }
func (g *reviewGate) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	first := false
	g.once.Do(func() { first = true; close(g.blocked) })
	if first {
		<-g.release
		close(g.returned)
	}
	return nil
}

// reviewUnheard sets up TestSuspendedWhenUnheard's one-way partition with
// a Session logging to g: an ephemeral node, watches notified every 300ms
// by obs (straight to the server), the proxy deafened.
func reviewUnheard(t *testing.T, g *reviewGate) (s *Session, h Handle, obs *zk.Conn, node string) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	s = dial(t, []string{p.Addr()}, WithSessionTimeout(2*time.Second), WithLogger(slog.New(g)))
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}) // before s.Close (cleanups run last first)
	obs = current(t, dial(t, []string{srv.Addr()})).Conn()
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, time.Second)
	h = current(t, s)
	root := testRoot(t)
	node, err := h.CreateProtected(context.Background(), root, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 40) // 12s of notifications
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/w%d", root, i)
		if _, _, _, err := h.Conn().ExistsW(paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	p.Deafen()
	t.Cleanup(zktest.CreateEvery(t, obs, 300*time.Millisecond, paths...))
	return s, h, obs, node
}

// TestReviewSlowLoggerTwoHolders (review round 12): under a one-way
// partition (notifications keep go-zookeeper reading) the Session's
// logger blocks on its first warning. A version of the deaf check logged
// before it closed the connection, on the timer's goroutine: the
// connection stayed open, the Session connected, and the server expired
// the session and deleted its ephemeral node, which another client then
// created: two holders. Nor may the Session log under its lock, where a
// blocked logger would keep it from giving the session up in time: by the
// time the server has expired the session, the Session must be suspended
// and have given it up (Err set), its logger still blocked.
func TestReviewSlowLoggerTwoHolders(t *testing.T) {
	g := newReviewGate()
	s, h, obs, node := reviewUnheard(t, g)
	select {
	case <-g.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no warning within 10s")
	}
	// Now wait for the server to expire the session.
	awaitGone(t, obs, node, 15*time.Second)
	if _, err := obs.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("another client creating %s: %v", node, err)
	}
	suspended := false
	select {
	case <-h.Suspended():
		suspended = true
	default:
	}
	if !suspended || s.State() == StateConnected || h.Err() == nil {
		t.Errorf("the server expired the session (its node is gone; another client now holds %s), while the Session, its logger blocked, is %v, Suspended closed = %v, Err() = %v: two holders",
			node, s.State(), suspended, h.Err())
	}
}

// TestReviewSlowLoggerClose (review round 12): Session.Close "returns once
// every goroutine the Session started has ended", a goroutine in its
// logger included: with the logger blocked in a warning, Close returns
// only after the logger has, once released.
func TestReviewSlowLoggerClose(t *testing.T) {
	g := newReviewGate()
	s, _, _, _ := reviewUnheard(t, g)
	select {
	case <-g.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no warning within 10s")
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	close(g.release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close blocked 10s after the logger was released")
	}
	select {
	case <-g.returned:
	default:
		t.Errorf("Session.Close returned while a goroutine of the Session is still in its logger")
	}
}
