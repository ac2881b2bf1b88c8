package zkconn

import (
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// A wire watches the bytes between one *zk.Conn and the servers, on every
// connection it dials, to learn what go-zookeeper does not export and to
// enforce one rule it does not keep:
//
//   - One *zk.Conn carries one ZooKeeper session. After an expiry,
//     go-zookeeper asks for a new session on the same *zk.Conn and sends the
//     requests still queued for the old one on it. A wire refuses a connect
//     request for a new session once the *zk.Conn has had one, so a request
//     made for one session never runs on another: the Session replaces the
//     whole *zk.Conn instead.
//   - The session timeout the server granted (it clamps what the client asks
//     to its own bounds) is read from the connect response.
//   - heard is a time by which the server had surely heard from the session:
//     the time a request was written whose reply (or any later one) has been
//     read. The server expires a session no sooner than the session timeout
//     after it last heard from it, so until heard + timeout the session is
//     alive (a reply answers the oldest request still unanswered: see
//     request).
//   - A reply lost on a connection that stays up is not waited for as long
//     as the connection lasts, as go-zookeeper would: the next reply comes
//     out of turn, and closes the connection (see scan), which fails the
//     request as a dropped connection does. go-zookeeper pings every third
//     of the session timeout, so that comes within a third of it.
//   - A connection the server has stopped answering is closed. go-zookeeper
//     gives a connection up when it reads nothing for two thirds of the
//     session timeout, but a watch notification is something: under a
//     one-way partition (the server hears nothing from the client, the
//     client still hears notifications) it would stay connected while the
//     server expired the session. So a tap closes its connection once heard
//     is two thirds of the timeout old, but not before a request has waited
//     a third of the timeout for its reply, and go-zookeeper reports the
//     connection down. go-zookeeper writes a ping every third of the
//     timeout, so while the server hears nothing the oldest request waiting
//     was written at most a third after heard (after a connect, a third
//     after the connect response, whose request set heard): the Session is
//     suspended by heard + 2/3 of the timeout (plus the connect's round
//     trip), and gives the session up shortly before heard + timeout, ahead
//     of the earliest moment the server can expire it (see
//     Session.giveUpAtLocked). A connect whose round trip is a third of
//     the timeout or more leaves no margin (as for go-zookeeper's own
//     deadline, which counts from the connect response). A server that
//     answers at once over a link whose round trip is under a third of the
//     timeout is never taken for deaf; a stalled server is given two thirds
//     of the timeout from heard, go-zookeeper's read deadline less about a
//     round trip. A server whose replies lag that far behind the requests
//     (stalled, overloaded, or reading the connection slowly) cannot prove
//     the session alive, as ZooKeeper renews a session only as it takes up
//     its requests: the tap takes it for deaf, although replies arrive.
//     What is read once heard (as the read itself leaves it) is two thirds
//     of the timeout old is not handed on either, nor what was read before
//     and is still kept: the connection is closed instead, whatever the
//     timer has done meanwhile. A process stopped or
//     starved past that moment may find a notification waiting that the
//     server sent before it expired the session, and a ping written at
//     once on waking would put the timer off by a third.
//   - A request can be followed out: awaitWrite's channel closes once a
//     request of the kinds asked for, naming the path (a delete, or a multi
//     with one; a create; an exists), has been written to a connection. ZooKeeper
//     applies one session's requests in the order they come on its
//     connection, so anything written after it comes after the request,
//     without waiting for its reply.
type wire struct {
	dial zk.Dialer

	base    time.Time    // heard is kept as an offset from base, on the monotonic clock
	dialed  atomic.Int32 // connections dialed
	session atomic.Int64 // the session id granted, 0 until one is
	timeout atomic.Int64 // the session timeout granted, in ns; 0 until known
	heard   atomic.Int64 // ns since base; see above
	rtt     atomic.Int64 // recent round trips, in ns: the longest, decaying

	mu      sync.Mutex
	carried carried                    // see carried.go
	writes  map[string][]awaited       // jute-encoded path → awaitWrite's channels
	pending map[string]<-chan struct{} // path → settling of a guaranteed delete under way
	taps    map[*tap]struct{}          // the connections open
	closed  bool                       // close was called: dials fail

	exists map[string]*existsWatches // by path: the exists watches (see existsWatches)

	// requested and servers bound the wait for a connect response (see
	// greetWait); servers 0: no bound.
	requested time.Duration
	servers   int
}

// minGreetWait is the least a first connect is given before a timeout is
// granted: go-zookeeper's own dial timeout.
const minGreetWait = time.Second

// greetWait returns how long a connection is given for its connect
// response before it is closed, so that go-zookeeper tries the next
// server: the session timeout granted divided by the number of servers,
// as ZooKeeper's own client gives each server, but at least twice the
// recent round trips (RoundTrip) up to a third of the timeout (a link the
// session can live on carries a reconnect); before a grant, the timeout
// asked for divided by the number of servers, but at least minGreetWait.
// go-zookeeper alone waits ten times two thirds of the session timeout for
// a server that accepted the connection but does not answer (a paused JVM,
// a partition behind a proxy), and the session expires meanwhile although
// another server answers. go-zookeeper pauses a second before it tries
// again the server it was connected to, so with n servers the session is
// back on that one n-1 such bounds and a second after a drop at the
// latest, as with ZooKeeper's client. A drop comes up to a third of the
// timeout after heard, and the Session gives the session up shortly before
// heard + timeout (Session.giveUpAtLocked): the failover keeps the session
// when (n-1)/n + 1/3 of the timeout, a second and the give-up's margin fit
// in the timeout, for two servers a timeout over 7.5s. Zero: no bound.
func (w *wire) greetWait() time.Duration {
	if w.servers == 0 {
		return 0
	}
	if t := time.Duration(w.timeout.Load()); t > 0 {
		// A link the session lives on (a round trip under a third of the
		// timeout, go-zookeeper's ping interval) must carry a reconnect
		// too: twice its recent round trips, up to that third.
		return max(t/time.Duration(w.servers), min(2*w.RoundTrip(), t/3))
	}
	// None granted yet: the server may grant more than was asked (it
	// clamps a timeout below its minimum up), so a small timeout asked
	// for must not bound a connect that the grant would let through.
	return max(w.requested/time.Duration(w.servers), minGreetWait)
}

// existsWatches is what a wire knows of the exists watches at one path: of
// the callers of Handle.ExistsW, and of the watch go-zookeeper holds there.
// Every exists request that sets a watch goes through a tap, so the wire
// knows of every such watch go-zookeeper holds (armed).
type existsWatches struct {
	callers int  // callers of ExistsW that have not called Unwatch
	out     int  // their requests that may still be written or answered
	armed   bool // go-zookeeper holds a watch: answered since the last event
	// plain: a request not of ExistsW set the watch go-zookeeper holds, for
	// a caller that cannot say it no longer wants it (CreatedW's Watches,
	// which want it until it fires).
	plain bool
	// on is the connection (tap.n) on which a request was last answered
	// that the node is not there: the server holds an exists watch for it
	// there, which stands for any go-zookeeper sets again.
	on int32
	// absent is the connection on which go-zookeeper read the answer of
	// the last such request, if no event at path has come since: it holds
	// an exists watch that the server holds there (0 if none).
	absent int32
}

// gone reports whether nothing is left to know of x.
func (x *existsWatches) gone() bool { return x.callers == 0 && x.out == 0 && !x.armed }

func newWire(dial zk.Dialer) *wire { return &wire{dial: dial, base: time.Now()} }

// RoundTrip returns how long replies have taken lately: the longest recent
// one, forgotten by an eighth with every faster reply.
func (w *wire) RoundTrip() time.Duration { return time.Duration(w.rtt.Load()) }

// errNewSession is what a wire returns to go-zookeeper when it asks for a
// second session on one *zk.Conn.
var errNewSession = errors.New("zkconn: a new session needs a new connection")

// dialer returns the zk.Dialer that taps every connection.
func (w *wire) dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := w.dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		t := &tap{Conn: c, w: w, n: w.dialed.Add(1)}
		if raceEnabled && t.n > 1 {
			t.hold = make(chan struct{})
			t.holdFor = holdFor
			t.authed = make(chan struct{}, 1)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			c.Close()
			return nil, errConnectorClosed
		}
		if w.taps == nil {
			w.taps = make(map[*tap]struct{})
		}
		w.taps[t] = struct{}{}
		return t, nil
	}
}

