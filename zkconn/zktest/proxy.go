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
// BlackHole partitions them, DropReplies loses what comes back. Point a client at Addr instead of at the server
// to test how it copes. Its methods may be called from several goroutines.
// The zero value is not usable.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close; ends dials
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*proxyConn]struct{} // held connections
	filter filter                  // for new connections
	closed bool

	requests atomic.Int64 // see Requests

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
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		conns:  map[*proxyConn]struct{}{},
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

// DropReplies loses what comes back: from now on the proxy forwards what
// clients send to the target, on the connections it holds and on new ones,
// but drops everything the target sends back, including its closing of a
// connection. Requests reach the server and take effect; their replies never
// arrive, as when a partition begins between request and reply. Bytes already
// passing through the proxy when DropReplies is called may still arrive.
// Connections accepted during a black hole stay cut off. Heal ends it.
func (p *Proxy) DropReplies() {
	p.setFilter(filterReplies)
}

func (p *Proxy) setFilter(f filter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filter = f
	for c := range p.conns {
		c.filter.Store(int32(f))
	}
}

// Heal ends a black hole or DropReplies: it closes every connection that was
// affected, so that clients notice and reconnect, and forwards new
// connections again. Heal when all is well does nothing.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filter = filterNone
	for c := range p.conns {
		if c.filter.Load() != int32(filterNone) {
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
		c := &proxyConn{client: conn, ctx: ctx, cancel: cancel, counter: requestCounter{p: p}}
		c.filter.Store(int32(p.filter))
		p.conns[c] = struct{}{}
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
	if filter(c.filter.Load()) == filterAll {
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
	delete(p.conns, c)
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	client  net.Conn
	ctx     context.Context // canceled by close; ends the dial
	cancel  context.CancelFunc
	filter  atomic.Int32   // a filter: what to drop
	counter requestCounter // of what the client sends; used by one goroutine

	mu       sync.Mutex
	upstream net.Conn
	closed   bool
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

// close closes both sides; it may be called more than once.
func (c *proxyConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	c.client.Close()
	if c.upstream != nil {
		c.upstream.Close()
	}
}

// pipe copies src to dst, the way dir, until src ends. While the filter
// drops dir it reads and drops what arrives, and when src ends it leaves dst
// open, as a partition would; otherwise it passes the end on by closing both
// sides.
func (c *proxyConn) pipe(dst, src net.Conn, dir direction) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.drops(dir) {
			if dir == toTarget {
				c.counter.read(buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if !c.drops(dir) {
		c.close()
	}
}

func (c *proxyConn) drops(dir direction) bool {
	switch filter(c.filter.Load()) {
	case filterAll:
		return true
	case filterReplies:
		return dir == toClient
	}
	return false
}

// A filter says what a connection drops.
type filter int32

const (
	filterNone    filter = iota // forward everything
	filterAll                   // a black hole
	filterReplies               // drop what the target sends
)

// A direction is the way bytes go through the proxy.
type direction int

const (
	toTarget direction = iota
	toClient
)
