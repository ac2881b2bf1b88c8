package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxyDialTimeout bounds the proxy's connection to its target.
const proxyDialTimeout = 5 * time.Second

// A Proxy is a TCP proxy on 127.0.0.1 that forwards every connection to one
// target address, and can break them the ways networks do: Cut closes them,
// BlackHole partitions them (BlackHoleAfterPing right after a ping reply),
// DropReplies loses what comes back, Deafen what goes out, SetDelay makes
// them slow, and Strike breaks one connection at the exact request a test
// chooses (or, with Hold, keeps that request to deliver it late). Point a
// client at Addr instead of at the server to test how it copes. Its methods
// may be called from several goroutines. The zero value is not usable.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close; ends dials
	cancel context.CancelFunc

	mu        sync.Mutex
	conns     map[*proxyConn]struct{} // held connections
	changed   chan struct{}           // closed, and replaced, when conns changes
	filter    filter                  // for new connections
	faults    []*Fault                // armed, oldest first
	afterPing chan time.Time          // see BlackHoleAfterPing; nil when not armed
	atPing    chan time.Time          // see CutAtPing; nil when not armed
	closed    bool

	requests atomic.Int64 // see Requests
	delay    atomic.Int64 // see SetDelay, in ns

	wg        sync.WaitGroup // every goroutine the proxy started
	closeOnce sync.Once
}

// NewProxy starts a proxy to target for the test t; t.Cleanup closes it. It
// calls t.Fatal if it cannot listen, so it must be called from the goroutine
// running the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy is NewProxy without a testing.TB. The caller owns the proxy and
// must Close it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zktest: proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		conns:   map[*proxyConn]struct{}{},
		changed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients connect to, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Conns returns the number of client connections the proxy holds open,
// whether it forwards them, black-holes them or drops their replies.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// AwaitConns waits until the proxy holds n client connections (see
// Conns), or until ctx ends, with an error that says how many it held.
func (p *Proxy) AwaitConns(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		held, changed := len(p.conns), p.changed
		p.mu.Unlock()
		if held == n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("zktest: proxy holds %d connections, want %d: %w", held, n, ctx.Err())
		}
	}
}

// connsChanged tells AwaitConns that conns changed. The caller holds p.mu.
func (p *Proxy) connsChanged() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Cut closes every connection the proxy holds, on both sides, at once: each
// client sees its connection close, as when a server crashes. Connections
// made afterwards are accepted as usual (forwarded, or swallowed while a
// black hole is on). When Cut returns, Conns no longer counts the cut
// connections.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close()
		delete(p.conns, c)
	}
	p.connsChanged()
}

// BlackHole partitions the network: from now on the proxy forwards nothing,
// in either direction, on the connections it holds and on new ones, which it
// still accepts (and never connects to the target). Nobody is told:
// connections stay open, bytes vanish, and clients and server notice only by
// their own timeouts. Bytes already passing through the proxy when BlackHole
// is called may still arrive. BlackHole on a black hole does nothing; Heal
// ends it.
func (p *Proxy) BlackHole() {
	p.setFilter(filterAll)
}

// BlackHoleAfterPing arms a one-shot partition that begins right after a
// ping reply: the first reply to a ping that the proxy writes to a client
// after the call is followed at once by BlackHole. The returned channel then
// receives the time just before that reply was written, no later than the
// client can have read it: a client that reads nothing more gives its
// connection up a known time after it (go-zookeeper: two thirds of the
// session timeout), and a test can aim at that moment without watching the
// server's clock. Arming again replaces an armed partition, whose channel
// then never receives; so do Close and a proxy that never forwards a ping
// reply.
func (p *Proxy) BlackHoleAfterPing() <-chan time.Time { return p.arm(&p.afterPing) }

// arm arms the one-shot of slot (afterPing, atPing): it returns a new
// channel, which replaces an armed one.
func (p *Proxy) arm(slot *chan time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	*slot = ch
	return ch
}

// disarm returns the channel armed in slot, if any, and disarms it.
func (p *Proxy) disarm(slot *chan time.Time) chan time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := *slot
	*slot = nil
	return ch
}

// pinged begins the partition BlackHoleAfterPing armed, if any, after a
// ping reply written at at.
func (p *Proxy) pinged(at time.Time) {
	if ch := p.disarm(&p.afterPing); ch != nil {
		p.BlackHole()
		ch <- at
	}
}

// CutAtPing arms a one-shot cut aimed at the ping cycle: the next ping a
// client sends through the proxy after the call is not forwarded, and its
// connection is closed, both sides, as Cut does; the returned channel then
// receives the time of the cut. An idle client sends a ping a third of the
// session timeout after its last request (go-zookeeper), so the cut comes
// that long after the last request the server answered, and a test can aim
// at the moments that follow without watching the clock. Arming again
// replaces an armed cut, whose channel then never receives; so does Close.
func (p *Proxy) CutAtPing() <-chan time.Time { return p.arm(&p.atPing) }