// close closes every connection w dialed that is still open, which ends
// go-zookeeper's reads and writes on them at once, and fails later dials.
func (w *wire) close() {
	w.mu.Lock()
	w.closed = true
	taps := w.taps
	w.taps = nil
	w.mu.Unlock()
	for t := range taps { // outside w.mu, which a tap takes under its own
		t.shut()
	}
}

// join counts a caller of ExistsW at path (once per caller).
func (w *wire) join(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.existsLocked(path).callers++
}

// sending counts a request of ExistsW at path, about to be sent, until
// sent says it has returned: until then the record stays, so that the tap
// follows the request.
func (w *wire) sending(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.existsLocked(path).out++
}

// sent is the end of a sending: the request was answered (and armed the
// record if it set a watch), or failed, or was never written.
func (w *wire) sent(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.exists[path]; x != nil {
		if x.out--; x.gone() {
			delete(w.exists, path)
		}
	}
}

// watching records an exists request at path that sets a watch, about to
// be written, and returns that watch. It is taken for ExistsW's if one of
// ExistsW's is out there (a plain one written then is taken for ExistsW's
// too, and CreatedW's then made plain by keep).
func (w *wire) watching(path string) watching {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := watching{path: path, plain: true}
	if x := w.exists[path]; x != nil && x.out > 0 {
		ws.plain = false
	}
	return ws
}

