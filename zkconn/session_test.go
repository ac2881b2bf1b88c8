package zkconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// dial connects to addrs and closes the Session when the test ends.
func dial(t *testing.T, addrs []string, opts ...Option) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Dial(ctx, addrs, opts...)
	if err != nil {
		t.Fatalf("Dial(%v) = %v", addrs, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// current returns a Handle on s's live session.
func current(t *testing.T, s *Session) Handle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := s.Current(ctx)
	if err != nil {
		t.Fatalf("Current() = %v", err)
	}
	return h
}

// await reads sub until a transition to want arrives and returns it. It
// fails the test if within d none does.
func await(t *testing.T, sub *Subscription, want State, d time.Duration) Event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription closed while waiting for %v", want)
			}
			if ev.State == want {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %v within %v", want, d)
		}
	}
}

// awaitGone waits on exists watches of obs until path does not exist (an
// ephemeral node goes with its session's expiry), and fails the test if it
// is still there after d.
func awaitGone(t *testing.T, obs *zk.Conn, path string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		ok, _, ch, err := obs.ExistsW(path)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s still there after %v", path, d)
		}
	}
}

// roots numbers testRoot's paths: -count=n runs a test again in one server.
var roots atomic.Int64

// testRoot returns a path unique to this run of the test; each call gives a
// new one.
func testRoot(t *testing.T) string {
	return fmt.Sprintf("/zkconn-test/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), roots.Add(1))
}

// plainRoot makes root, a path from testRoot, as a persistent node holding
// data, with obs. It makes /zkconn-test too when that is missing, and again
// when ZooKeeper has reaped it between the two creates: the protected
// creates of other tests make /zkconn-test a container, which the server
// removes once empty, at a check every 60 s.
func plainRoot(t *testing.T, obs *zk.Conn, root string, data []byte) {
	t.Helper()
	for {
		_, err := obs.Create(root, data, 0, zk.WorldACL(zk.PermAll))
		if err == nil {
			return
		}
		if !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("Create(%s) = %v", root, err)
		}
		if _, err := obs.Create("/zkconn-test", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("Create(/zkconn-test) = %v", err)
		}
	}
}

// keepParent gives parent, a container that has had no child yet, one of
// h's session's until it ends. ZooKeeper removes a container once its last
// child is gone, at a check every 60 s: a test whose nodes under parent come
// and go would otherwise find parent gone between two of its steps (a plain
// create fails with zk.ErrNoNode; a protected create makes parent again,
// and a listing sent beside a create that failed for want of it shows
// nothing).
func keepParent(t *testing.T, h Handle, parent string) {
	t.Helper()
	if _, err := h.Conn().Create(parent+"/keep", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(%s/keep) = %v", parent, err)
	}
}

