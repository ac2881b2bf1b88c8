package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// awaitServerWatch returns once session id watches path on the shared
// server.
func awaitServerWatch(t *testing.T, path string, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := shared.AwaitWatches(ctx, func(m map[string][]int64) bool { return slices.Contains(m[path], id) }); err != nil {
		t.Fatalf("session %#x never watched %s: %v", id, path, err)
	}
}

// signalNode returns another session and a node of it, deleted when the
// test ends, whose signal paths the test watches.
func signalNode(t *testing.T, ctx context.Context) (Handle, string) {
	t.Helper()
	other := current(t, dial(t, []string{shared.Addr()}))
	node, err := other.CreateProtected(ctx, testRoot(t), "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { <-settledOf(other.Delete(node)) })
	return other, node
}

// keepWatching sets a watch h's session wants until the test ends, by which
// a test sees that setWatches has been applied after a reconnect, and
// returns its path.
func keepWatching(t *testing.T, ctx context.Context, h Handle, node string) string {
	t.Helper()
	kept := node + ".kept"
	t.Cleanup(mustExistsW(t, ctx, h, kept).Unwatch)
	return kept
}

// TestReviewExistsRecordAfterQuickSignal: an ExistsW whose reply and the
// event of the watch it set are read together (the signal came right after
// the reply, and go-zookeeper's reading goroutine read both at once: a busy
// process, a network that coalesces them). go-zookeeper's reading goroutine
// hands the reply to the caller's goroutine and goes straight on to the
// event: the Session's callback (wire.fired) runs before the caller's
// goroutine gets to wire.arm, which then marks armed a watch that has
// already fired. Once the caller has its event and calls Unwatch, the
// record {callers 0, armed} stays in wire.exists for the session's life:
// no event will ever come on that path again. One record per such handoff.
//
// The reading goroutine is held (a Watch's Notify function that waits) on
// an earlier event of the session while the reply and the event come in,
// so that they are read together, as they are when they arrive together.
func TestReviewExistsRecordAfterQuickSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := current(t, dial(t, []string{shared.Addr()}))
	other := current(t, dial(t, []string{shared.Addr()}))
	w := h.gen.c.wire
	root := testRoot(t)
	nodeO, err := other.CreateProtected(ctx, root, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { <-settledOf(other.Delete(nodeO)) }()
	stall := root + "/stall"
	if err := other.Do(ctx, func(c *zk.Conn) error {
		_, err := c.Create(stall, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer other.Do(context.Background(), func(c *zk.Conn) error { return c.Delete(stall, -1) })

	const rounds = 5
	leaked := 0
	for i := range rounds {
		sig := nodeO + ".s" + strconv.Itoa(i)

		// Hold h's reading goroutine on an event of its own.
		_, _, sw, err := h.GetW(ctx, stall)
		if err != nil {
			t.Fatal(err)
		}
		held, release := make(chan struct{}), make(chan struct{})
		sw.Notify(func(zk.Event) { close(held); <-release })
		if err := other.Do(ctx, func(c *zk.Conn) error {
			_, err := c.Set(stall, []byte{byte(i)}, -1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		<-held

		// The exists request goes out and is answered; the signal comes
		// after it; both wait to be read.
		res := goExistsW(t, ctx, h, sig)
		awaitServerWatch(t, sig, h.ID())
		if err := other.Signal(ctx, nodeO, sig); err != nil {
			t.Fatal(err)
		}
		close(release)

		x := <-res
		if x.C == nil {
			t.Fatal("no watch")
		}
		if ev := <-x.C; ev.Type != zk.EventNodeCreated {
			t.Fatalf("event %v; want the signal", ev)
		}
		x.Unwatch() // fired, and no longer wanted: nothing left to know
		w.mu.Lock()
		rec := w.exists[sig]
		w.mu.Unlock()
		if rec != nil {
			leaked++
			t.Logf("round %d: %s fired and was given up, but wire.exists keeps %+v", i, sig, *rec)
		}
	}
	if leaked > 0 {
		w.mu.Lock()
		n := len(w.exists)
		w.mu.Unlock()
		t.Errorf("%d of %d watches that fired and were given up left their record in wire.exists (%d records now), for the session's life", leaked, rounds, n)
	}
}

// TestReviewExistsRecordAfterFailedRequest: a caller gives up (ctx) while
// its ExistsW request is out, and the request then fails with the
// connection: go-zookeeper never holds its watch (it adds one only with a
// reply), and the server forgets the one it set with the connection. join
// marked the record armed, and nothing clears it: after Unwatch the record
// {callers 0, armed} stays in wire.exists for the session's life (no event
// will come on that path), even once the signal has been sent. One record
// per waiter that gives up while its request is out and the connection
// drops (dsync: entry.remove after a follow abandoned with ctx).
func TestReviewExistsRecordAfterFailedRequest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	h := current(t, s)
	w := h.gen.c.wire
	other, nodeO := signalNode(t, ctx)
	sig := nodeO + ".s"

	dropped := p.Strike(zktest.Match{Op: zktest.OpExists, Path: sig}, zktest.Drop)
	ctxW, cancelW := context.WithCancel(ctx)
	res := make(chan *ExistsWatch, 1)
	go func() {
		_, x, _ := h.ExistsW(ctxW, sig)
		res <- x
	}()
	zktest.AwaitStruck(t, dropped) // applied, its reply gone: the caller waits
	cancelW()
	x := <-res
	<-x.Out
	x.Unwatch() // given up
	p.Cut()     // the request fails: no watch in go-zookeeper's table
	h = current(t, s)
	if err := other.Signal(ctx, nodeO, sig); err != nil {
		t.Fatal(err)
	}
	// A round trip on h after the signal: any event it brought h has been
	// handled by now (one connection keeps the order).
	if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(sig); return err }); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	rec := w.exists[sig]
	w.mu.Unlock()
	if rec != nil {
		t.Errorf("no watch is set on %s, in go-zookeeper or on the server, and nobody wants one, "+
			"but wire.exists keeps %+v for the session's life", sig, *rec)
	}
}

// gateConn is a connection whose reads can be held: a goroutine reads the
// server's bytes as they come, and while the gate is shut they wait, to be
// given to the next Read all at once (as a busy process or a coalescing
// network gives them). Deadlines are ignored.
type gateConn struct {
	net.Conn
	mu    sync.Mutex
	cond  *sync.Cond
	shut  bool
	since int    // len(log) when the gate shut
	buf   []byte // not yet read
	log   []byte // all read from the server
	err   error
	sw    [][]byte // the setWatches requests written
	// shutAtSW: the gate shuts as the first setWatches request is
	// written, so that go-zookeeper sends no more of them (it sends
	// each once the one before it is answered).
	shutAtSW bool

	holdW    func(b []byte) bool // a frame whose Write waits for releaseW
	heldW    chan struct{}       // closed once such a Write waits
	releaseW chan struct{}
}

// holdWrite makes the next request frame of opcode op that names path
// wait in Write: held closes once it waits, and it is written once the
// caller closes release. go-zookeeper's sending goroutine waits with it,
// and the requests after it queue behind.
func (g *gateConn) holdWrite(op int32, path string) (held, release chan struct{}) {
	key := juteString(path)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.heldW, g.releaseW = make(chan struct{}), make(chan struct{})
	g.holdW = func(b []byte) bool {
		return len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == op && bytes.Contains(b[12:], key)
	}
	return g.heldW, g.releaseW
}

func (g *gateConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	hold := g.holdW != nil && g.holdW(b)
	if hold {
		g.holdW = nil
		close(g.heldW)
	}
	g.mu.Unlock()
	if hold {
		<-g.releaseW
	}
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == opSetWatches {
		g.mu.Lock()
		g.sw = append(g.sw, slices.Clone(b))
		if g.shutAtSW && len(g.sw) == 1 {
			g.shut, g.since = true, len(g.log)
		}
		g.cond.Broadcast()
		g.mu.Unlock()
	}
	return g.Conn.Write(b)
}

// answersSW reports whether f is the reply to a setWatches request
// written. Under g.mu.
func (g *gateConn) answersSW(f []byte) bool {
	return len(f) >= 4 && slices.ContainsFunc(g.sw, func(r []byte) bool { return bytes.Equal(r[4:8], f[:4]) })
}

func newGateConn(c net.Conn, shutAtSW bool) *gateConn {
	g := &gateConn{Conn: c, shutAtSW: shutAtSW}
	g.cond = sync.NewCond(&g.mu)
	go func() {
		b := make([]byte, 64<<10)
		for {
			n, err := c.Read(b)
			g.mu.Lock()
			g.buf = append(g.buf, b[:n]...)
			g.log = append(g.log, b[:n]...)
			if err != nil {
				g.err = err
			}
			g.cond.Broadcast()
			g.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return g
}

func (g *gateConn) SetDeadline(time.Time) error     { return nil }
func (g *gateConn) SetReadDeadline(time.Time) error { return nil }

func (g *gateConn) Read(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.err == nil && (g.shut || len(g.buf) == 0) {
		g.cond.Wait()
	}
	if g.shut || len(g.buf) == 0 {
		return 0, g.err
	}
	n := copy(b, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func (g *gateConn) gate() {
	g.mu.Lock()
	g.shut = true
	g.since = len(g.log)
	g.mu.Unlock()
}

func (g *gateConn) open() {
	g.mu.Lock()
	g.shut = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// await returns once the frames that came since the gate shut satisfy ok.
func (g *gateConn) await(t *testing.T, ok func(frames [][]byte) bool) {
	t.Helper()
	g.until(t, "the gated frames", func() bool {
		var frames [][]byte
		b := g.log[g.since:]
		for len(b) >= 4 {
			end := 4 + int(binary.BigEndian.Uint32(b))
			if len(b) < end {
				break
			}
			frames = append(frames, b[4:end])
			b = b[end:]
		}
		return ok(frames)
	})
}

// until returns once ok holds (called under g.mu), failing the test if it
// does not within 30 s.
func (g *gateConn) until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	stop := time.AfterFunc(30*time.Second, func() {
		g.mu.Lock()
		g.err = context.DeadlineExceeded
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for !ok() {
		if g.err != nil {
			t.Fatalf("%s never came: %v", what, g.err)
		}
		g.cond.Wait()
	}
}

// notifies reports whether f is a watch event of type typ at path.
func notifies(f []byte, typ int32, path string) bool {
	if len(f) < 28 || int32(binary.BigEndian.Uint32(f)) != xidNotification {
		return false
	}
	l := int(binary.BigEndian.Uint32(f[24:28]))
	return int32(binary.BigEndian.Uint32(f[16:20])) == typ && 28+l <= len(f) && string(f[28:28+l]) == path
}

// replyErr returns the error code of a reply f (not an event).
func replyErr(f []byte) (int32, bool) {
	if len(f) < 16 || int32(binary.BigEndian.Uint32(f)) < 0 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(f[12:16])), true
}

// TestReviewExistsEventBeforeReplyInOneRead: the event of an exists watch on
// a path and, right after it in the stream, the reply to a second ExistsW
// on that path (sent after the signal was applied, answered NoNode, so it
// sets a new watch) are read by the tap in one read. scan armed the record
// at the reply, before go-zookeeper had handled the event that precedes it;
// go-zookeeper then handled the event (wire.fired cleared armed) and only
// then the reply (it added the new watch). The record said no watch was
// held while go-zookeeper held one: once both callers called Unwatch it was
// deleted, and go-zookeeper set that unwanted watch again on the next
// connection. The tap now arms a record as go-zookeeper reads the reply
// (tap.Read).
//
// In dsync: follow's first watchSignal on a handoff path, then prev is
// written to (list again) and follow runs again on the same prev while the
// first watch is still set; prev hands off just before the second exists
// arrives.
func TestReviewExistsEventBeforeReplyInOneRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gs := gatedSession(t)
	h := current(t, gs.Session)
	w := h.gen.c.wire
	other, nodeO := signalNode(t, ctx)
	sig := nodeO + ".s"
	kept := keepWatching(t, ctx, h, nodeO)
	x1 := mustExistsW(t, ctx, h, sig)

	g := gs.last()
	g.gate()
	if err := other.Signal(ctx, nodeO, sig); err != nil {
		t.Fatal(err)
	}
	res := goExistsW(t, ctx, h, sig)
	// The event of x1, then the NoNode reply to the second request.
	g.await(t, func(frames [][]byte) bool {
		i := slices.IndexFunc(frames, func(f []byte) bool { return notifies(f, int32(zk.EventNodeCreated), sig) })
		return i >= 0 && slices.ContainsFunc(frames[i+1:], func(f []byte) bool {
			code, ok := replyErr(f)
			return ok && code == zkNoNode
		})
	})
	g.open()
	if ev := <-x1.C; ev.Type != zk.EventNodeCreated {
		t.Fatalf("x1 event %v; want the signal", ev)
	}
	x2 := <-res
	if x2 == nil || x2.C == nil {
		t.Fatal("second ExistsW set no watch")
	}
	x1.Unwatch()
	x2.Unwatch() // nobody wants the watch x2 set, which go-zookeeper holds

	w.mu.Lock()
	rec, ok := w.exists[sig]
	var recv existsWatches
	if ok {
		recv = *rec
	}
	w.mu.Unlock()
	if !ok || !recv.armed {
		t.Errorf("go-zookeeper holds x2's exists watch on %s, nobody wants it, but wire.exists has %v (present %v): not armed, keepWanted will send it again", sig, recv, ok)
	}

	// A new connection: go-zookeeper sends its watches again.
	gs.reconnect(t, h, kept)
	m, err := shared.Watches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(m[sig], h.ID()) {
		t.Errorf("after the reconnect the server watches %s for session %#x, which nobody wants (unwatched by both callers): leaked for the session's life", sig, h.ID())
	}
}

func mustExistsW(t *testing.T, ctx context.Context, h Handle, path string) *ExistsWatch {
	t.Helper()
	there, x, err := h.ExistsW(ctx, path)
	if err != nil || there {
		t.Fatalf("ExistsW(%s) = %v, %v", path, there, err)
	}
	return x
}

// A gated is a Session whose connections are gateConns.
type gated struct {
	*Session
	mu    sync.Mutex
	cond  *sync.Cond
	gates []*gateConn
	// shutAtSW: the connections dialed from now on shut their gates at
	// their first setWatches (see gateConn.shutAtSW).
	shutAtSW bool
}

// goExistsW calls ExistsW at path on a goroutine of its own, expecting no
// node there, and sends the ExistsWatch on the returned channel.
func goExistsW(t *testing.T, ctx context.Context, h Handle, path string) <-chan *ExistsWatch {
	res := make(chan *ExistsWatch, 1)
	go func() {
		there, x, err := h.ExistsW(ctx, path)
		if err != nil || there {
			t.Errorf("ExistsW(%s) = %v, %v", path, there, err)
		}
		res <- x
	}()
	return res
}

// gatedSession dials a gated Session to servers (the shared server if none).
func gatedSession(t *testing.T, servers ...string) *gated {
	if len(servers) == 0 {
		servers = []string{shared.Addr()}
	}
	gs := &gated{}
	gs.cond = sync.NewCond(&gs.mu)
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		g := newGateConn(c, gs.shutAtSW)
		gs.gates = append(gs.gates, g)
		gs.cond.Broadcast()
		return g, nil
	}
	gs.Session = dial(t, servers, WithDialer(dialer))
	return gs
}

// shutAtSetWatches sets whether the connections dialed from now on shut
// their gates at their first setWatches.
func (gs *gated) shutAtSetWatches(shut bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.shutAtSW = shut
}

// count returns how many connections have been dialed.
func (gs *gated) count() int {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return len(gs.gates)
}

// last returns the newest connection.
func (gs *gated) last() *gateConn {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.gates[len(gs.gates)-1]
}

// redial closes the newest connection and returns the next, once
// go-zookeeper has dialed it.
func (gs *gated) redial(t *testing.T) *gateConn {
	t.Helper()
	n := gs.count()
	gs.last().Conn.Close()
	return gs.dialedAfter(t, n)
}

// dialedAfter returns connection n+1, once go-zookeeper has dialed it.
func (gs *gated) dialedAfter(t *testing.T, n int) *gateConn {
	t.Helper()
	stop := time.AfterFunc(30*time.Second, func() {
		gs.mu.Lock()
		gs.cond.Broadcast()
		gs.mu.Unlock()
	})
	defer stop.Stop()
	deadline := time.Now().Add(30 * time.Second)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for len(gs.gates) == n {
		if time.Now().After(deadline) {
			t.Fatal("no new connection within 30 s")
		}
		gs.cond.Wait()
	}
	return gs.gates[n]
}

// reconnect drops gs's connection and returns once setWatches on the next
// one has been answered and the server watches kept (a watch still wanted)
// for h again.
func (gs *gated) reconnect(t *testing.T, h Handle, kept string) {
	t.Helper()
	g := gs.redial(t)
	g.await(t, func(frames [][]byte) bool { return slices.ContainsFunc(frames, g.answersSW) })
	awaitServerWatch(t, kept, h.ID())
}

// TestReviewExistsWrittenAfterUnwatch: a caller of ExistsW gives up (ctx)
// while its request waits in go-zookeeper's send queue (behind a request
// the connection is slow to take), and calls Unwatch at once, as
// ExistsWatch's doc allows. leave deletes the record (callers 0, not
// armed); the request was then written, and tap.Write did not track it
// (it tracked only paths with a record). The server answers NoNode and go-zookeeper
// holds the exists watch nobody wants; keepWanted knows nothing of it, so
// every new connection set it again. The record now stays while a request
// is out (existsWatches.out). In dsync: entry.remove after a follow
// abandoned with ctx, when the entry's node is gone already (its signals
// are not sent).
func TestReviewExistsWrittenAfterUnwatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gs := gatedSession(t)
	h := current(t, gs.Session)
	w := h.gen.c.wire
	_, nodeO := signalNode(t, ctx)
	sig := nodeO + ".s"
	kept := keepWatching(t, ctx, h, nodeO)

	// A getData of nodeO whose Write waits: go-zookeeper's sending
	// goroutine is held on it, and requests queue behind it.
	held, release := gs.last().holdWrite(opGetData, nodeO)
	getDone := make(chan error, 1)
	go func() {
		getDone <- h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Get(nodeO); return err })
	}()
	<-held

	ctxW, cancelW := context.WithCancel(ctx)
	res := make(chan *ExistsWatch, 1)
	go func() {
		_, x, _ := h.ExistsW(ctxW, sig)
		res <- x
	}()
	// join has counted the caller: its request will go out. Nothing
	// tells when, so ask again every millisecond.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		joined := w.exists[sig] != nil
		w.mu.Unlock()
		if joined {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ExistsW never joined")
		}
	}
	cancelW()
	x := <-res
	if !x.counted {
		t.Fatal("setup: ExistsW never joined")
	}
	x.Unwatch() // given up, before its request was written
	close(release)
	<-x.Out
	if err := <-getDone; err != nil {
		t.Fatal(err)
	}
	// A round trip after the exists: its reply has been handled.
	if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Get(nodeO); return err }); err != nil {
		t.Fatal(err)
	}
	gs.reconnect(t, h, kept)
	m, err := shared.Watches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(m[sig], h.ID()) {
		w.mu.Lock()
		rec := w.exists[sig]
		w.mu.Unlock()
		t.Errorf("after Unwatch and a reconnect the server watches %s for session %#x, which nobody wants (wire.exists[%s] = %v)", sig, h.ID(), sig, rec)
	}
}

// TestReviewPlainExistsArmsNothing: an exists request without a watch (Do
// with c.Exists) on a path with a record was tracked like ExistsW's, and
// its reply armed the record although go-zookeeper holds no watch: once the
// ExistsW caller, whose watch fired, called Unwatch, the record stayed for
// the session's life. wire.watching now looks at the watch flag.
func TestReviewPlainExistsArmsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := current(t, dial(t, []string{shared.Addr()}))
	w := h.gen.c.wire
	other, nodeO := signalNode(t, ctx)
	sig := nodeO + ".s"
	x := mustExistsW(t, ctx, h, sig)
	if err := other.Signal(ctx, nodeO, sig); err != nil {
		t.Fatal(err)
	}
	if ev := <-x.C; ev.Type != zk.EventNodeCreated {
		t.Fatalf("event %v", ev)
	}
	if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(sig); return err }); err != nil {
		t.Fatal(err)
	}
	x.Unwatch()
	w.mu.Lock()
	rec := w.exists[sig]
	w.mu.Unlock()
	if rec != nil {
		t.Errorf("no watch is held on %s and nobody wants one, but wire.exists keeps %+v", sig, *rec)
	}
}
