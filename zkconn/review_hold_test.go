package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// reviewArrivals is a net.Conn read by a goroutine of its own as bytes
// arrive: Read serves everything that has arrived (at once, up to len(b)),
// and awaitFrames waits until whole frames have, so that a test knows what a
// tap's next read of the connection will get without a sleep.
type reviewArrivals struct {
	net.Conn
	done chan struct{} // closed when the reading goroutine has returned

	mu   sync.Mutex
	more *sync.Cond
	buf  []byte // arrived, not yet read
	all  []byte // every byte that arrived
	err  error
}

func newReviewArrivals(t *testing.T, c net.Conn) *reviewArrivals {
	a := &reviewArrivals{Conn: c, done: make(chan struct{})}
	a.more = sync.NewCond(&a.mu)
	go func() {
		defer close(a.done)
		b := make([]byte, 64<<10)
		for {
			n, err := c.Read(b)
			a.mu.Lock()
			a.buf = append(a.buf, b[:n]...)
			a.all = append(a.all, b[:n]...)
			if err != nil {
				a.err = err
			}
			a.more.Broadcast()
			a.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-a.done
	})
	return a
}

func (a *reviewArrivals) Read(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.buf) == 0 && a.err == nil {
		a.more.Wait()
	}
	if len(a.buf) == 0 {
		return 0, a.err
	}
	n := copy(b, a.buf)
	a.buf = a.buf[n:]
	return n, nil
}

// awaitFrames returns once n whole frames have arrived; it fails the test
// if the connection ends first.
func (a *reviewArrivals) awaitFrames(t *testing.T, n int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for reviewFrames(a.all) < n && a.err == nil {
		a.more.Wait()
	}
	if got := reviewFrames(a.all); got < n {
		t.Fatalf("%d whole frames arrived, then %v; want %d", got, a.err, n)
	}
}

// reviewFrames counts the whole frames at the start of b.
func reviewFrames(b []byte) int {
	n := 0
	for len(b) >= 4 {
		end := 4 + int(binary.BigEndian.Uint32(b))
		if len(b) < end {
			break
		}
		b, n = b[end:], n+1
	}
	return n
}