// keep marks the exists watch at path plain, for a Watch of CreatedW whose
// request, sent while connection n was current and answered that no node
// was there, set it (go-zookeeper read the answer, arming the record,
// before the request returned), and reports whether the watch is sure to
// be carried on until it fires. It is not if a connection was made since
// n: its setWatches may have left the watch out (keepWanted: a request
// written while one of ExistsW's was out is taken for ExistsW's, and that
// caller may have called Unwatch since, review round 76), and the caller
// must set it again. (absent alone does not tell: another request may
// have set it on the connection since, after the node was made and
// deleted, round 78.) A watch that has fired since (absent cleared) fired
// the Watch too.
func (w *wire) keep(path string, n int32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	x := w.exists[path]
	switch {
	case x == nil || x.absent == 0:
		return true
	case n != w.carried.cur || x.absent != n:
		return false
	}
	x.plain = true
	return true
}

// A watching is an exists request that sets a watch.
type watching struct {
	path   string
	plain  bool // not of ExistsW (see existsWatches.plain)
	noNode bool // answered that no node is there
}

// answered records that ws was answered on connection n, as soon as the
// answer comes (before go-zookeeper reads it: see arm).
func (w *wire) answered(ws watching, n int32) {
	if !ws.noNode {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.exists[ws.path]; x != nil {
		x.on = n
	}
}

// arm records that go-zookeeper holds the watch ws asked for, answered on
// connection n: it is about to read the answer to ws, having handled every
// frame before it (see tap.Read), and before any event that fires it.
func (w *wire) arm(ws watching, n int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x := w.existsLocked(ws.path)
	x.armed = true
	x.plain = x.plain || ws.plain
	if ws.noNode {
		x.on, x.absent = n, n
	}
}

// existsLocked returns the record of path, made if there is none.
func (w *wire) existsLocked(path string) *existsWatches {
	if w.exists == nil {
		w.exists = make(map[string]*existsWatches)
	}
	x := w.exists[path]
	if x == nil {
		x = &existsWatches{}
		w.exists[path] = x
	}
	return x
}

// leave records that a caller of ExistsW at path no longer wants its watch.
func (w *wire) leave(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.exists[path]; x != nil {
		if x.callers--; x.gone() {
			delete(w.exists, path)
		}
	}
}

// fired records an event at path of type typ, as go-zookeeper reads it,
// before it fires its watches: every exists watch there has fired (all but
// a children event fire them), and go-zookeeper forgets it; and see
// firedCarriedLocked.
func (w *wire) fired(path string, typ zk.EventType) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.firedCarriedLocked(path, typ)
	if typ == zk.EventNodeChildrenChanged {
		return
	}
	if x := w.exists[path]; x != nil {
		if x.armed, x.plain, x.absent = false, false, 0; x.gone() {
			delete(w.exists, path)
		}
	}
}

// carriedLocked reports whether a setWatches written on connection n is to
// carry the exists watch at path: go-zookeeper holds it (the record is
// armed), someone wants it (a caller of ExistsW, or one that cannot say),
// and no request answered on n set an exists watch there already. (A
// request answered that the node is there set a data watch, which would
// not tell go-zookeeper's exists watch that the node was made while the
// connection was down, as setWatches does.)
func (w *wire) carriedLocked(path string, n int32) bool {
	x := w.exists[path]
	return x != nil && x.armed && (x.callers > 0 || x.plain) && x.on != n
}