func TestDialClose(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	if got := s.State(); got != StateConnected {
		t.Fatalf("State() = %v; want %v", got, StateConnected)
	}
	h := current(t, s)
	if h.ID() == 0 {
		t.Fatal("ID() = 0; want a session id")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	if got := s.State(); got != StateClosed {
		t.Fatalf("State() after Close = %v; want %v", got, StateClosed)
	}
	select {
	case <-h.Lost():
	default:
		t.Fatal("Lost() not closed after Close")
	}
	if _, err := s.Current(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Current() after Close = %v; want ErrClosed", err)
	}
	if err := h.Do(context.Background(), func(c *zk.Conn) error { _, _, err := c.Get("/"); return err }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do() after Close = %v; want ErrClosed", err)
	}
	sub := s.Subscribe()
	if ev := <-sub.C(); ev.State != StateClosed {
		t.Fatalf("Subscribe() after Close first gave %v; want %v", ev.State, StateClosed)
	}
	sub.Stop()
}

func TestDialNothing(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	s, err := Dial(ctx, []string{addr})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial(nothing) = %v, %v; want context.DeadlineExceeded", s, err)
	}

	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := Dial(done, []string{shared.Addr()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial(canceled ctx) = %v; want context.Canceled", err)
	}
}

// TestDialBadOptions: bad input fails Dial before it looks up a name or
// dials a server.
func TestDialBadOptions(t *testing.T) {
	ctx := context.Background()
	var lookups, dials atomic.Int64
	r := dnsResolver(func([]byte) []byte { lookups.Add(1); return nil })
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, address, timeout)
	}
	servers := []string{"zk.bad-options.test:2181", shared.Addr()}
	for _, tc := range []struct {
		name    string
		servers []string
		opts    []Option
		want    string // the error, if it is to be checked
	}{
		{"no servers", nil, nil, "zkconn: no servers"},
		{"chroot", []string{shared.Addr() + "/app"}, nil, `zkconn: server "` + shared.Addr() + `/app": a chroot (/app) is not supported: give paths under it in full`},
		{"chroot on the last server", []string{shared.Addr(), shared.Addr() + "/app"}, nil, ""},
		{"port out of range", []string{"127.0.0.1:99999"}, nil, `zkconn: server "127.0.0.1:99999": the port must be a number from 1 to 65535`},
		{"port zero", []string{"127.0.0.1:0"}, nil, ""},
		{"port not a number", []string{"zk1:zk"}, nil, ""},
		{"no port", []string{"zk1"}, nil, ""},
		{"zero timeout", servers, []Option{WithSessionTimeout(0)}, ""},
		{"nil logger", servers, []Option{WithLogger(nil)}, ""},
		{"empty ACL", servers, []Option{WithACL()}, ""},
		{"nil dialer", servers, []Option{WithDialer(nil)}, ""},
		{"nil option", servers, []Option{WithSessionTimeout(time.Second), nil}, "zkconn: nil option"},
		{"nil option first", servers, []Option{nil, WithLogger(nil)}, "zkconn: nil option"},
	} {
		s, err := Dial(ctx, tc.servers, append([]Option{WithResolver(r), WithDialer(dialer)}, tc.opts...)...)
		switch {
		case err == nil:
			s.Close()
			t.Errorf("Dial with %s succeeded; want an error", tc.name)
		case tc.want != "" && err.Error() != tc.want:
			t.Errorf("Dial with %s = %v; want %q", tc.name, err, tc.want)
		}
	}
	if n, m := lookups.Load(), dials.Load(); n != 0 || m != 0 {
		t.Errorf("bad options: %d name lookups and %d dials; want none", n, m)
	}
}

// TestStatesThroughProxy walks the Session through every state by cutting and
// partitioning its connection, and logs how long each took to be seen.
func TestStatesThroughProxy(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	const timeout = 2 * time.Second
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(timeout))
	sub := s.Subscribe()
	defer sub.Stop()
	first := await(t, sub, StateConnected, time.Second)
	h := current(t, s)

	// A cut connection is seen at once; the same session comes back.
	// go-zookeeper tries the one server again a second after the cut, which
	// comes right after a ping reply: well ahead of the give-up, shortly
	// before the session timeout after the ping.
	select {
	case <-p.BlackHoleAfterPing():
	case <-time.After(5 * time.Second):
		t.Fatal("no ping reply through the proxy")
	}
	start := time.Now()
	p.Cut()
	p.Heal()
	await(t, sub, StateSuspended, 5*time.Second)
	t.Logf("cut: suspended seen after %v", time.Since(start))
	select {
	case <-h.Suspended():
	default:
		t.Fatal("Suspended() not closed after a cut")
	}
	ev := await(t, sub, StateReconnected, 10*time.Second)
	t.Logf("cut: reconnected after %v", time.Since(start))
	if ev.SessionID != first.SessionID || h.Err() != nil {
		t.Fatalf("after a cut: session %#x (err %v); want %#x alive", ev.SessionID, h.Err(), first.SessionID)
	}

	// A partition is seen only by timeout; past the session timeout the
	// session is lost, and a new one follows once the partition heals.
	h = current(t, s)
	start = time.Now()
	p.BlackHole()
	await(t, sub, StateSuspended, 3*timeout)
	suspendedAfter := time.Since(start)
	lost := await(t, sub, StateLost, 3*timeout)
	lostAfter := time.Since(start)
	t.Logf("black hole: suspended seen after %v, lost after %v (session timeout %v)", suspendedAfter, lostAfter, timeout)
	if lost.SessionID != first.SessionID {
		t.Fatalf("lost session %#x; want %#x", lost.SessionID, first.SessionID)
	}
	if !errors.Is(h.Err(), ErrSessionLost) {
		t.Fatalf("Err() after loss = %v; want ErrSessionLost", h.Err())
	}
	p.Heal()
	next := await(t, sub, StateConnected, 20*time.Second)
	if next.SessionID == first.SessionID || next.SessionID == 0 {
		t.Fatalf("new session %#x; want a fresh one after %#x", next.SessionID, first.SessionID)
	}
	if h2 := current(t, s); h2.ID() != next.SessionID {
		t.Fatalf("Current().ID() = %#x; want %#x", h2.ID(), next.SessionID)
	}
}

