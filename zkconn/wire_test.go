package zkconn

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// TestWireRefusesSecondSession: go-zookeeper, told by the server that its
// session expired, asks for a new one on the same *zk.Conn and sends on it
// the requests queued for the old one. Through a wire it cannot: the
// request queued for the expired session never runs.
func TestWireRefusesSecondSession(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	obs := zktest.Observer(t, srv.Addr())
	w := newWire(net.DialTimeout)
	// Asks for a minute: go-zookeeper sets its timers by the 2s granted,
	// but nothing here gives the session up, so the server's word decides.
	conn, events, err := zk.Connect([]string{p.Addr()}, time.Minute, zk.WithDialer(w.dialer()), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	next := func(want ...zk.State) zk.State {
		t.Helper()
		for ev := range events {
			for _, s := range want {
				if ev.Type == zk.EventSession && ev.State == s {
					return s
				}
			}
		}
		t.Fatalf("events closed waiting for %v", want)
		return 0
	}
	next(zk.StateHasSession)
	if got := w.Timeout(); got != 2*time.Second {
		t.Errorf("granted timeout = %v; want 2s", got)
	}
	node, err := conn.Create("/wire-test", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := obs.ExistsW(node)
	if err != nil {
		t.Fatal(err)
	}
	p.BlackHole()
	next(zk.StateDisconnected)
	<-gone // expired by the server
	queued := make(chan error, 1)
	go func() {
		_, err := conn.Create("/wire-test-queued", nil, 0, zk.WorldACL(zk.PermAll))
		queued <- err
	}()
	p.Heal()
	next(zk.StateExpired)
	next(zk.StateConnected) // a TCP connection, asking for a new session
	if s := next(zk.StateHasSession, zk.StateDisconnected); s == zk.StateHasSession {
		t.Fatal("a second session on one *zk.Conn")
	}
	conn.Close()
	if err := <-queued; err == nil {
		t.Error("the request queued for the expired session ran")
	}
	if ok, _, err := obs.Exists("/wire-test-queued"); ok || err != nil {
		t.Errorf("Exists(/wire-test-queued) = %v, %v; want false", ok, err)
	}
}

// countingConn counts the reads that reach a connection.
type countingConn struct {
	net.Conn
	reads *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(b)
}

// TestTapReadsAFrameAtOnce: go-zookeeper reads a frame's length, then its
// body; through a tap, a reply that came whole costs one read of the
// connection, not two. Replies larger than the tap's buffer come through
// whole too.
func TestTapReadsAFrameAtOnce(t *testing.T) {
	var reads atomic.Int64 // of every connection
	w := newWire(func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, reads: &reads}, nil
	})
	conn, _, err := zk.Connect([]string{shared.Addr()}, 30*time.Second, zk.WithDialer(w.dialer()), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 kB: many reads of the tap's size
	path, err := conn.Create("/tap-test", big, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	before := reads.Load()
	for range n {
		if _, _, err := conn.Exists("/"); err != nil {
			t.Fatal(err)
		}
	}
	// One read a reply, give or take a ping's reply and a reply that came
	// in two segments; without the tap's buffer, two a reply.
	if got := reads.Load() - before; got > n+n/10 {
		t.Errorf("%d replies took %d reads of the connection; want about one each", n, got)
	}
	for range 3 {
		got, _, err := conn.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, big) {
			t.Fatalf("Get(%s) returned %d bytes, not the %d written", path, len(got), len(big))
		}
	}
}

// chunkConn serves Read from a list of chunks, one chunk or part of one a
// call; it returns err with the last bytes and on every read after them, as
// a connection that ended does.
type chunkConn struct {
	net.Conn
	chunks [][]byte
	err    error
}

// Close does nothing: there is nothing to close (a tap closes its
// connection when the server has not answered for long: see tap.deafCheck).
func (c *chunkConn) Close() error { return nil }

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, c.err
	}
	n := copy(b, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return n, c.err // data and an error in one call, as io.Reader allows
	}
	return n, nil
}

