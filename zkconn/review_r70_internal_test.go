package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// r70Conn is a connection whose writes go through the hook of its
// r70Dialer first: the hook may wait, and answers what to do with the
// frame. A goroutine reads the server's bytes as they come (log), so a
// test sees a reply arrive before go-zookeeper (behind the tap) reads it.
type r70Conn struct {
	net.Conn
	n int
	d *r70Dialer

	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte // not yet read
	log    []byte // all the server sent
	given  int    // of log, read
	err    error
	paused bool // Read gives nothing past upTo: the rest stays in buf
	upTo   int  // an offset in log
}

// What a hook does with a frame.
const (
	r70Pass    = iota
	r70Fail    // close the connection; the write fails
	r70Swallow // the write succeeds, and the frame never reaches the server
)

type r70Dialer struct {
	mu    sync.Mutex
	conns []*r70Conn
	hook  func(n int, b []byte) int
}

func (d *r70Dialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, shared.Addr(), timeout) // every address listed is the shared server
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rc := &r70Conn{Conn: c, n: len(d.conns) + 1, d: d}
	rc.cond = sync.NewCond(&rc.mu)
	go func() {
		b := make([]byte, 64<<10)
		for {
			n, err := c.Read(b)
			rc.mu.Lock()
			rc.buf = append(rc.buf, b[:n]...)
			rc.log = append(rc.log, b[:n]...)
			if err != nil {
				rc.err = err
			}
			rc.cond.Broadcast()
			rc.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	d.conns = append(d.conns, rc)
	return rc, nil
}

func (d *r70Dialer) conn(n int) *r70Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[n-1]
}

// dropLast closes the connection dialed last.
func (d *r70Dialer) dropLast() {
	d.mu.Lock()
	last := d.conns[len(d.conns)-1]
	d.mu.Unlock()
	last.Conn.Close()
}

func (d *r70Dialer) setHook(f func(n int, b []byte) int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hook = f
}