// TestGivenUpByGrantedTimeout: the server grants less than the client asked
// for (2s of a minute); cut off, the client gives the session up by the
// granted timeout after the server last heard from it, the earliest moment
// the server may expire it, not a minute later.
func TestGivenUpByGrantedTimeout(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(time.Minute))
	sub := s.Subscribe()
	defer sub.Stop()
	first := await(t, sub, StateConnected, time.Second)
	if got := s.SessionTimeout(); got != 2*time.Second {
		t.Fatalf("SessionTimeout() = %v; want the 2s granted", got)
	}
	h := current(t, s)
	p.BlackHole()
	await(t, sub, StateSuspended, 10*time.Second)
	await(t, sub, StateLost, 30*time.Second)
	if !errors.Is(h.Err(), ErrSessionLost) {
		t.Fatalf("Err() = %v; want ErrSessionLost", h.Err())
	}
	p.Heal()
	next := await(t, sub, StateConnected, 30*time.Second)
	if next.SessionID == first.SessionID {
		t.Fatalf("no new session after expiry")
	}
}

// TestSuspendedWhenUnheard: a one-way partition (zktest's Deafen). The
// server hears nothing from the Session, which still hears notifications of
// its watches, paced well inside go-zookeeper's read deadline (two thirds
// of the 2s granted), so go-zookeeper alone would see its connection up
// until the server had expired the session. The Session is suspended while
// its session is still alive on the server (its ephemeral node is there),
// then gives it up.
func TestSuspendedWhenUnheard(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(2*time.Second))
	obs := current(t, dial(t, []string{srv.Addr()})).Conn()
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, time.Second)
	h := current(t, s)
	root := testRoot(t)
	node, err := h.CreateProtected(context.Background(), root, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	const k = 20 // notifications: 6s of them, three times the timeout
	paths := make([]string, k)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/w%d", root, i)
		if _, _, _, err := h.Conn().ExistsW(paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	p.Deafen()
	// A notification every 300ms keeps go-zookeeper reading.
	defer zktest.CreateEvery(t, obs, 300*time.Millisecond, paths...)()

	await(t, sub, StateSuspended, 10*time.Second)
	if ok, _, err := obs.Exists(node); err != nil || !ok {
		t.Fatalf("the session's node when it was suspended: Exists = %v, %v; want true: the server had expired the session first", ok, err)
	}
	await(t, sub, StateLost, 10*time.Second)
	if !errors.Is(h.Err(), ErrSessionLost) {
		t.Fatalf("Err() = %v; want ErrSessionLost", h.Err())
	}
}

// TestSlowSubscriber: one subscriber that never reads does not hold up the
// others, and loses nothing while the Session is open.
func TestSlowSubscriber(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(10*time.Second))
	stuck := s.Subscribe()
	defer stuck.Stop()
	subs := make([]*Subscription, 8)
	for i := range subs {
		subs[i] = s.Subscribe()
		defer subs[i].Stop()
		await(t, subs[i], StateConnected, time.Second)
	}
	const cuts = 20 // 40 transitions: more than the channel buffers
	for i := 0; i < cuts; i++ {
		p.Cut()
		for _, sub := range subs {
			await(t, sub, StateSuspended, 10*time.Second)
			await(t, sub, StateReconnected, 10*time.Second)
		}
	}
	// Now the stuck subscriber reads: every transition is there, in order.
	want := []State{StateConnected}
	for i := 0; i < cuts; i++ {
		want = append(want, StateSuspended, StateReconnected)
	}
	for i, w := range want {
		select {
		case ev := <-stuck.C():
			if ev.State != w {
				t.Fatalf("stuck subscriber event %d = %v; want %v", i, ev.State, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("stuck subscriber: event %d (%v) missing", i, w)
		}
	}
}

// TestCloseLogsQueued: Close returns once the Session's logger has logged
// what was queued for it when Close was called, though the logger was
// behind (blocked in a line) then.
func TestCloseLogsQueued(t *testing.T) {
	s, g := behindLogger(t)
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("zkconn: queued %d", i))
		s.logf(slog.LevelInfo, want[i])
	}
	sub := s.Subscribe()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.Close()
	}()
	for range sub.C() { // until Close has ended the Subscriptions
	}
	close(g.release)
	<-closed
	got := g.messages()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("logged %q; want every queued line, %q missing", got, w)
		}
	}
}