// cutsAt reports whether frame, a request, is the ping CutAtPing aims at,
// and if so disarms it and sends the time.
func (p *Proxy) cutsAt(frame []byte) bool {
	if parseRequest(frame).op != OpPing {
		return false
	}
	ch := p.disarm(&p.atPing)
	if ch == nil {
		return false
	}
	ch <- time.Now()
	return true
}

// DropReplies loses what comes back: from now on the proxy forwards what
// clients send to the target, on the connections it holds and on new ones,
// but drops everything the target sends back, including its closing of a
// connection. Requests reach the server and take effect; their replies never
// arrive, as when a partition begins between request and reply. Bytes already
// passing through the proxy when DropReplies is called may still arrive.
// Connections in a black hole (BlackHole, or a fault's) stay cut off. Heal
// ends it.
func (p *Proxy) DropReplies() {
	p.setFilter(filterReplies)
}

// Deafen partitions the network one way: from now on the server hears
// nothing from clients, while watch notifications still reach them. On the
// connections it holds the proxy drops everything clients send (requests,
// pings) and, of what the target sends, passes only notifications, not its
// closing of a connection; it accepts new connections into a black hole. A
// client that takes any bytes read for a sign of life sees its connection
// up while the server, hearing nothing, expires its session. Bytes already
// passing through the proxy when Deafen is called may still arrive.
// Connections in a black hole stay cut off. Heal ends it.
func (p *Proxy) Deafen() {
	p.setFilter(filterDeaf)
}

// setFilter sets the filter of the proxy and of its connections, but for
// those in a black hole, which stay there until Heal.
func (p *Proxy) setFilter(f filter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filter = f
	for c := range p.conns {
		if g := filter(c.filter.Load()); g != filterAll && g != filterHeld {
			c.filter.Store(int32(f))
		}
	}
}

// Heal ends a black hole, DropReplies or Deafen, and the black holes of faults
// (Strike with BlackHole): it closes every connection that was affected, so
// that clients notice and reconnect, and forwards new connections again.
// Heal when all is well does nothing. Faults still armed stay armed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filter = filterNone
	for c := range p.conns {
		if g := filter(c.filter.Load()); g != filterNone && g != filterHeld {
			c.close()
			delete(p.conns, c)
		}
	}
}

// Close stops accepting, closes every connection, and returns once every
// goroutine of the proxy has ended. Closing a closed proxy does nothing.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			c.close()
			delete(p.conns, c)
		}
		p.connsChanged()
		p.mu.Unlock()
		p.cancel()
		p.ln.Close()
		p.wg.Wait()
	})
}

// accept runs until the listener is closed.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors or the like: try again shortly.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			conn.Close()
			return
		}
		ctx, cancel := context.WithCancel(p.ctx)
		c := &proxyConn{p: p, client: conn, ctx: ctx, cancel: cancel, expected: map[int32]*Fault{}}
		c.filter.Store(int32(p.filter))
		p.conns[c] = struct{}{}
		p.connsChanged()
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve forwards c until both directions end.
func (p *Proxy) serve(c *proxyConn) {
	defer p.wg.Done()
	defer p.forget(c)
	defer c.close()
	if f := filter(c.filter.Load()); f == filterAll || f == filterDeaf {
		// Accepted into the black hole: never reaches the target.
		_, _ = io.Copy(io.Discard, c.client)
		return
	}
	d := net.Dialer{Timeout: proxyDialTimeout}
	up, err := d.DialContext(c.ctx, "tcp", p.target)
	if err != nil {
		return // the client sees its connection close
	}
	if !c.setUpstream(up) {
		return // cut while dialing
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.pipe(c.client, up, toClient) })
	c.pipe(up, c.client, toTarget)
	wg.Wait()
}

// forget drops c from the held connections.
func (p *Proxy) forget(c *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.conns[c]; ok {
		delete(p.conns, c)
		p.connsChanged()
	}
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	ctx    context.Context // canceled by close; ends the dial and the delays
	cancel context.CancelFunc
	filter atomic.Int32 // a filter: what to drop

	mu       sync.Mutex
	upstream net.Conn
	closed   bool
	expected map[int32]*Fault // by xid: Lose, Drop and Pass faults waiting for their reply
	held     *held            // the request a Hold fault took, if any
}

// setUpstream records the connection to the target, or closes it and
// returns false if c was closed meanwhile.
func (c *proxyConn) setUpstream(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		up.Close()
		return false
	}
	c.upstream = up
	return true
}