// frameOf makes a frame: a 4-byte length, then body.
func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestTapHoldStopsAtTheConnectResponse: under a hold, a read that could
// take more than the connect response stops at its end, so that the next
// read waits for the hold; after it, the bytes that follow come. (Framings
// of every kind: TestReviewTapRandomFraming.)
func TestTapHoldStopsAtTheConnectResponse(t *testing.T) {
	greeting := make([]byte, 36)                     // protocol version, timeout, session id, password
	binary.BigEndian.PutUint32(greeting[4:8], 30000) // ms: heard is recent throughout
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	next := frameOf(make([]byte, 16)) // a reply, or a notification
	stream := slices.Concat(frameOf(greeting), next)
	tp := &tap{Conn: &chunkConn{chunks: [][]byte{stream}, err: io.EOF}, w: newWire(nil), hold: make(chan struct{}), holdFor: time.Hour}
	b := make([]byte, len(stream))
	n, err := tp.Read(b)
	if err != nil || n != 4+len(greeting) {
		t.Fatalf("Read = %d, %v; want the %d bytes of the connect response", n, err, 4+len(greeting))
	}
	if tp.given != tp.greetEnd {
		t.Fatalf("%d bytes returned, the connect response ends at %d: the next Read would not wait for the hold", tp.given, tp.greetEnd)
	}
	tp.unhold()
	if n, err := tp.Read(b); err != nil || !bytes.Equal(b[:n], next) {
		t.Fatalf("Read after the hold = %d, %v; want the %d bytes after the connect response", n, err, len(next))
	}
}

// handTap drives a tap by hand in ZooKeeper's protocol, as go-zookeeper
// does.
type handTap struct {
	t  *testing.T
	tp *tap
}

// write writes a request: its xid, its opcode, then body.
func (h handTap) write(xid, op int32, body []byte) {
	h.t.Helper()
	hdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(xid)), uint32(op))
	if _, err := h.tp.Write(frameOf(append(hdr, body...))); err != nil {
		h.t.Fatal(err)
	}
}

// connect asks for a new session and reads the connect response.
func (h handTap) connect() {
	h.t.Helper()
	// protocol version, last zxid, timeout, session id, password
	req := binary.BigEndian.AppendUint32(make([]byte, 12), 10000)
	req = append(append(req, make([]byte, 8)...), frameOf(make([]byte, 16))...)
	if _, err := h.tp.Write(frameOf(req)); err != nil {
		h.t.Fatal(err)
	}
	h.read()
}

// read reads a frame as go-zookeeper does, its length and then its body,
// and returns the body.
func (h handTap) read() []byte {
	h.t.Helper()
	var n [4]byte
	if _, err := io.ReadFull(h.tp, n[:]); err != nil {
		h.t.Fatal(err)
	}
	f := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(h.tp, f); err != nil {
		h.t.Fatal(err)
	}
	return f
}

// juteString encodes s as ZooKeeper does: its length, then its bytes.
func juteString(s string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
}

// replyHeader returns the xid and the zxid of a reply's body.
func replyHeader(f []byte) (xid int32, zxid int64) {
	return int32(binary.BigEndian.Uint32(f[:4])), int64(binary.BigEndian.Uint64(f[4:12]))
}