// TestReviewHoldSetAuthAfterARequest: a setAuth that go-zookeeper's send
// loop writes during the hold (Conn.AddAuth, which Handle.Conn exposes, goes
// through the send loop like any request) after another request whose reply
// (zxid > 0) is already in moves open past the end of the auth reply, and so
// past that other reply: it goes to go-zookeeper before setWatches is
// written and before the hold's timer has run, the write of Conn.lastZxid
// the hold is there to order after the read in sendSetWatches. (It failed
// while the tap let an auth reply through once it was in, not only when it
// was the next frame after what the hold had let through.) Driven
// by hand on a real server, as TestTapHoldPassesOnlyTheAuthReplies is: the
// reply to exists has arrived before setAuth is written, so the server
// cannot answer setAuth first.
func TestReviewHoldSetAuthAfterARequest(t *testing.T) {
	obs := zktest.Observer(t, shared.Addr())
	// A transaction, so that replies carry a zxid > 0 on a fresh server.
	if _, err := obs.Create("/zkconn-test", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", shared.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := newReviewArrivals(t, c)
	// A hold that ends by setWatches or by its timer (made long here, so
	// that a reply passing before it is not one passing after it).
	tp := &tap{Conn: a, w: newWire(nil), hold: make(chan struct{}), holdFor: time.Second, authed: make(chan struct{}, 1)}
	h := handTap{t, tp}
	h.connect()
	defer tp.holdTimer.Stop()

	h.write(1, opExists, append(juteString("/"), 0))
	a.awaitFrames(t, 2) // the connect response, the reply to exists
	h.write(2, opSetAuth, slices.Concat(make([]byte, 4), juteString("digest"), juteString("user:pw")))
	a.awaitFrames(t, 3) // and the reply to setAuth, after it

	f := h.read()
	held := true
	select {
	case <-tp.hold:
		held = false
	default:
	}
	xid, zxid := replyHeader(f)
	if xid != 1 || zxid <= 0 {
		t.Fatalf("first reply: xid %d zxid %d; want the reply to exists (xid 1), zxid > 0", xid, zxid)
	}
	if held {
		t.Fatalf("the reply to exists (zxid %d) was given while the hold was still on (no setWatches written, timer not run): go-zookeeper writes lastZxid for it, unordered with its read for setWatches", zxid)
	}
	if xid, zxid := replyHeader(h.read()); xid != 2 || zxid != 0 {
		t.Fatalf("then reply xid %d zxid %d; want the reply to setAuth, zxid 0", xid, zxid)
	}
}

// TestReviewHoldCredentialsWatchesCuts: over TCP and over TLS, a Session
// with several credentials (WithDigestAuth, one more added on its *zk.Conn,
// and the same again while each cut is down, which goes out through the
// send loop during the hold and which go-zookeeper then keeps and re-sends
// too) and watches set, with Gets of nodes only some credential can read
// (one large) queued while the connection is down, through a proxy cut again
// and again: every reconnect re-sends the credentials before any queued
// request, every Get returns the bytes last written, and the watches set
// before each cut fire for a change made after it. Under -race the hold is
// in play on every reconnect, and a reply given before setWatches can show
// as go-zookeeper's lastZxid race (only when go-zookeeper is slow to send
// setWatches: this test does not fail on 3efa3dc's parent either).
func TestReviewHoldCredentialsWatchesCuts(t *testing.T) {
	t.Parallel()
	t.Run("tcp", func(t *testing.T) {
		reviewHoldCuts(t, shared.Addr(), shared.Addr())
	})
	t.Run("tls", func(t *testing.T) {
		srv := zktest.Start(t, zktest.WithTLS())
		reviewHoldCuts(t, srv.SecureAddr(), srv.Addr(), WithTLS(srv.TLSConfig()))
	})
}

func reviewHoldCuts(t *testing.T, addr, plain string, opts ...Option) {
	p := zktest.NewProxy(t, addr)
	s := dial(t, []string{p.Addr()}, append(opts, WithDigestAuth("u1", "p1"), WithSessionTimeout(20*time.Second))...)
	h := current(t, s)
	conn := h.Conn()
	if err := conn.AddAuth("digest", []byte("u2:p2")); err != nil {
		t.Fatal(err)
	}
	obs := zktest.Observer(t, plain)
	for _, cred := range []string{"u1:p1", "u2:p2"} {
		if err := obs.AddAuth("digest", []byte(cred)); err != nil {
			t.Fatal(err)
		}
	}
	root := testRoot(t)
	plainRoot(t, obs, root, nil)
	type node struct {
		path string
		acl  []zk.ACL
		size int
	}
	nodes := []node{
		{root + "/u1", zk.DigestACL(zk.PermAll, "u1", "p1"), 10},
		{root + "/u2", zk.DigestACL(zk.PermAll, "u2", "p2"), 9000},
		{root + "/big", zk.DigestACL(zk.PermAll, "u2", "p2"), 300000},
	}
	var mu sync.Mutex
	datas := map[string][]byte{} // what each node holds, under mu
	for i, n := range nodes {
		d := bytes.Repeat([]byte{byte('a' + i)}, n.size)
		if _, err := obs.Create(n.path, d, 0, n.acl); err != nil {
			t.Fatal(err)
		}
		datas[n.path] = d
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	paths := make([]string, len(nodes))
	for i, n := range nodes {
		paths[i] = n.path
	}
	// Kept from changing while a Get is out: the bytes it returns are the
	// ones last written.
	g := startGets(conn, paths, &mu, func(p string) []byte { return datas[p] })
	defer g.stop()
	wait := func(what string, ch <-chan zk.Event, want zk.EventType) {
		t.Helper()
		for {
			select {
			case ev := <-ch:
				if ev.Type == zk.EventNotWatching {
					t.Fatalf("%s: watch dropped: %v", what, ev.Err)
				}
				if ev.Type != want {
					t.Fatalf("%s: event %v; want %v", what, ev.Type, want)
				}
				return
			case err := <-g.errs:
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, ctx.Err())
			}
		}
	}
	sub := s.Subscribe()
	defer sub.Stop()
	for round := range 5 {
		g.await(ctx, t) // replies large and small on the connection about to be cut
		var watches []<-chan zk.Event
		for _, n := range nodes[:2] {
			_, _, ch, err := conn.GetW(n.path)
			if err != nil {
				t.Fatalf("round %d: GetW(%s): %v", round, n.path, err)
			}
			watches = append(watches, ch)
		}
		_, _, absent, err := conn.ExistsW(root + "/absent")
		if err != nil {
			t.Fatal(err)
		}
		p.Cut()
		await(t, sub, StateSuspended, 20*time.Second)
		// A credential added while the connection is down goes out
		// through the send loop on the next one, during the hold, with
		// the queued Gets (go-zookeeper keeps it again: one more to
		// re-send on every later reconnect).
		added := make(chan error, 1)
		go func() { added <- conn.AddAuth("digest", []byte("u2:p2")) }()
		await(t, sub, StateReconnected, 20*time.Second)
		for i, n := range nodes[:2] {
			d := []byte(fmt.Sprintf("round %d", round))
			mu.Lock()
			_, err := obs.Set(n.path, d, -1)
			if err == nil {
				datas[n.path] = d
			}
			mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			wait(fmt.Sprintf("round %d: data watch on %s", round, n.path), watches[i], zk.EventNodeDataChanged)
		}
		if _, err := obs.Create(root+"/absent", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		wait(fmt.Sprintf("round %d: exists watch", round), absent, zk.EventNodeCreated)
		if err := obs.Delete(root+"/absent", -1); err != nil {
			t.Fatal(err)
		}
		if err := <-added; err != nil && !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
			t.Fatalf("round %d: AddAuth during the reconnect: %v", round, err)
		}
	}
	if got := current(t, s).ID(); got != h.ID() || h.Err() != nil {
		t.Fatalf("session %#x after the cuts (%v); want the same %#x", got, h.Err(), h.ID())
	}
}

// TestReviewHoldFaultAtAuth: a fault struck at the setAuth go-zookeeper
// re-sends after a reconnect (a watch set, so setWatches waits behind it),
// while the tap's reader waits in the hold for the auth reply: Cut (the
// request never reaches the server; the connection closes), Lose (applied,
// the reply dropped, the connection closed) and Drop (the reply swallowed,
// the connection left up, with no pings: go-zookeeper's send loop has not
// started). The read ends with the connection's error, or with
// go-zookeeper's read deadline (Drop: two thirds of the session timeout),
// never blocks for good; go-zookeeper connects again, the credential passes
// and the watch fires.
func TestReviewHoldFaultAtAuth(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop} {
		t.Run(action.String(), func(t *testing.T) {
			p := zktest.NewProxy(t, shared.Addr())
			s := dial(t, []string{p.Addr()}, WithDigestAuth("u1", "p1"), WithSessionTimeout(10*time.Second))
			h := current(t, s)
			conn := h.Conn()
			obs := zktest.Observer(t, shared.Addr())
			if err := obs.AddAuth("digest", []byte("u1:p1")); err != nil {
				t.Fatal(err)
			}
			root := testRoot(t)
			plainRoot(t, obs, root, nil)
			path := root + "/n"
			if _, err := obs.Create(path, []byte("a"), 0, zk.DigestACL(zk.PermAll, "u1", "p1")); err != nil {
				t.Fatal(err)
			}
			_, _, watch, err := conn.GetW(path)
			if err != nil {
				t.Fatal(err)
			}
			f := p.Strike(zktest.Match{Op: zktest.OpAuth}, action)
			defer f.Disarm()
			p.Cut()
			deadline := time.After(40 * time.Second)
			select {
			case <-f.Struck():
			case <-deadline:
				t.Fatal("no setAuth re-sent after the reconnect")
			}
			if _, err := obs.Set(path, []byte("b"), -1); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-watch:
				if ev.Type != zk.EventNodeDataChanged {
					t.Fatalf("watch: %v (%v); want %v", ev.Type, ev.Err, zk.EventNodeDataChanged)
				}
			case <-deadline:
				t.Fatal("the watch did not fire: the session never came back after the fault")
			}
			for {
				data, _, err := conn.Get(path)
				if err == nil {
					if string(data) != "b" {
						t.Fatalf("Get = %q; want b", data)
					}
					break
				}
				if errors.Is(err, zk.ErrNoAuth) {
					t.Fatalf("Get: %v: the credential was not re-sent", err)
				}
				select {
				case <-deadline:
					t.Fatalf("Get: %v", err)
				default:
				}
			}
			if got := current(t, s).ID(); got != h.ID() || h.Err() != nil {
				t.Fatalf("session %#x after the fault (%v); want the same %#x", got, h.Err(), h.ID())
			}
		})
	}
}

