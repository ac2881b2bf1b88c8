package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r19Dialer is the dialer of the tests below. Connections to the targets
// go by mode: refused, passed on (a ping's Write waiting until the
// connection is closed, if holdPing), or, once, to a black hole (accepted,
// never answered; later ones are refused). Any other address is dialed as
// it is.
type r19Dialer struct {
	targets []string
	hole    string        // a black-holed proxy
	holed   chan struct{} // closed once a connection went to the hole
	mode    atomic.Int32

	mu       sync.Mutex
	conns    []*r19Conn
	holdPing bool
	pingHeld chan struct{} // closed once a ping's Write waits
}

const (
	r19Refuse = iota
	r19Pass
	r19Hole
)

func (d *r19Dialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if !slices.Contains(d.targets, address) {
		return net.DialTimeout(network, address, timeout)
	}
	switch d.mode.Load() {
	case r19Refuse:
		return nil, errors.New("r19: connection refused")
	case r19Hole:
		if d.mode.CompareAndSwap(r19Hole, r19Refuse) {
			close(d.holed)
			return net.DialTimeout(network, d.hole, timeout)
		}
		return nil, errors.New("r19: connection refused")
	}
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	rc := &r19Conn{Conn: c, d: d, closed: make(chan struct{})}
	d.mu.Lock()
	d.conns = append(d.conns, rc)
	d.mu.Unlock()
	return rc, nil
}

// closeAll closes the connections passed on to target.
func (d *r19Dialer) closeAll() {
	d.mu.Lock()
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type r19Conn struct {
	net.Conn
	d      *r19Dialer
	once   sync.Once
	closed chan struct{}
}

func (c *r19Conn) Write(b []byte) (int, error) {
	isAuth := len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == 100 // setAuth
	c.d.mu.Lock()
	hold := isAuth && c.d.holdPing
	if hold {
		c.d.holdPing = false
		close(c.d.pingHeld)
	}
	c.d.mu.Unlock()
	if hold {
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *r19Conn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestReviewR19AuthQueuedWhileDisconnected: 88c8515 calls AddAuth only
// once the *zk.Conn has a session, "so an AddAuth queued behind a stuck
// connect no longer keeps run from looking names up again". But run reads
// hasSession and calls AddAuth later, without a lock: if go-zookeeper's
// sending goroutine is not taking requests by then (the connection it had
// the session on is failing, its sender is stuck in a write, or already
// gone), AddAuth goes into go-zookeeper's send queue and waits there for
// the next connection — behind the same stuck connect 88c8515 meant to
// avoid: a black-holed server keeps it for ten times two thirds of the
// session timeout, and run neither refreshes nor does anything else.
//
// Interleaving (made deterministic here; since e769079 and the refresh
// lookups on goroutines of their own, run itself is never the one that
// waits): a refresh lookup waits in a slow name server when the *zk.Conn
// gets its session (HasSession); go-zookeeper's sender then blocks writing
// the credentials (a full send buffer), so AddAuth waits. The connection drops; go-zookeeper
// reconnects to its other server, now a black hole (then both refuse). zk2's name resolves from
// then on to a live server, but run, inside AddAuth, never looks it up:
// Dial fails at its deadline (10 s here; go-zookeeper's connect read
// deadline, 10 × 2/3 × 6 s = 40 s, would end the AddAuth with ErrNoServer).
func TestReviewR19AuthQueuedWhileDisconnected(t *testing.T) {
	live := zktest.NewProxy(t, shared.Addr())
	hole := zktest.NewProxy(t, shared.Addr())
	hole.BlackHole()
	// Two servers by IP address (go-zookeeper flushes its send queue only
	// once it has tried them all).
	a, b := zktest.NewProxy(t, shared.Addr()), zktest.NewProxy(t, shared.Addr())
	_, livePort, _ := net.SplitHostPort(live.Addr())
	d := &r19Dialer{targets: []string{a.Addr(), b.Addr()}, hole: hole.Addr(), holed: make(chan struct{}), pingHeld: make(chan struct{}), holdPing: true}

	dns := &fakeDNS{name: "zk2.r19.test"} // NXDOMAIN for now
	var gate atomic.Pointer[chan struct{}]
	inLookup := make(chan struct{})
	var inOnce sync.Once
	resolver := dnsResolver(func(q []byte) []byte {
		if g := gate.Load(); g != nil {
			inOnce.Do(func() { close(inLookup) })
			<-*g
		}
		return dns.answer(q)
	})

	partial := newMsgSignal("zkconn: cannot resolve some servers")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan dialed, 1)
	go func() {
		s, err := Dial(ctx, []string{a.Addr(), b.Addr(), "zk2.r19.test:" + livePort},
			WithDigestAuth("alice", "secret"), WithSessionTimeout(6*time.Second),
			WithDialer(d.dial), WithResolver(resolver), WithLogger(slog.New(partial)))
		done <- dialed{s, err}
	}()
	select {
	case <-partial.seen:
	case r := <-done:
		t.Fatalf("Dial returned %v before logging the names left out", r.err)
	}

	// run's next refresh waits in the name server.
	release := make(chan struct{})
	gate.Store(&release)
	<-inLookup
	d.mode.Store(r19Pass) // the server is reachable: a session, HasSession
	select {
	case <-d.pingHeld: // go-zookeeper's sender is stuck writing the credentials
	case r := <-done:
		t.Fatalf("Dial returned %v before the setAuth", r.err)
	}
	gate.Store(nil)
	close(release) // run comes back and calls AddAuth
	awaitGoroutines(t, "run in AddAuth", func(gs [][]byte) bool {
		for _, g := range gs {
			if bytes.Contains(g, []byte("(*Session).authenticate")) && bytes.Contains(g, []byte("(*Conn).AddAuth")) {
				return true
			}
		}
		return false
	})
	d.mode.Store(r19Hole)
	d.closeAll() // the connection drops; go-zookeeper reconnects into the black hole
	// Only then does zk2 resolve: a *zk.Conn started after a lookup found
	// it would otherwise take the hole instead.
	select {
	case <-d.holed:
	case <-time.After(30 * time.Second):
		t.Fatal("go-zookeeper did not reconnect into the black hole within 30s")
	}
	dns.on.Store(true) // zk2 resolves, to a live server
	start := time.Now()
	var lookups atomic.Int64
	deadline := time.AfterFunc(10*time.Second, func() { lookups.Store(dns.n.Load()); cancel() })
	defer deadline.Stop()
	r := <-done
	if r.err != nil {
		t.Fatalf("Dial = %v after %v\nzk2.r19.test was looked up %d times since it resolves; want a session on %s (refresh looks the names up every second): run sat in AddAuth, queued in go-zookeeper while its connection was down",
			r.err, time.Since(start).Round(time.Millisecond), lookups.Load(), live.Addr())
	}
	t.Logf("connected %v after zk2 resolved", time.Since(start).Round(time.Millisecond))
	r.s.Close()
}