// TestTapHoldPassesOnlyTheAuthReplies drives a held connection to a real
// ZooKeeper by hand, as go-zookeeper does after a reconnect with
// credentials: connect, two setAuth requests one after the other, an exists
// request, then setWatches. Each setAuth lets its reply through (zxid 0:
// go-zookeeper writes no lastZxid for it); the reply to exists (zxid > 0)
// waits for the setWatches request to be written. (Before, the first setAuth
// ended the hold, and replies that go-zookeeper records lastZxid for could
// come before setWatches: a data race under -race, in CI.)
func TestTapHoldPassesOnlyTheAuthReplies(t *testing.T) {
	c, err := net.DialTimeout("tcp", shared.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The hold ends by setWatches alone.
	tp := &tap{Conn: c, w: newWire(nil), hold: make(chan struct{}), holdFor: time.Hour, authed: make(chan struct{}, 1)}
	h := handTap{t, tp}
	h.connect()
	defer tp.holdTimer.Stop()
	for xid := int32(1); xid <= 2; xid++ {
		if tp.given != tp.open {
			t.Fatalf("credential %d: %d bytes given, the hold is open to %d: the next Read would not wait", xid, tp.given, tp.open)
		}
		h.write(xid, opSetAuth, slices.Concat(make([]byte, 4), juteString("digest"), juteString(fmt.Sprintf("user%d:pw", xid))))
		if got, zxid := replyHeader(h.read()); got != xid || zxid != 0 {
			t.Fatalf("after setAuth %d: reply xid %d zxid %d; want its own reply, zxid 0", xid, got, zxid)
		}
	}
	h.write(3, opExists, append(juteString("/"), 0))
	if tp.given != tp.open || tp.open < 0 {
		t.Fatalf("after the replies to the credentials: %d bytes given, the hold is open to %d: the reply to exists would not wait for setWatches", tp.given, tp.open)
	}
	// setWatches: relative zxid, then data, exist and child watches (none)
	h.write(4, opSetWatches, make([]byte, 8+3*4))
	if xid, zxid := replyHeader(h.read()); xid != 3 || zxid <= 0 {
		t.Fatalf("after setWatches: reply xid %d zxid %d; want the reply to exists, zxid > 0", xid, zxid)
	}
	if xid, _ := replyHeader(h.read()); xid != 4 {
		t.Fatalf("then reply xid %d; want the reply to setWatches", xid)
	}
}

// TestTapHoldOutlastsItsTimerWhileWatchesAreHeld: go-zookeeper's goroutine
// can be kept from running past holdFor between the connect response and
// its read of lastZxid for setWatches (a loaded machine: CI with eight
// tests side by side reported go-zookeeper's data race, the timer having
// ended the hold first). While go-zookeeper holds a watch, data, child or
// exists, that setWatches is sure to come: the timer keeps the hold, and
// setWatches ends it, the reply to a request written meanwhile after it.
// Holding none, past holdMax or a third of the session timeout after the
// server was last heard from (nothing is read meanwhile, and a connection
// not heard from for two thirds of it is closed), or on a closed
// connection, the timer ends it. The timer's function is called here as
// the timer would call it.
func TestTapHoldOutlastsItsTimerWhileWatchesAreHeld(t *testing.T) {
	data := func(w *wire) { w.watched(watchKey{"/", dataWatch}, 1) }
	for _, tc := range []struct {
		name     string
		watch    func(w *wire)
		closed   bool
		since    time.Duration // how long ago the timer started
		heard    time.Duration // how long ago the server was last heard from
		timeout  time.Duration // the session timeout, if not the 10s granted
		wantHeld bool
	}{
		{"child watch", func(w *wire) { w.watched(watchKey{"/", childWatch}, 1) }, false, 0, 0, 0, true},
		{"exists watch", func(w *wire) { w.arm(watching{path: "/missing", noNode: true}, 1) }, false, 0, 0, 0, true},
		{"no watch", func(*wire) {}, false, 0, 0, 0, false},
		{"exists asked, unanswered", func(w *wire) { w.watching("/missing") }, false, 0, 0, 0, false},
		{"under holdMax", data, false, holdMax / 2, 0, 0, true},
		{"past holdMax", data, false, holdMax, 0, 0, false},
		{"under a third of the timeout", data, false, 0, 500 * time.Millisecond, 3 * time.Second, true},
		{"past a third of the timeout", data, false, 0, 1200 * time.Millisecond, 3 * time.Second, false},
		{"closed", data, true, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", shared.Addr(), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tp := &tap{Conn: c, w: newWire(nil), hold: make(chan struct{}), holdFor: time.Hour, authed: make(chan struct{}, 1)}
			tc.watch(tp.w)
			h := handTap{t, tp}
			h.connect()
			defer tp.holdTimer.Stop()
			h.write(1, opExists, append(juteString("/"), 0))
			if tc.timeout > 0 {
				tp.w.timeout.Store(int64(tc.timeout))
			}
			tp.w.heard.Store(int64(time.Since(tp.w.base) - tc.heard))
			tp.mu.Lock()
			tp.holdFrom = tp.holdFrom.Add(-tc.since)
			tp.closed = tc.closed
			tp.mu.Unlock()
			tp.holdExpired()
			select {
			case <-tp.hold:
				if tc.wantHeld {
					t.Fatal("the timer ended the hold while go-zookeeper holds a watch: its setWatches, sure to come, may read lastZxid as a reply writes it")
				}
				return
			default:
				if !tc.wantHeld {
					t.Fatal("the timer kept the hold; want it ended")
				}
			}
			h.write(2, opSetWatches, make([]byte, 8+3*4))
			if xid, zxid := replyHeader(h.read()); xid != 1 || zxid <= 0 {
				t.Fatalf("after setWatches: reply xid %d zxid %d; want the reply to exists, zxid > 0", xid, zxid)
			}
		})
	}
}