// reviewScriptConn plays a server to a tap, from one goroutine: each
// request written releases its scripted reply (and what follows it), cut
// into chunks of random sizes; Read serves one chunk, or part of one, a
// call, and fails with errReviewWouldBlock where a connection would block,
// so that a tap that reads ahead of what it needs fails the test instead
// of hanging it.
type reviewScriptConn struct {
	net.Conn
	r       *mrand.Rand
	replies map[int32][]byte // by the xid of the request that releases it
	chunks  [][]byte
}

var errReviewWouldBlock = errors.New("read would block: nothing was sent")

// Close does nothing: there is nothing to close (see chunkConn.Close).
func (c *reviewScriptConn) Close() error { return nil }

func (c *reviewScriptConn) Write(b []byte) (int, error) {
	var xid int32
	if len(b) >= 8 {
		xid = int32(binary.BigEndian.Uint32(b[4:8]))
	}
	c.release(c.replies[xid])
	delete(c.replies, xid)
	return len(b), nil
}

// release queues b in chunks of random sizes.
func (c *reviewScriptConn) release(b []byte) {
	for len(b) > 0 {
		n := min(len(b), 1+c.r.IntN(9000))
		if c.r.IntN(3) == 0 {
			n = min(len(b), 1+c.r.IntN(8))
		}
		c.chunks, b = append(c.chunks, b[:n]), b[n:]
	}
}