func (c *r70Conn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	f := c.d.hook
	c.d.mu.Unlock()
	if f != nil {
		switch f(c.n, b) {
		case r70Fail:
			c.Conn.Close()
			return 0, net.ErrClosed
		case r70Swallow:
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

func (c *r70Conn) SetDeadline(time.Time) error     { return nil }
func (c *r70Conn) SetReadDeadline(time.Time) error { return nil }

func (c *r70Conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	avail := func() int {
		if c.paused {
			return max(0, min(len(c.buf), c.upTo-c.given))
		}
		return len(c.buf)
	}
	for c.err == nil && avail() == 0 {
		c.cond.Wait()
	}
	if avail() == 0 {
		return 0, c.err
	}
	n := copy(b, c.buf[:avail()])
	c.buf = c.buf[n:]
	c.given += n
	c.cond.Broadcast() // see giveUpTo
	return n, nil
}

// pause makes Read wait (go-zookeeper reads nothing more) if p, until it
// is called again without.
func (c *r70Conn) pause(p bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused, c.upTo = p, c.given
	c.cond.Broadcast()
}

// passThrough waits for the server's reply to the request of xid, and
// lets Read, paused, give everything up to its end.
func (c *r70Conn) passThrough(t *testing.T, xid int32) {
	t.Helper()
	_, end := c.awaitReply(t, xid)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upTo = end
	c.cond.Broadcast()
}

// giveUpTo lets Read, paused, give everything up to offset off of log, and
// returns once it has (the tap has it; go-zookeeper may not have read it).
func (c *r70Conn) giveUpTo(t *testing.T, off int) {
	t.Helper()
	late := false
	stop := time.AfterFunc(30*time.Second, func() {
		c.mu.Lock()
		late = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upTo = off
	c.cond.Broadcast()
	for c.given < off && c.err == nil && !late {
		c.cond.Wait()
	}
	if c.given < off {
		t.Fatalf("Read gave %d bytes of %d: %v", c.given, off, c.err)
	}
}

// awaitReply returns once the server's reply to the request of xid has
// come on c (go-zookeeper may not have read it), with the offsets in log
// of its start and end.
func (c *r70Conn) awaitReply(t *testing.T, xid int32) (start, end int) {
	t.Helper()
	stop := time.AfterFunc(30*time.Second, func() {
		c.mu.Lock()
		c.err = context.DeadlineExceeded
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for off := 0; off+8 <= len(c.log); {
			end := off + 4 + int(binary.BigEndian.Uint32(c.log[off:]))
			if end > len(c.log) {
				break
			}
			if int32(binary.BigEndian.Uint32(c.log[off+4:])) == xid {
				return off, end
			}
			off = end
		}
		if c.err != nil {
			t.Fatalf("no reply to xid %d: %v", xid, c.err)
		}
		c.cond.Wait()
	}
}

// r70Session returns a Session dialed through a new r70Dialer and a
// Handle on it, another session's connection, and a test root made by it,
// with node (root + "/n") in it. Two addresses of the shared server are
// listed (an ensemble's way), so that go-zookeeper keeps its queue across
// a reconnect: with one it fails what is queued (ErrNoServer).
func r70Session(t *testing.T) (d *r70Dialer, h Handle, other *zk.Conn, root, node string) {
	t.Helper()
	d = &r70Dialer{}
	_, port, _ := net.SplitHostPort(shared.Addr())
	h = current(t, dial(t, []string{shared.Addr(), net.JoinHostPort("127.0.0.2", port)}, WithDialer(d.dial)))
	other = current(t, dial(t, []string{shared.Addr()})).Conn()
	root = testRoot(t)
	plainRoot(t, other, root, nil)
	node = root + "/n"
	if _, err := other.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return d, h, other, root, node
}

// watchMany makes n nodes under root with names of about size bytes, and
// sets a Watch on each with h (stopped when the test ends): enough
// watches, with size, for go-zookeeper to send them again in several
// setWatches parts of 128 KB.
func watchMany(t *testing.T, ctx context.Context, h Handle, other *zk.Conn, root string, n, size int) ([]string, []*Watch) {
	t.Helper()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/%03d-%s", root, i, strings.Repeat("f", size))
	}
	for batch := range slices.Chunk(paths, 50) {
		var ops []any
		for _, p := range batch {
			ops = append(ops, &zk.CreateRequest{Path: p, Acl: zk.WorldACL(zk.PermAll)})
		}
		if _, err := other.Multi(ops...); err != nil {
			t.Fatal(err)
		}
	}
	watches := make([]*Watch, n)
	t.Cleanup(func() {
		for _, w := range watches {
			w.Stop()
		}
	})
	for i, p := range paths {
		_, _, w, err := h.GetW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		watches[i] = w
	}
	return paths, watches
}

// A getW is the result of a GetW made by goGetW.
type getW struct {
	st  *zk.Stat
	w   *Watch
	err error
}

// goGetW calls h.GetW(ctx, path) on a goroutine of its own and returns
// the channel of its result.
func goGetW(ctx context.Context, h Handle, path string) <-chan getW {
	res := make(chan getW, 1)
	go func() {
		_, st, w, err := h.GetW(ctx, path)
		res <- getW{st, w, err}
	}()
	return res
}

// settled returns once the watches h's session carries have been set again
// on its connection (go-zookeeper has read the reply to every setWatches
// part) and every event before has been read: a request through h on
// either side of that.
func settled(t *testing.T, ctx context.Context, h Handle, path string) {
	t.Helper()
	flush := func() {
		if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(path); return err }); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	awaitSetWatchesSent(t)
	flush()
}

// r70Op returns the opcode of request frame b, or 0.
func r70Op(b []byte) int32 {
	if len(b) < 12 {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b[8:12]))
}

// r70Names reports whether request frame b is of opcode op and names path.
func r70Names(b []byte, op int32, path string) bool {
	return r70Op(b) == op && bytes.Contains(b[12:], juteString(path))
}

// awaitQueued returns once a goroutine waits in go-zookeeper's request for
// the reply to a call of one of fns (its request is in the send queue).
func awaitQueued(t *testing.T, fns ...string) { awaitQueuedVia(t, "", fns...) }

// awaitQueuedVia is awaitQueued for a goroutine whose stack also names
// via: the caller to wait for where another goroutine waits in a call of
// the same fn.
func awaitQueuedVia(t *testing.T, via string, fns ...string) {
	t.Helper()
	awaitGoroutines(t, fns[0]+" queued", func(gs [][]byte) bool {
		return slices.ContainsFunc(gs, func(g []byte) bool {
			return slices.ContainsFunc(fns, func(fn string) bool { return bytes.Contains(g, []byte("zk.(*Conn)."+fn+"(")) }) &&
				bytes.Contains(g, []byte(via)) &&
				bytes.Contains(g, []byte("zk.(*Conn).request(")) &&
				!bytes.Contains(g, []byte("zk.(*Conn).queueRequest("))
		})
	})
}

// TestReviewR70PlainReadBeforeLostSetWatches: a GetW on a new connection,
// ahead of that connection's setWatches, while go-zookeeper holds a watch
// at the path from the connection before. The node is written after the
// read; a later request of the session is answered after the write (its
// reply moves go-zookeeper's last zxid past it); the connection drops
// before the setWatches reaches the server. The next connection's
// setWatches is relative to that later zxid: the server sets the watch
// again without an event. The GetW must set a watch of its own with its
// read, whose event comes before the later reply: a GetW that read without
// one, counting on the watch go-zookeeper held (review round 70), never
// learned of the write, and neither did the Watch set before. Two
// addresses are listed (an ensemble's way): with one, go-zookeeper fails
// what is queued at a reconnect. The setWatches is taken as written and
// never reaches the server: a connection cut with it in the socket.
func TestReviewR70PlainReadBeforeLostSetWatches(t *testing.T) { r70LostSetWatches(t, true) }

// TestReviewR70CarriedWatchLostSetWatches is the course of events of
// TestReviewR70PlainReadBeforeLostSetWatches without the GetW on
// connection 2: the watch go-zookeeper carries from connection 1 must fire
// for the write made while connection 2 was up without it (the floor: see
// carried.go). Before the floor, connection 3's setWatches was relative to
// X's zxid, past the write, and the server set the watch again with no
// event (review round 70).
func TestReviewR70CarriedWatchLostSetWatches(t *testing.T) { r70LostSetWatches(t, false) }

// r70LostSetWatches runs the course of events of the two tests above, with
// the GetW on connection 2 if read.
func r70LostSetWatches(t *testing.T, read bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, node := r70Session(t)
	_, st0, w0, err := h.GetW(ctx, node) // sets go-zookeeper's watch (connection 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Stop()
	awaitServerWatch(t, node, h.ID())

	// Connection 1's sending goroutine waits in the write of H, so that
	// the GetW's request and X queue behind it, ahead of the next
	// connection's setWatches.
	hPath := root + "/h"
	heldH, releaseH := make(chan struct{}), make(chan struct{})
	heldX, releaseX := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	var getXid atomic.Int32
	t.Cleanup(func() { // a test that fails midway leaves no write waiting
		d.setHook(nil)
		select {
		case <-releaseH:
		default:
			close(releaseH)
		}
		select {
		case <-releaseX:
		default:
			close(releaseX)
		}
	})
	d.setHook(func(n int, b []byte) int {
		switch {
		case n == 1 && r70Names(b, opExists, hPath):
			once1.Do(func() { close(heldH) })
			<-releaseH
			return r70Fail // connection 1 drops with H
		case n == 2 && r70Names(b, opGetData, node):
			getXid.Store(int32(binary.BigEndian.Uint32(b[4:8])))
		case n == 2 && r70Names(b, opGetChildren2, root):
			once2.Do(func() { close(heldX) })
			<-releaseX
		case n == 2 && r70Op(b) == opSetWatches:
			return r70Swallow // lost with connection 2
		}
		return r70Pass
	})
	hDone := make(chan struct{})
	go func() {
		defer close(hDone)
		h.Conn().Exists(hPath) // fails with the connection
	}()
	<-heldH
	var res <-chan getW
	if read {
		res = goGetW(ctx, h, node)
		awaitQueued(t, "Get", "GetW") // a plain read while go-zookeeper holds a watch there
	} else {
		w0read := make(chan getW, 1)
		w0read <- getW{st: st0}
		res = w0read
	}
	xDone := make(chan error, 1)
	go func() {
		_, _, err := h.Conn().Children(root)
		xDone <- err
	}()
	awaitQueued(t, "Children")
	close(releaseH)
	<-hDone

	// Connection 2: the GetW's read is answered; the node is written;
	// then X is answered, after the write.
	<-heldX
	if read {
		d.conn(2).awaitReply(t, getXid.Load()) // the server read the node
	}
	st, err := other.Set(node, []byte("written"), -1)
	if err != nil {
		t.Fatal(err)
	}
	close(releaseX)
	if err := <-xDone; err != nil {
		t.Fatalf("X = %v", err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("GetW = %v", r.err)
	}
	// Each Watch and the version its read returned. Since round 73 the
	// GetW reads again, with a watch, when its read went out on another
	// connection than the one that held the watch it shared: then it
	// returns the written version, and its Watch owes no event.
	type read1 struct {
		w       *Watch
		version int32
	}
	watches := map[string]read1{"the Watch set before": {w0, st0.Version}}
	if read {
		defer r.w.Stop()
		watches["the Watch read on connection 2"] = read1{r.w, r.st.Version}
	}
	d.conn(2).Conn.Close() // before the setWatches reached the server

	// Connection 3: its setWatches (if go-zookeeper holds a watch) has
	// been answered, and any event before the last reply read.
	d.setHook(nil)
	settled(t, ctx, h, root)
	for name, r := range watches {
		select {
		case ev := <-r.w.C():
			t.Logf("%s fired: %v", name, ev)
		default:
			if r.version < st.Version {
				t.Errorf("%s never fired, though the node was written (version %d -> %d) after its read; the server watches it again with no event to come",
					name, r.version, st.Version)
			}
		}
	}
}