// TestTapConnectRequestIsNoRequest writes connect requests whose last zxid
// has the epoch 101, then 100: their bytes 8-12, where a request has its
// opcode, were read as setWatches and setAuth. The connect request is no
// request: the hold stays (it ended at once before), and no setAuth reply
// is awaited.
func TestTapConnectRequestIsNoRequest(t *testing.T) {
	for _, epoch := range []uint32{opSetWatches, opSetAuth} {
		c, err := net.DialTimeout("tcp", shared.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tp := &tap{Conn: c, w: newWire(nil), hold: make(chan struct{}), holdFor: time.Hour, authed: make(chan struct{}, 1)}
		// protocol version, last zxid (epoch, counter), timeout, session id, password
		req := binary.BigEndian.AppendUint32(make([]byte, 4), epoch)
		req = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(req, 0), 10000)
		req = append(append(req, make([]byte, 8)...), frameOf(make([]byte, 16))...)
		if _, err := tp.Write(frameOf(req)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tp.hold:
			t.Errorf("epoch %d: the connect request ended the hold", epoch)
		default:
		}
		if want := []request{{at: tp.pending[0].at}}; !slices.Equal(tp.pending, want) {
			t.Errorf("epoch %d: requests written %+v; want the connect request alone, not a setAuth", epoch, tp.pending)
		}
		c.Close()
	}
}