func (c *reviewScriptConn) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, errReviewWouldBlock
	}
	n := copy(b, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// TestReviewHoldAuthRandomFraming drives a held tap as go-zookeeper does
// after a reconnect, with 0 to 3 credentials: the connect response, each
// setAuth and its reply (zxid 0) in turn, then requests written (queued
// while the connection was down) with replies large and small, then
// setWatches, then notifications; every byte cut into chunks of random
// sizes. Each auth reply passes whole and the hold goes on right after it
// (the next Read would wait: given == open); the replies to the requests
// wait for setWatches; go-zookeeper's reads (length, then body into a
// 1.5 MB buffer) get every frame whole, in order, and the tap never reads
// the connection for bytes the server has not sent.
func TestReviewHoldAuthRandomFraming(t *testing.T) {
	t.Parallel()
	for seed := range uint64(400) {
		r := mrand.New(mrand.NewPCG(seed, 11))
		conn := &reviewScriptConn{r: r, replies: map[int32][]byte{}}
		tp := &tap{Conn: conn, w: newWire(nil), hold: make(chan struct{}), holdFor: time.Hour, authed: make(chan struct{}, 1)}
		replyOf := func(xid int32, zxid int64, size int) []byte {
			b := make([]byte, 16+size)
			binary.BigEndian.PutUint32(b, uint32(xid))
			binary.BigEndian.PutUint64(b[4:], uint64(zxid))
			for i := 16; i < len(b); i++ {
				b[i] = byte(r.IntN(256))
			}
			return frameOf(b)
		}
		request := func(xid, op int32) []byte {
			return frameOf(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(xid)), uint32(op)))
		}
		buf := make([]byte, 1536*1024) // go-zookeeper's recvLoop buffer
		readFrame := func(what string) []byte {
			t.Helper()
			if _, err := io.ReadFull(tp, buf[:4]); err != nil {
				t.Fatalf("seed %d: %s: length: %v", seed, what, err)
			}
			n := int(binary.BigEndian.Uint32(buf))
			if _, err := io.ReadFull(tp, buf[4:4+n]); err != nil {
				t.Fatalf("seed %d: %s: body: %v", seed, what, err)
			}
			return slices.Clone(buf[:4+n])
		}

		greeting := make([]byte, 36)
		binary.BigEndian.PutUint32(greeting[4:8], 4000)
		binary.BigEndian.PutUint64(greeting[8:16], 0x77)
		conn.replies[0] = frameOf(greeting) // the connect request: no xid
		if _, err := tp.Write(frameOf(make([]byte, 44))); err != nil {
			t.Fatal(err)
		}
		// authenticate reads into a 256-byte buffer
		if _, err := io.ReadFull(tp, buf[:4]); err != nil {
			t.Fatalf("seed %d: connect response: %v", seed, err)
		}
		if _, err := io.ReadFull(tp, buf[4:4+len(greeting)]); err != nil || !bytes.Equal(buf[4:4+len(greeting)], greeting) {
			t.Fatalf("seed %d: connect response: %v", seed, err)
		}
		xid := int32(0)
		for range r.IntN(4) {
			xid++
			want := replyOf(xid, 0, 0)
			conn.replies[xid] = want
			if tp.given != tp.open {
				t.Fatalf("seed %d: before setAuth %d: given %d, open %d: the hold is not on", seed, xid, tp.given, tp.open)
			}
			if _, err := tp.Write(request(xid, opSetAuth)); err != nil {
				t.Fatal(err)
			}
			if got := readFrame(fmt.Sprintf("auth reply %d", xid)); !bytes.Equal(got, want) {
				t.Fatalf("seed %d: auth reply %d: got %d bytes, want %d", seed, xid, len(got), len(want))
			}
		}
		var want [][]byte
		sizes := []int{0, 1, 60, 4076, 4080, 4092, 8180, 3 * 4096, 100000}
		for range 1 + r.IntN(8) {
			xid++
			var size int
			if r.IntN(2) == 0 {
				size = sizes[r.IntN(len(sizes))]
			} else {
				size = r.IntN(3 * tapReadSize)
			}
			f := replyOf(xid, int64(100+xid), size)
			conn.replies[xid] = f
			want = append(want, f)
			if _, err := tp.Write(request(xid, opGetData)); err != nil {
				t.Fatal(err)
			}
		}
		if tp.given != tp.open || tp.open < 0 {
			t.Fatalf("seed %d: requests written, no setWatches: given %d, open %d: their replies would not wait", seed, tp.given, tp.open)
		}
		xid++
		sw := replyOf(xid, int64(100+xid), 0)
		for range r.IntN(3) { // events for the watches just set again
			sw = append(sw, replyOf(xidNotification, -1, r.IntN(200))...)
		}
		conn.replies[xid] = sw
		want = append(want, sw)
		if _, err := tp.Write(request(xid, opSetWatches)); err != nil {
			t.Fatal(err)
		}
		got := []byte{}
		for wantLen := len(slices.Concat(want...)); len(got) < wantLen; {
			got = append(got, readFrame("after setWatches")...)
		}
		if !bytes.Equal(got, slices.Concat(want...)) {
			t.Fatalf("seed %d: after setWatches, %d bytes differ from the %d sent", seed, len(got), len(slices.Concat(want...)))
		}
		if len(conn.chunks) != 0 {
			t.Fatalf("seed %d: %d chunks never read", seed, len(conn.chunks))
		}
		tp.holdTimer.Stop()
	}
}