// close ends c, once. It stops forwarding first, then strikes the faults
// still waiting for a reply on c, which can no longer arrive, and only then
// closes both sides: a client that has seen its connection close finds them
// struck, and nothing it sends once it finds one struck reaches the server.
// It may be called more than once.
func (c *proxyConn) close() {
	c.cancel() // deliver writes nothing once c.ctx is done
	c.mu.Lock()
	defer c.mu.Unlock()
	for xid, f := range c.expected {
		f.strike()
		delete(c.expected, xid)
	}
	if c.closed {
		return
	}
	c.closed = true
	c.client.Close()
	if c.upstream != nil {
		c.upstream.Close()
	}
}

// pipe copies src to dst, the way dir, until src ends or a fault ends the
// connection. It hands on what it reads a whole frame at a time once the
// stream proves to be ZooKeeper's (see framer), so that faults strike whole
// requests and replies, through a queue where packets wait out the delay
// (see deliver). While the filter drops dir it reads and drops what arrives,
// and when src ends it leaves dst open, as a partition would; otherwise it
// passes the end on by closing both sides once the queue is delivered.
func (c *proxyConn) pipe(dst, src net.Conn, dir direction) {
	queue := make(chan packet, queueLen)
	var wg sync.WaitGroup
	wg.Go(func() { c.deliver(dst, dir, queue) })
	defer wg.Wait()
	defer close(queue)
	defer c.heldEnds(dir)

	var fr framer
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pk := packet{at: c.p.deliveryTime()}
			fr.next(buf[:n], func(frame []byte, kind frameKind) {
				switch {
				case pk.end:
				case !c.drops(dir) || c.notifies(frame, kind, dir):
					c.pass(&pk, frame, kind, dir)
				default:
					c.answers(frame, kind, dir)
				}
			})
			open := c.send(queue, pk)
			if pk.hold != nil {
				c.startHold(pk.hold, queue, open)
			}
			if !open || pk.end {
				return
			}
		}
		if err != nil {
			break
		}
	}
	if !c.drops(dir) {
		c.send(queue, packet{end: true})
	}
}

// pass adds frame, read the way dir, to pk, unless a fault takes it.
func (c *proxyConn) pass(pk *packet, frame []byte, kind frameKind, dir direction) {
	var f *Fault
	if kind == messageFrame && dir == toTarget {
		if c.p.cutsAt(frame) {
			pk.end = true
			return
		}
		f = c.request(frame)
	} else if kind == messageFrame {
		f = c.reply(frame)
	}
	switch {
	case f == nil:
		pk.b = append(pk.b, frame...)
		pk.ping = pk.ping || kind == messageFrame && dir == toClient && replyXid(frame) == xidPing
	case f.action == BlackHole: // a request
		c.filter.Store(int32(filterAll))
		f.strike()
	case f.action == Hold: // a request
		c.hold(f, frame)
		pk.hold = f
	case f.action == Drop: // a reply
		f.strike()
	case f.action == Pass: // a reply
		pk.b = append(pk.b, frame...)
		f.strike()
	default: // Cut a request, Lose a reply
		pk.end, pk.fault = true, f
	}
}

// request looks at a request frame on its way to the target and returns the
// Cut, BlackHole or Hold fault that takes it, if any; a Lose, Drop or Pass
// fault waits for the reply. It counts the request if it goes on (see
// Requests).
func (c *proxyConn) request(frame []byte) *Fault {
	r := parseRequest(frame)
	if r.op == OpPing {
		return nil
	}
	f := c.p.take(r)
	if f != nil && (f.action == Cut || f.action == BlackHole || f.action == Hold) {
		return f
	}
	c.p.requests.Add(1)
	if f != nil {
		c.mu.Lock()
		c.expected[r.xid] = f // before the request goes: its reply cannot overtake it
		c.mu.Unlock()
	}
	return nil
}

// reply looks at a reply frame on its way to the client, and returns the
// Lose, Drop or Pass fault waiting for it, if any.
func (c *proxyConn) reply(frame []byte) *Fault {
	xid := replyXid(frame)
	if xid == xidUnknown {
		return nil // a notification: answers no request
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.expected[xid]
	delete(c.expected, xid)
	return f
}

func (c *proxyConn) drops(dir direction) bool {
	switch filter(c.filter.Load()) {
	case filterAll, filterDeaf, filterHeld:
		return true
	case filterReplies:
		return dir == toClient
	}
	return false
}

// notifies reports whether frame, read the way dir, is a watch notification
// that passes although c drops the rest (see Deafen).
func (c *proxyConn) notifies(frame []byte, kind frameKind, dir direction) bool {
	return filter(c.filter.Load()) == filterDeaf && dir == toClient &&
		kind == messageFrame && replyXid(frame) == xidUnknown && len(frame) > 4+4
}

// A filter says what a connection drops.
type filter int32

const (
	filterNone    filter = iota // forward everything
	filterAll                   // a black hole
	filterReplies               // drop what the target sends
	filterDeaf                  // drop what clients send, and all but notifications back
	filterHeld                  // a black hole that keeps the session alive (Hold)
)

// A direction is the way bytes go through the proxy.
type direction int

const (
	toTarget direction = iota
	toClient
)