// setWatchesFrame lays out a setWatches request as go-zookeeper does.
func setWatchesFrame(data, exist, child []string) []byte {
	body := binary.BigEndian.AppendUint32(nil, 7) // xid
	body = binary.BigEndian.AppendUint32(body, opSetWatches)
	body = binary.BigEndian.AppendUint64(body, 42) // relative zxid
	for _, v := range [][]string{data, exist, child} {
		body = binary.BigEndian.AppendUint32(body, uint32(len(v)))
		for _, p := range v {
			body = append(body, juteString(p)...)
		}
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestKeepWanted: a setWatches frame written on a connection carries only
// the exists watches go-zookeeper holds (armed), that someone wants (a
// caller of ExistsW, or a plain request's), and that no request on that
// connection set already; a frame that loses none, or one laid out
// otherwise, goes as it is.
func TestKeepWanted(t *testing.T) {
	w := newWire(nil)
	const old, next = 1, 2 // connections
	for _, p := range []string{"/a.s", "/b.s", "/c.s"} {
		w.join(p)
		w.arm(watching{path: p}, old) // answered
	}
	w.join("/b.s") // two callers
	w.leave("/a.s")
	w.leave("/b.s")
	w.leave("/x.s") // never joined: nothing to forget
	w.arm(watching{path: "/p", plain: true}, old)

	in := setWatchesFrame([]string{"/a.s"}, []string{"/a.s", "/b.s", "/c.s", "/p", "/x.s"}, []string{"/a.s"})
	want := setWatchesFrame([]string{"/a.s"}, []string{"/b.s", "/c.s", "/p"}, []string{"/a.s"})
	if got := w.keepWanted(in, next); !bytes.Equal(got, want) {
		t.Fatalf("keepWanted =\n%x\nwant\n%x", got, want)
	}
	none := setWatchesFrame(nil, []string{"/c.s", "/p"}, nil)
	if got := w.keepWanted(none, next); &got[0] != &none[0] {
		t.Error("a frame that loses nothing was copied")
	}
	short := in[:len(in)-3]
	if got := w.keepWanted(short, next); !bytes.Equal(got, short) {
		t.Error("a frame laid out otherwise was changed")
	}

	// Requests on the next connection before the frame, answered that
	// no node is there: /c.s again (ExistsW: counted first), /p again
	// (plain); the server holds their exists watches. And /b.s, answered
	// that a node is there: a data watch, which is no exists watch.
	w.sending("/c.s")
	for _, p := range []string{"/c.s", "/p", "/b.s"} {
		k, ok := watchKeyOf(opExists, append(juteString(p), 1))
		ws := w.watching(k.path)
		if !ok || k != (watchKey{path: p}) || ws.path != p || ws.plain != (p != "/c.s") {
			t.Fatalf("watchKeyOf(exists %s) = %+v, %v; watching = %+v", p, k, ok, ws)
		}
		ws.noNode = p != "/b.s"
		w.answered(ws, next)
	}
	want = setWatchesFrame([]string{"/a.s"}, []string{"/b.s"}, []string{"/a.s"})
	if got := w.keepWanted(in, next); !bytes.Equal(got, want) {
		t.Errorf("watches set on the connection already are carried:\n%x\nwant\n%x", got, want)
	}
	if _, ok := watchKeyOf(opExists, append(juteString("/q"), 0)); ok {
		t.Error("an exists without a watch is recorded")
	}

	w.fired("/b.s", zk.EventNodeChildrenChanged) // fires no exists watch
	if got := w.keepWanted(in, next+1); !bytes.Contains(got, []byte("/b.s")) {
		t.Error("a children event took an exists watch out")
	}
	w.fired("/b.s", zk.EventNodeCreated) // its event came: go-zookeeper forgot it
	w.fired("/p", zk.EventNodeDeleted)
	want = setWatchesFrame([]string{"/a.s"}, []string{"/c.s"}, []string{"/a.s"})
	if got := w.keepWanted(in, next+1); !bytes.Equal(got, want) {
		t.Errorf("watches whose event came are carried:\n%x\nwant\n%x", got, want)
	}
}

// TestKeep: CreatedW's exists request, sent while connection 1 was
// current and answered there that no node was there, was taken for an
// ExistsW caller's (not plain). Marked plain while connection 1 is still
// current, it is carried on after that caller's Unwatch. A connection made
// since may have sent its watches without it, and keep says to set it
// again, even once another request has set an exists watch there on that
// connection (a node made and deleted before it went unseen, round 78). A
// watch fired since needs nothing.
func TestKeep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cur   int32 // the connection when keep is called
		again bool  // another request answered no node on cur
		fired bool  // an event at the path since the answer
		want  bool
		plain bool // carried by the next connection's setWatches
	}{
		{"same connection", 1, false, false, true, true},
		{"connection since", 2, false, false, false, false},
		{"set again since", 2, true, false, false, false},
		{"fired since", 1, false, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(nil)
			w.connected(1, 0)
			w.join("/p") // an ExistsW caller
			w.sending("/p")
			ws := w.watching("/p") // CreatedW's, written while ExistsW's is out
			ws.noNode = true
			w.answered(ws, 1)
			w.arm(ws, 1)
			w.sent("/p")
			w.leave("/p") // Unwatch
			if tc.fired {
				w.fired("/p", zk.EventNodeCreated)
			}
			if tc.cur != 1 {
				w.connected(tc.cur, 0)
			}
			if tc.again {
				w.sending("/p") // another ExistsW's, then Unwatch
				again := w.watching("/p")
				again.noNode = true
				w.answered(again, tc.cur)
				w.arm(again, tc.cur)
				w.sent("/p")
			}
			if got := w.keep("/p", 1); got != tc.want {
				t.Errorf("keep = %v; want %v", got, tc.want)
			}
			in := setWatchesFrame(nil, []string{"/p"}, nil)
			carried := !bytes.Equal(w.keepWanted(in, 3), setWatchesFrame(nil, nil, nil))
			if carried != tc.plain {
				t.Errorf("the next connection's setWatches carries /p: %v; want %v", carried, tc.plain)
			}
		})
	}
}