// TestLogKeepsRoomForWarnings: while the logger is behind, go-zookeeper's
// Debug lines (a reconnection loop's) do not crowd out a warning queued
// after them.
func TestLogKeepsRoomForWarnings(t *testing.T) {
	s, g := behindLogger(t)
	for range 2 * recordsBuffer {
		zkLogger{s}.Printf("failed to connect to %s", "127.0.0.1:1")
	}
	s.logf(slog.LevelWarn, "zkconn: warning")
	close(g.release)
	s.Close()
	if got := g.messages(); !slices.Contains(got, "zkconn: warning") {
		t.Errorf("logged %d lines, and not the warning queued after %d Debug lines", len(got), 2*recordsBuffer)
	}
}

// behindLogger returns a Session whose logger is blocked in a line until
// g.release is closed; the caller closes the Session.
func behindLogger(t *testing.T) (*Session, *logGate) {
	t.Helper()
	g := newLogGate("zkconn: first")
	s, err := Dial(context.Background(), []string{shared.Addr()}, WithLogger(slog.New(g)))
	if err != nil {
		t.Fatal(err)
	}
	s.logf(slog.LevelWarn, "zkconn: first")
	select {
	case <-g.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the logger got no line in 10s")
	}
	return s, g
}

// A logGate is a slog.Handler that keeps every message, and blocks on the
// first record whose message is msg until release is closed.
type logGate struct {
	msg     string
	once    sync.Once
	blocked chan struct{} // closed once that record is in Handle
	release chan struct{}
	mu      sync.Mutex
	msgs    []string
}

func newLogGate(msg string) *logGate {
	return &logGate{msg: msg, blocked: make(chan struct{}), release: make(chan struct{})}
}

func (g *logGate) Enabled(context.Context, slog.Level) bool { return true }
func (g *logGate) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *logGate) WithGroup(string) slog.Handler            { return g }
func (g *logGate) Handle(_ context.Context, r slog.Record) error {
	g.mu.Lock()
	g.msgs = append(g.msgs, r.Message)
	g.mu.Unlock()
	if r.Message == g.msg {
		g.once.Do(func() {
			close(g.blocked)
			<-g.release
		})
	}
	return nil
}

func (g *logGate) messages() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.msgs)
}