// keepWanted returns the setWatches frame b, written on connection n,
// without the exists watches it is not to carry (carriedLocked), or b
// itself if it has none of them (or is not laid out as go-zookeeper lays it
// out).
//
// go-zookeeper sets every watch whose event it has not seen again on a new
// connection, and has no way to forget one: an exists watch whose signal
// was sent while the connection was down, or before setWatches on the next
// one, would stay set for as long as the session lives. Nor is b always
// what go-zookeeper holds now: it sends its watches in parts, each once
// the one before it is answered, with other requests in between, and a part
// queued as a connection broke goes out on the next one. A watch whose
// event came since would be set again for nobody, and so would one a
// request on n set before b, answered that the node was not there, and
// whose event came before b was applied.
//
// A request on n answered that the node is there leaves it carried (see
// carriedLocked). Should the node be deleted after that request and before
// b is applied, the data watch that request set fires every watch
// go-zookeeper holds there, and the server then sets b's exists watch for
// nobody; it fires once, when the node is made again, or ends with the
// connection.
func (w *wire) keepWanted(b []byte, n int32) []byte {
	ends, ok := swLists(b)
	if !ok {
		return b
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]byte, 0, len(b))
	out = append(out, b[:ends[0]]...)
	out = append(out, 0, 0, 0, 0) // the count of exists watches, set below
	kept := 0
	for off := ends[0] + 4; off < ends[1]; {
		l := int(binary.BigEndian.Uint32(b[off:]))
		if w.carriedLocked(string(b[off+4:off+4+l]), n) {
			out = append(out, b[off:off+4+l]...)
			kept++
		}
		off += 4 + l
	}
	if len(out) == ends[1] {
		return b // none dropped
	}
	binary.BigEndian.PutUint32(out[ends[0]:], uint32(kept))
	out = append(out, b[ends[1]:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// swLists returns the end offsets of the three lists of setWatches frame b
// (data, exists and child watches), and false if b is not laid out as
// go-zookeeper lays it out: length, xid, opcode, relative zxid; then each
// list, a count and then that many strings (a length, then bytes).
func swLists(b []byte) (ends [3]int, ok bool) {
	off := 20
	for i := range ends {
		if off+4 > len(b) {
			return ends, false
		}
		n := int(int32(binary.BigEndian.Uint32(b[off:])))
		off += 4
		for range n {
			if off+4 > len(b) {
				return ends, false
			}
			l := int(int32(binary.BigEndian.Uint32(b[off:])))
			if l < 0 || off+4+l > len(b) {
				return ends, false
			}
			off += 4 + l
		}
		ends[i] = off
	}
	return ends, off == len(b)
}

// zkNoNode is ZooKeeper's error code for a node that does not exist.
const zkNoNode = -101

// The opcodes of the requests awaitWrite follows.
const (
	opCreate = 1
	opDelete = 2
	opExists = 3
	opMulti  = 14
)

// awaited is one awaitWrite: its channel, and the opcodes it waits for.
type awaited struct {
	ch  chan struct{}
	ops []int32
}

// awaitWrite returns a channel that closes once a request of one of ops
// naming path has been written to a connection (see wire), and a func that
// closes it at once if it is still open.
func (w *wire) awaitWrite(path string, ops ...int32) (<-chan struct{}, func()) {
	key := string(binary.BigEndian.AppendUint32(nil, uint32(len(path)))) + path
	a := awaited{ch: make(chan struct{}), ops: ops}
	w.mu.Lock()
	if w.writes == nil {
		w.writes = make(map[string][]awaited)
	}
	w.writes[key] = append(w.writes[key], a)
	w.mu.Unlock()
	return a.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if i := slices.IndexFunc(w.writes[key], func(b awaited) bool { return b.ch == a.ch }); i >= 0 {
			close(a.ch)
			w.writes[key] = slices.Delete(w.writes[key], i, i+1)
			if len(w.writes[key]) == 0 {
				delete(w.writes, key)
			}
		}
	}
}

// awaitDelete is awaitWrite for a request deleting path: a delete, or a
// multi with one. A multi's other paths match too (the delete of a node
// comes with signals on other paths only).
func (w *wire) awaitDelete(path string) (<-chan struct{}, func()) {
	return w.awaitWrite(path, opDelete, opMulti)
}

// wrote closes the awaitWrite channels that frame b, just written, answers:
// its opcode is one they wait for, and it names their path (as jute writes
// it: length, then bytes) anywhere in its body.
//
// A key, a path as jute writes it, found at offset i of b is b[i:i+4+n],
// where n is the length b holds at i: so wrote looks up one candidate per
// offset, at a cost that grows with the frame, not with how many requests
// are awaited (a release of thousands of holds at once awaits thousands).
// Every path awaited is absolute: a candidate whose first byte is not '/'
// is not looked up.
func (w *wire) wrote(b []byte) {
	if len(b) < 12 {
		return
	}
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	if op != opCreate && op != opDelete && op != opExists && op != opMulti {
		return // no awaitWrite follows it: pings, most reads
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 12; i+4 < len(b) && len(w.writes) > 0; i++ {
		n := binary.BigEndian.Uint32(b[i:])
		if n == 0 || uint64(n) > uint64(len(b)-i-4) || b[i+4] != '/' {
			continue
		}
		key := b[i : i+4+int(n)]
		as, ok := w.writes[string(key)]
		if !ok {
			continue
		}
		as = slices.DeleteFunc(as, func(a awaited) bool {
			if slices.Contains(a.ops, op) {
				close(a.ch)
				return true
			}
			return false
		})
		if len(as) == 0 {
			delete(w.writes, string(key))
		} else {
			w.writes[string(key)] = as
		}
	}
}

// Timeout returns the session timeout granted, or 0 if none is known yet.
func (w *wire) Timeout() time.Duration { return time.Duration(w.timeout.Load()) }

// aliveUntil returns the time until which the server cannot have expired the
// session, or the zero time if it is not known.
func (w *wire) aliveUntil() time.Time {
	h, t := w.heard.Load(), w.timeout.Load()
	if h == 0 || t == 0 {
		return time.Time{}
	}
	return w.base.Add(time.Duration(h + t))
}

// tap is one connection of a wire. go-zookeeper writes each frame (a 4-byte
// length, then the body) in one Write, from one goroutine at a time, and
// reads from one goroutine.
//
// go-zookeeper reads a frame's length and then its body, two reads; a tap
// reads what the connection has, up to tapReadSize bytes at once, and
// serves the next reads from it, so a frame usually costs one read call of
// the system, not two.
type tap struct {
	net.Conn
	w *wire

	mu      sync.Mutex
	pending []request // the requests written, not yet answered, oldest first
	wrote   bool      // the connect request has gone out
	// deaf runs deafCheck from the connect response of a session on
	// (see watchDeaf); closed stops it.
	deaf   *time.Timer
	closed bool
	// greet closes the connection if its connect response has not come
	// within greetWait (see there); nil once it has.
	greet *time.Timer

	// Only the reading goroutine touches these. Offsets count the bytes
	// the server sent on the connection.
	rbuf     []byte // a partial frame read
	rbase    int64  // the offset of rbuf[0]
	greetEnd int64  // the offset just past the connect response; 0 until it is read
	in       []byte // read from the connection, not yet returned by Read
	inBuf    []byte // in's storage, tapReadSize bytes (more if a hold needs them)
	given    int64  // the offset of in[0]: how many bytes Read has returned

	// hold, under the race detector only, keeps go-zookeeper from reading
	// replies on a connection after the first until it has sent the watches
	// it holds again (a setWatches request), or for holdFor if it holds
	// none (longer, bounded, if it holds some: see holdExpired).
	// go-zookeeper v1.0.4 reads Conn.lastZxid for that request while its
	// receiving goroutine may write it for a reply (go-zookeeper/zk#35): a
	// data race of the dependency, harmless, which would fail every test
	// that reconnects with a watch set. The hold orders the read before
	// every such write: a reply is given to go-zookeeper only once the
	// setWatches request, which goes out after the read, has been written.
	// That request is relative to the last zxid the connect request gave
	// (connZxid), as no reply was read in between; a setWatches queued on
	// the connection before, which goes out first, is relative to an
	// earlier one and does not end the hold, unless no reply was read on
	// that connection either: then it ends the hold early, a gap left open
	// (it needs that connection to drop with its setWatches unwritten, and
	// go-zookeeper's goroutine kept from running meanwhile).
	//
	// A session with credentials sends them first (setAuth) and sends
	// nothing more, setWatches included, until their replies are read: the
	// reply to a setAuth written passes if it is the next frame (ZooKeeper
	// answers it with zxid 0, so go-zookeeper writes no lastZxid for it),
	// and the hold goes on after it. Without the race detector nothing is
	// held.
	//
	// Invariant, while hold is open: Read gives go-zookeeper no byte at or
	// past open. open is the end of the connect response, then of the last
	// reply to a setAuth, and -1 once the hold has ended; the hold's timer
	// starts at each end (holdFrom).
	hold      chan struct{}
	holdOnce  sync.Once
	connZxid  int64         // under mu: the connect request's last zxid
	holdFor   time.Duration // the timer's length: holdFor, but in tests
	holdTimer *time.Timer   // under mu
	holdFrom  time.Time     // under mu: when the timer last started
	open      int64         // reading goroutine only
	authed    chan struct{} // a setAuth was written; holds one signal

	n int32 // the connection's number: the wire's first is 1
	// exists maps the xids of the exists requests written that set a
	// watch, not yet answered, to their watches; reads maps those of the
	// reads that set a data or child watch if answered without error, and
	// sets those of the setWatches requests, to the data and child
	// watches each carries. Under mu.
	exists map[int32]watching
	reads  map[int32]watchKey
	sets   map[int32][]watchKey
	// arms are the records to make once go-zookeeper reads the reply at
	// each offset, in order (see Read). Reading goroutine only.
	arms []pendingArm
}

// holdFor bounds tap.hold, from the end of the connect response and of
// each reply to a setAuth, while go-zookeeper holds no watch: it sends its
// watches again at once after them, if it has any. holdMax bounds it, from
// the same points, while it holds one, and so does the session timeout
// (see holdExpired).
const (
	holdFor = 100 * time.Millisecond
	holdMax = time.Second
)

// unhold ends the hold.
func (t *tap) unhold() {
	t.holdOnce.Do(func() { close(t.hold) })
}

// holdExpired runs when the hold's timer fires. It ends the hold, unless
// go-zookeeper holds a watch (see wire.holdsWatches): then the setWatches
// request that carries it is sure to come, and its Write ends the hold,
// however long go-zookeeper's goroutine was kept from running before it
// read its last zxid for it (a loaded machine kept it past holdFor). The
// timer then runs again, until holdMax after holdFrom and a third of the
// session timeout after heard at the latest: nothing is read during a
// hold, so heard stays, and a connection whose server was not heard from
// for two thirds of the timeout is closed (see deafIn). A closed
// connection ends the hold.
func (t *tap) holdExpired() {
	select {
	case <-t.hold:
		return // ended by setWatches
	default:
	}
	t.mu.Lock()
	left := min(holdMax-time.Since(t.holdFrom), time.Until(t.w.base.Add(time.Duration(t.w.heard.Load()+t.w.timeout.Load()/3))))
	wait := !t.closed && left > 0 && t.w.holdsWatches()
	if wait {
		t.holdTimer.Reset(min(t.holdFor, left))
	}
	t.mu.Unlock()
	if !wait {
		t.unhold()
	}
}

func (t *tap) Write(b []byte) (int, error) {
	now := int64(time.Since(t.w.base))
	t.mu.Lock()
	first := !t.wrote
	t.wrote = true
	if first && len(b) >= 28 {
		// connect request: length, protocol version, last zxid, timeout, session id
		t.connZxid = int64(binary.BigEndian.Uint64(b[8:16]))
		if id := int64(binary.BigEndian.Uint64(b[20:28])); id == 0 && t.w.session.Load() != 0 {
			t.mu.Unlock()
			t.Close()
			return 0, errNewSession
		}
		t.w.connected(t.n, t.connZxid)
		if d := t.w.greetWait(); d > 0 && !t.closed {
			t.greet = time.AfterFunc(d, func() { t.greetCheck(d) })
		}
	}
	// The request's xid and opcode; the connect request has none (its
	// bytes 8-12 are the epoch of the last zxid seen).
	var xid, op int32
	if !first && len(b) >= 12 {
		xid, op = int32(binary.BigEndian.Uint32(b[4:8])), int32(binary.BigEndian.Uint32(b[8:12]))
	}
	// each Write is one request, known before its reply can be read
	t.pending = append(t.pending, request{xid: xid, at: now, auth: op == opSetAuth})
	if k, ok := watchKeyOf(op, b[min(12, len(b)):]); ok {
		if t.reads == nil {
			t.reads = make(map[int32]watchKey)
		}
		t.reads[xid] = k
		if op == opExists {
			if t.exists == nil {
				t.exists = make(map[int32]watching)
			}
			t.exists[xid] = t.w.watching(k.path)
		}
	}
	// A setWatches relative to another zxid than the connect request's
	// (it follows the opcode) was made for the connection before (see
	// hold).
	ownSW := op == opSetWatches && !(len(b) >= 20 && int64(binary.BigEndian.Uint64(b[12:20])) != t.connZxid)
	t.mu.Unlock()
	frame := b
	if op == opSetWatches {
		var keys []watchKey
		frame, keys = t.w.setWatches(b, t.n)
		t.mu.Lock()
		if t.sets == nil {
			t.sets = make(map[int32][]watchKey)
		}
		t.sets[xid] = keys
		t.mu.Unlock()
	}
	n, err := t.Conn.Write(frame)
	if err == nil {
		n = len(b) // all of what go-zookeeper gave
	}
	if err == nil && !first {
		t.w.wrote(b)
	}
	if err == nil && t.hold != nil {
		switch {
		case ownSW:
			t.unhold()
		case op == opSetAuth:
			// go-zookeeper waits for the reply to a credential it
			// sends again before it sends anything more, so the signal
			// is not pending then. (One of AddAuth's, sent behind
			// other requests, may find it pending: its reply then
			// waits with theirs for setWatches or the timer.)
			select {
			case t.authed <- struct{}{}:
			default:
			}
		}
	}
	return n, err
}

// Close closes the connection, which the wire then forgets.
func (t *tap) Close() error {
	t.w.mu.Lock()
	delete(t.w.taps, t)
	t.w.mu.Unlock()
	return t.shut()
}

// shut stops deaf and closes the connection.
func (t *tap) shut() error {
	t.mu.Lock()
	t.closed = true
	if t.deaf != nil {
		t.deaf.Stop()
	}
	if t.greet != nil {
		t.greet.Stop()
	}
	t.mu.Unlock()
	return t.Conn.Close()
}

// greetCheck closes the connection if its connect response has not come
// within d (see wire.greetWait): go-zookeeper then tries the next server.
func (t *tap) greetCheck(d time.Duration) {
	t.mu.Lock()
	waiting := t.greet != nil && !t.closed
	t.mu.Unlock()
	if waiting {
		if r, ok := t.Conn.(*firstRead); ok {
			r.unanswered(d)
		}
		t.shut()
	}
}

// watchDeaf starts deaf, once the connect response of a session is read
// and heard is the time its request was written. The caller holds t.mu.
func (t *tap) watchDeaf() {
	if !t.closed {
		t.deaf = time.AfterFunc(t.deafIn(), t.deafCheck)
	}
}

// deafIn returns how long until the connection counts as deaf (see wire):
// two thirds of the session timeout after heard, but not before a third
// after the oldest request waiting for its reply was written (the first
// ping after a connect goes out a third after the connect response). It is
// zero or less once it does. The caller holds t.mu.
func (t *tap) deafIn() time.Duration {
	third := t.w.timeout.Load() / 3
	at := t.w.heard.Load() + 2*third
	if len(t.pending) > 0 {
		at = max(at, t.pending[0].at+third)
	}
	return time.Duration(at - int64(time.Since(t.w.base)))
}

// deafNow closes the connection, and reports so, if heard is two thirds of
// the timeout old once what was read is scanned (a reply in it may have
// made heard recent): then nothing read is handed on any more (see wire),
// what was read long ago and kept included.
// It does not wait for a request written since, as deafIn does: that
// request was written after a stall, and what came before its reply (a
// notification) proves nothing of the session.
//
// A connection closed meanwhile (the deaf timer may have run between the
// read and now) is judged on heard alone, like any other: a reply in what
// was read may prove the server heard from the session after the timer
// ran, and then what is handed on is fresh; go-zookeeper's next read fails.
//
// It leaves the connect response alone (go-zookeeper has not had it yet):
// go-zookeeper must learn the session it names, or every later
// connect of the *zk.Conn would be refused (see errNewSession); nothing
// after it on a new connection answers a watch, and the deaf timer, due
// at once, closes the connection after it.
func (t *tap) deafNow() bool {
	t.mu.Lock()
	third := t.w.timeout.Load() / 3
	deaf := t.deaf != nil && t.given >= t.greetEnd && t.w.heard.Load()+2*third <= int64(time.Since(t.w.base))
	closed := t.closed
	t.mu.Unlock()
	if deaf && !closed {
		t.shut()
	}
	return deaf
}

// deafCheck closes the connection once it counts as deaf (see wire), and
// until then waits for that moment. It must not block, nor call the user's
// code (a logger) before the close: closing the connection does not block
// (see firstRead.Close), and go-zookeeper then reports the disconnect.
func (t *tap) deafCheck() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	if d := t.deafIn(); d > 0 {
		t.deaf.Reset(d)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.shut()
}

// The opcodes of the requests that set a session's watches, and its
// credentials, again after a reconnect.
const (
	opSetAuth    = 100
	opSetWatches = 101
)

// A pendingArm is a record to make once go-zookeeper reads the frame that
// ends at offset end, the reply to a request that set watches: arm,
// watched or reset.
type pendingArm struct {
	end  int64
	make func()
}

func (t *tap) Read(b []byte) (int, error) {
	if t.hold != nil {
		if err := t.awaitOpen(); err != nil {
			return 0, err
		}
	}
	if len(t.in) == 0 {
		if len(b) >= tapReadSize { // a large frame's body: straight into b
			n, err := t.Conn.Read(b)
			t.scan(b[:n])
			if t.deafNow() {
				return 0, net.ErrClosed
			}
			t.makeArms(t.given + int64(n))
			t.given += int64(n)
			return n, err
		}
		if err := t.fill(); err != nil {
			return 0, err
		}
	}
	// What was read, just now or before a stall (a read brings several
	// frames, and go-zookeeper takes them one by one), goes on only while
	// heard is recent.
	if t.deafNow() {
		return 0, net.ErrClosed
	}
	n := len(t.in)
	if t.given < t.open {
		n = int(min(int64(n), t.open-t.given)) // the hold goes on right after
	}
	n = copy(b, t.in[:n])
	t.makeArms(t.given + int64(n))
	t.in = t.in[n:]
	t.given += int64(n)
	return n, nil
}

// makeArms makes the records of the replies that end at or before upTo,
// as Read hands on the bytes up to there (deafNow has let them through:
// a reply's last byte is never refused once its record is made).
// go-zookeeper reads a frame only once it has handled those before it
// (events included: it calls the Session's callback as it reads them),
// and handles a reply only once it has read all of it, so a record made
// now comes after the events before its reply, and before the reply
// itself and what follows it.
func (t *tap) makeArms(upTo int64) {
	for len(t.arms) > 0 && t.arms[0].end <= upTo {
		t.arms[0].make()
		t.arms = t.arms[1:]
	}
}

// awaitOpen returns once Read may give the byte at t.given under the hold
// (see tap.hold), or with the error of a read of the connection.
func (t *tap) awaitOpen() error {
	for t.greetEnd > 0 && t.open >= 0 && t.given >= t.open {
		select {
		case <-t.hold:
			t.open = -1
		case <-t.authed:
			// Read on until a whole frame past t.given is in: if it is
			// the reply to the setAuth, frame moves open past it.
			for t.rbase <= t.given {
				if err := t.fill(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// fill reads what the connection has onto the end of t.in. An error that
// comes with bytes is dropped, as io.ReadFull drops one that comes with the
// last bytes it needs: one that lasts (the end of the connection, a TLS
// alert) comes again with the next read, and a timeout belongs to its own
// read.
func (t *tap) fill() error {
	if t.inBuf == nil {
		t.inBuf = make([]byte, tapReadSize)
	}
	k := copy(t.inBuf, t.in)
	if k == len(t.inBuf) {
		t.inBuf = append(t.inBuf, make([]byte, tapReadSize)...)
	}
	n, err := t.Conn.Read(t.inBuf[k:])
	t.scan(t.inBuf[k : k+n])
	t.in = t.inBuf[:k+n]
	if n == 0 {
		return err
	}
	return nil
}

// tapReadSize is how many bytes a tap asks the connection for at once: a
// few replies of a lock's requests.
const tapReadSize = 4096

// scan takes bytes just read from the connection. A reply that answers no
// request in the order ZooKeeper answers them (see request) closes the
// connection: the reply to an earlier request was lost, and go-zookeeper,
// which matches replies by xid, would wait for it as long as the connection
// lasts. Closing it fails that request with zk.ErrConnectionClosed, as if
// the connection had dropped before its reply.
func (t *tap) scan(b []byte) {
	if len(b) == 0 {
		return
	}
	t.rbuf = append(t.rbuf, b...)
	inOrder := true
	t.mu.Lock()
	for len(t.rbuf) >= 4 {
		end := 4 + int(binary.BigEndian.Uint32(t.rbuf))
		if len(t.rbuf) < end {
			break
		}
		inOrder = t.frame(t.rbuf[4:end], t.rbase+int64(end)) && inOrder
		t.rbase += int64(end)
		t.rbuf = append(t.rbuf[:0], t.rbuf[end:]...)
	}
	t.mu.Unlock()
	if !inOrder {
		t.shut()
	}
}

// xidNotification marks a watch event, which answers no request.
const xidNotification = -1

// frame takes one frame the server sent, which ends at offset end, and
// reports whether it answers a request in the order ZooKeeper answers them.
// The caller holds t.mu.
func (t *tap) frame(f []byte, end int64) bool {
	var xid int32 // the connect request's, for the connect response
	if t.greetEnd == 0 {
		t.greetEnd = end
		if t.greet != nil {
			t.greet.Stop()
			t.greet = nil
		}
		if t.hold != nil {
			t.open = end
			t.holdFrom = time.Now()
			t.holdTimer = time.AfterFunc(t.holdFor, t.holdExpired)
		}
		// connect response: protocol version, timeout (ms), session id
		if len(f) < 16 {
			return true
		}
		id := int64(binary.BigEndian.Uint64(f[8:16]))
		if id == 0 {
			return true // expired: no session
		}
		t.w.session.CompareAndSwap(0, id)
		t.w.timeout.Store(int64(time.Duration(int32(binary.BigEndian.Uint32(f[4:8]))) * time.Millisecond))
		defer t.watchDeaf() // once heard is the connect request's
	} else if len(f) < 4 {
		return true
	} else if xid = int32(binary.BigEndian.Uint32(f[:4])); xid == xidNotification {
		return true
	} else if len(f) >= 16 {
		t.watchesSet(xid, int32(binary.BigEndian.Uint32(f[12:16])), end)
	}
	i := t.answers(xid)
	if i < 0 {
		return false
	}
	r := t.pending[i]
	t.pending = slices.Delete(t.pending, i, i+1)
	rtt := int64(time.Since(t.w.base)) - r.at
	if old := t.w.rtt.Load(); rtt < old {
		rtt = old - (old-rtt)/8
	}
	t.w.rtt.Store(rtt) // one reader goroutine: no lost update
	if r.auth {
		// The hold lets it through, and goes on after it, if it comes
		// right after what the hold let through: replies to requests
		// written before it (AddAuth goes out after them) stay held.
		if t.hold != nil && t.open >= 0 && end-int64(4+len(f)) == t.open {
			t.open = end
			t.holdFrom = time.Now()
			t.holdTimer.Reset(t.holdFor)
		}
		return true // answered out of turn: it proves nothing of heard
	}
	for {
		h := t.w.heard.Load()
		if r.at <= h || t.w.heard.CompareAndSwap(h, r.at) {
			return true
		}
	}
}

// watchesSet takes the reply to request xid (its header: xid, zxid, error
// code), which ends at offset end, and records the watches it sets once
// go-zookeeper reads it. The caller holds t.mu.
func (t *tap) watchesSet(xid, code int32, end int64) {
	// go-zookeeper keeps a watch for an exists answered without error or
	// with NoNode, and for the other reads answered without error.
	if ws, ok := t.exists[xid]; ok {
		delete(t.exists, xid)
		if code == 0 || code == zkNoNode {
			ws.noNode = code == zkNoNode
			t.w.answered(ws, t.n)
			t.arms = append(t.arms, pendingArm{end, func() { t.w.arm(ws, t.n) }})
		}
	}
	if k, ok := t.reads[xid]; ok {
		delete(t.reads, xid)
		if code == 0 {
			t.arms = append(t.arms, pendingArm{end, func() { t.w.watched(k, t.n) }})
		}
	}
	if keys, ok := t.sets[xid]; ok {
		delete(t.sets, xid)
		if code == 0 {
			t.arms = append(t.arms, pendingArm{end, func() { t.w.reset(keys, t.n) }})
		}
	}
}

// A request is one written on a tap's connection, not yet answered.
// ZooKeeper answers a session's requests in the order it reads them (pings
// too, and a connect request first), except a setAuth, which it answers as
// soon as it reads it, before anything it reads after: a reply answers the
// oldest request still unanswered, or the oldest setAuth.
type request struct {
	xid  int32 // 0 for the connect request
	at   int64 // when it was written, in ns since wire.base
	auth bool  // a setAuth
}

// answers returns the index in t.pending of the request that a reply with
// xid answers, or -1 if it answers none in turn. The caller holds t.mu.
func (t *tap) answers(xid int32) int {
	if len(t.pending) > 0 && t.pending[0].xid == xid {
		return 0
	}
	if i := slices.IndexFunc(t.pending, func(r request) bool { return r.auth }); i >= 0 && t.pending[i].xid == xid {
		return i
	}
	return -1
}