func TestCreateProtected(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	ctx := context.Background()
	root := testRoot(t) + "/deep/parent"
	p, err := h.CreateProtected(ctx, root, "lock-", []byte("data"))
	if err != nil {
		t.Fatalf("CreateProtected = %v", err)
	}
	name := p[strings.LastIndexByte(p, '/')+1:]
	uuid, rest, ok := ParseProtected(name)
	if !ok || len(uuid) != 36 || !strings.HasPrefix(rest, "lock-") || len(rest) != len("lock-")+10 {
		t.Fatalf("created %q; want _c_<uuid>-lock-<10 digits>", name)
	}
	data, st, err := h.Conn().Get(p)
	if err != nil || string(data) != "data" || st.EphemeralOwner != h.ID() {
		t.Fatalf("Get(%s) = %q, owner %#x, %v; want data owned by %#x", p, data, st.EphemeralOwner, err, h.ID())
	}
	<-settledOf(h.Delete(p))
	if ok, _, _ := h.Conn().Exists(p); ok {
		t.Fatalf("%s still exists after Delete", p)
	}

	for _, bad := range []struct{ parent, name string }{
		{"relative", "lock-"}, {root + "/", "lock-"}, {root, ""}, {root, "a/b"}, {root, "x\x00"},
	} {
		if _, err := h.CreateProtected(ctx, bad.parent, bad.name, nil); !errors.Is(err, ErrBadPath) {
			t.Errorf("CreateProtected(%q, %q) = %v; want ErrBadPath", bad.parent, bad.name, err)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.CreateProtected(canceled, root, "lock-", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateProtected(canceled) = %v; want context.Canceled", err)
	}
	if kids, _, _ := h.Conn().Children(root); len(kids) != 0 {
		t.Fatalf("children left: %v", kids)
	}
}

// TestDeleteFires: Delete sends its signals in the transaction that
// deletes the node, and only if the node is there; a signal it cannot send
// does not stop the delete. Signal sends them only while a node is there.
func TestDeleteFires(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	observer := current(t, dial(t, []string{shared.Addr()}))
	ctx := context.Background()
	root := testRoot(t)
	node := func() string {
		p, err := h.CreateProtected(ctx, root, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	watchSignal := func(sig string) <-chan zk.Event {
		there, _, w, err := observer.Conn().ExistsW(sig)
		if err != nil || there {
			t.Fatalf("ExistsW(%s) = %v, %v; want a watch on no node", sig, there, err)
		}
		return w
	}
	// fired reports whether w fired before a read the observer sends now
	// (ZooKeeper sends a watch event before the replies that follow it).
	fired := func(w <-chan zk.Event) (zk.Event, bool) {
		if _, _, err := observer.Conn().Exists(root); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w:
			return ev, true
		default:
			return zk.Event{}, false
		}
	}
	gone := func(p string) {
		t.Helper()
		if there, _, err := observer.Conn().Exists(p); err != nil || there {
			t.Fatalf("Exists(%s) = %v, %v after Delete; want gone", p, there, err)
		}
	}

	p := node()
	a, b := watchSignal(p+".a"), watchSignal(p+".b")
	<-settledOf(h.Delete(p, p+".a", p+".b"))
	for _, w := range []<-chan zk.Event{a, b} {
		if ev, ok := fired(w); !ok || ev.Type != zk.EventNodeCreated {
			t.Fatalf("signal watch: %v, fired %v; want EventNodeCreated", ev.Type, ok)
		}
	}
	gone(p)
	gone(p + ".a")

	// The node already gone: no signal.
	p = node()
	w := watchSignal(p + ".a")
	<-settledOf(h.Delete(p))
	<-settledOf(h.Delete(p, p+".a"))
	if ev, ok := fired(w); ok {
		t.Fatalf("signal fired (%v) though the node was gone", ev.Type)
	}

	// A node in the way of a signal: the delete goes ahead without it.
	p = node()
	if _, err := observer.Conn().Create(p+".a", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	<-settledOf(h.Delete(p, p+".a"))
	gone(p)
	if there, _, err := observer.Conn().Exists(p + ".a"); err != nil || !there {
		t.Fatalf("Exists(%s.a) = %v, %v; want the node in the way kept", p, there, err)
	}

	// Signal sends its signals while the node is there, and none once it
	// is gone.
	p = node()
	w = watchSignal(p + ".a")
	if err := h.Signal(ctx, p, p+".a"); err != nil {
		t.Fatalf("Signal = %v", err)
	}
	if ev, ok := fired(w); !ok || ev.Type != zk.EventNodeCreated {
		t.Fatalf("signal watch: %v, fired %v; want EventNodeCreated", ev.Type, ok)
	}
	gone(p + ".a")
	<-settledOf(h.Delete(p))
	w = watchSignal(p + ".a")
	if err := h.Signal(ctx, p, p+".a"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("Signal with the node gone = %v; want %v", err, zk.ErrNoNode)
	}
	if ev, ok := fired(w); ok {
		t.Fatalf("signal fired (%v) though the node was gone", ev.Type)
	}
}

// TestContainerParents: the parents CreateProtected makes are CONTAINER
// nodes, which the server removes once their last child is gone.
func TestContainerParents(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithSystemProperty("znode.container.checkIntervalMs", "100"))
	h := current(t, dial(t, []string{srv.Addr()}))
	ctx := context.Background()
	parent := testRoot(t) + "/locks"
	p, err := h.CreateProtected(ctx, parent, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, _, watch, err := h.Conn().ExistsW(parent)
	if err != nil || !ok {
		t.Fatalf("ExistsW(%s) = %v, %v", parent, ok, err)
	}
	<-settledOf(h.Delete(p))
	if ev, err := h.Wait(ctx, watch); err != nil || ev.Type != zk.EventNodeDeleted {
		t.Fatalf("parent watch = %v, %v; want the empty container removed", ev.Type, err)
	}
}

// TestRecoverProtectedStranger: a node with our prefix that another session
// owns is deleted, not adopted.
func TestRecoverProtectedStranger(t *testing.T) {
	a := current(t, dial(t, []string{shared.Addr()}))
	b := current(t, dial(t, []string{shared.Addr()}))
	ctx := context.Background()
	root := testRoot(t)
	prefix := ProtectedPrefix + newUUID() + "-"
	if err := a.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	keepParent(t, a, root) // the stranger is deleted before a's node is made
	stranger, err := b.Conn().Create(root+"/"+prefix+"lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := b.Conn().ExistsW(stranger)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.recoverProtected(ctx, root, prefix)
	if err != nil || got != "" {
		t.Fatalf("recoverProtected = %q, %v; want \"\", nil", got, err)
	}
	if ev := <-gone; ev.Type != zk.EventNodeDeleted {
		t.Fatalf("stranger %s: %v; want it deleted", stranger, ev.Type)
	}
	mine, err := a.Conn().Create(root+"/"+prefix+"lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.recoverProtected(ctx, root, prefix); err != nil || got != mine {
		t.Fatalf("recoverProtected = %q, %v; want %q", got, err, mine)
	}
}

// TestCreateProtectedReplyLost: the create reaches the server but its reply
// never comes back; after the reconnect the node is found and kept, and no
// second node is made.
func TestCreateProtectedReplyLost(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(10*time.Second))
	h := current(t, s)
	observer := current(t, dial(t, []string{srv.Addr()}))
	ctx := context.Background()
	root := testRoot(t)
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := observer.Conn().ChildrenW(root)
	if err != nil {
		t.Fatal(err)
	}
	p.DropReplies()
	type result struct {
		path string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		path, err := h.CreateProtected(ctx, root, "lock-", nil)
		res <- result{path, err}
	}()
	if _, err := observer.Wait(ctx, watch); err != nil { // the node exists now
		t.Fatal(err)
	}
	p.Cut()
	p.Heal()
	r := <-res
	if r.err != nil {
		t.Fatalf("CreateProtected = %v", r.err)
	}
	kids, _, err := observer.Conn().Children(root)
	if err != nil || len(kids) != 1 || root+"/"+kids[0] != r.path {
		t.Fatalf("children %v, %v; want exactly %s", kids, err, r.path)
	}
}

// TestGuaranteedDelete: a delete asked for while the connection is down
// happens once it is back.
func TestGuaranteedDelete(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	h := current(t, s)
	observer := current(t, dial(t, []string{srv.Addr()}))
	ctx := context.Background()
	node, err := h.CreateProtected(ctx, testRoot(t), "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	p.BlackHole()
	p.Cut()
	await(t, sub, StateSuspended, 10*time.Second)
	done := settledOf(h.Delete(node))
	select {
	case <-done:
		t.Fatal("Delete finished while disconnected")
	default:
	}
	ok, _, watch, err := observer.Conn().ExistsW(node)
	if err != nil || !ok {
		t.Fatalf("node gone before the connection came back: %v, %v", ok, err)
	}
	p.Heal()
	if ev, err := observer.Wait(ctx, watch); err != nil || ev.Type != zk.EventNodeDeleted {
		t.Fatalf("watch = %v, %v; want %v", ev.Type, err, zk.EventNodeDeleted)
	}
	<-done
	if h.Err() != nil {
		t.Fatalf("session lost: %v", h.Err())
	}
}

// TestCloseWhileBusy: Close wakes requests and waits in flight, and leaves no
// goroutine behind (TestMain checks).
func TestCloseWhileBusy(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	ctx := context.Background()
	root := testRoot(t)
	node, err := h.CreateProtected(ctx, root, "w-", nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() { // a waiter on a watch that never fires
			defer wg.Done()
			var w <-chan zk.Event
			err := h.Do(ctx, func(c *zk.Conn) (err error) {
				_, _, w, err = c.GetW(node)
				return err
			})
			if err != nil {
				errs <- err
				return
			}
			_, err = h.Wait(ctx, w)
			errs <- err
		}()
		go func() { // a stream of requests
			defer wg.Done()
			for {
				if _, err := h.CreateProtected(ctx, root, "r-", nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	if _, err := h.CreateProtected(ctx, root, "sync-", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("in flight at Close: %v; want ErrClosed", err)
		}
	}
}

// TestEnsembleLeaderLoss: the Session keeps its session while the leader of
// a 3-server ensemble goes away.
func TestEnsembleLeaderLoss(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t, 3)
	s := dial(t, e.Addrs(), WithSessionTimeout(10*time.Second))
	h := current(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := h.CreateProtected(ctx, testRoot(t), "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Server(leader).Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitQuorum(ctx); err != nil {
		t.Fatal(err)
	}
	var st *zk.Stat
	err = h.Do(ctx, func(c *zk.Conn) (err error) {
		_, st, err = c.Get(node)
		return err
	})
	if err != nil || st.EphemeralOwner != h.ID() {
		t.Fatalf("after leader loss: Get(%s) = %v; want the node of session %#x", node, err, h.ID())
	}
	if h.Err() != nil {
		t.Fatalf("session lost with the leader: %v", h.Err())
	}
	if _, err := h.CreateProtected(ctx, testRoot(t), "lock-", nil); err != nil {
		t.Fatalf("create after leader loss: %v", err)
	}
}

// hangingResolver never gets an answer from its name server; lookups end
// only with their ctx.
var hangingResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}}

// TestDialResolvesWithinCtx pins name lookups that ran inside go-zookeeper's
// Connect, under the Session's mutex and unbounded by any ctx: a name
// server that never answers now holds up nothing but Dial, and only until
// its ctx is done.
func TestDialResolvesWithinCtx(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s, err := Dial(ctx, []string{"zk.dsync-test.invalid:2181"}, WithResolver(hangingResolver))
	if err == nil {
		s.Close()
		t.Fatal("Dial of a name nobody resolves succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial = %v; want DeadlineExceeded", err)
	}
	if late := time.Since(mustDeadline(ctx)); late > time.Second {
		t.Errorf("Dial returned %v after its deadline", late)
	}
	if _, err := Dial(context.Background(), []string{shared.Addr()}, WithResolver(nil)); err == nil {
		t.Error("Dial with a nil resolver succeeded")
	}
}

func mustDeadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// TestCloseWhileReplacing pins a busy loop: a Close that came while the
// Session had no connection (its session just lost, run about to start the
// next one) left run starting nothing, forever, and Close waiting for it.
func TestCloseWhileReplacing(t *testing.T) {
	for range 50 {
		s, err := Dial(context.Background(), []string{shared.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.retireLocked(s.cur) // as a lost session does: run starts the next connection
		closed := make(chan struct{})
		go func() {
			s.Close()
			close(closed)
		}()
		s.mu.Unlock()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return: the Session's run goroutine never ended")
		}
	}
}

// settledOf returns the second of Delete's channels: the one that closes
// once the delete is settled.
func settledOf(_, settled <-chan struct{}) <-chan struct{} { return settled }

// TestCreateProtectedWhile: the node is made, kin of kin, only while kin
// exists (its missing parents too); once kin is gone nothing is made and the
// error wraps ErrKinGone; a bad kin path is refused before anything is sent.
func TestCreateProtectedWhile(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	ctx := context.Background()
	root := testRoot(t)
	kin, err := h.CreateProtected(ctx, root+"/locks", "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	leases := root + "/leases/deep"
	p, err := h.CreateProtectedWhile(ctx, leases, "lease-", []byte("d"), kin)
	if err != nil {
		t.Fatalf("CreateProtectedWhile with kin there = %v", err)
	}
	if !strings.HasPrefix(p, leases+"/") || !Kin(p, kin) {
		t.Errorf("created %s; want a child of %s, kin of %s", p, leases, kin)
	}
	if _, st, err := h.Conn().Get(p); err != nil || st.EphemeralOwner != h.ID() {
		t.Fatalf("Get(%s) = %v, %v; want a node of session %#x", p, st, err, h.ID())
	}
	<-settledOf(h.Delete(kin))
	if _, err := h.CreateProtectedWhile(ctx, leases, "lease-", nil, kin); !errors.Is(err, ErrKinGone) {
		t.Errorf("CreateProtectedWhile with kin gone = %v; want ErrKinGone", err)
	}
	if kids, _, err := h.Conn().Children(leases); err != nil || len(kids) != 1 {
		t.Errorf("children of %s = %v, %v; want only the first node", leases, kids, err)
	}
	if _, err := h.CreateProtectedWhile(ctx, leases, "lease-", nil, "relative"); !errors.Is(err, ErrBadPath) {
		t.Errorf("CreateProtectedWhile with kin %q = %v; want ErrBadPath", "relative", err)
	}
	<-settledOf(h.Delete(p))
}
