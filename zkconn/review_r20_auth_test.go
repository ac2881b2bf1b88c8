package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r20Conns records, for every connection it dials, when the first bytes
// from the server were read (the connect response) and when the first
// setAuth was written.
type r20Conns struct {
	mu    sync.Mutex
	conns []*r20Conn
}

type r20Conn struct {
	net.Conn
	rec      *r20Conns
	addr     string
	greeted  time.Time // first bytes read
	authSent time.Time // first setAuth written
}

func (r *r20Conns) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	rc := &r20Conn{Conn: c, rec: r, addr: address}
	r.mu.Lock()
	r.conns = append(r.conns, rc)
	r.mu.Unlock()
	return rc, nil
}

func (c *r20Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.rec.mu.Lock()
		if c.greeted.IsZero() {
			c.greeted = time.Now()
		}
		c.rec.mu.Unlock()
	}
	return n, err
}

func (c *r20Conn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == 100 { // setAuth
		c.rec.mu.Lock()
		if c.authSent.IsZero() {
			c.authSent = time.Now()
		}
		c.rec.mu.Unlock()
	}
	return c.Conn.Write(b)
}

// TestReviewR20RetiredAuthDelaysNext: run compares the *zk.Conn in use with
// its own loop variable c, read at the top of the turn in which authEnded
// arrives, not with the *zk.Conn the ended authenticate was for. When the
// *zk.Conn A whose AddAuth is under way is retired (here by refresh: a name
// it was made without resolves now, and there is no session yet), its
// close ends the AddAuth with ErrConnectionClosed; by the time run reads
// authEnded it has already made the replacement B (c == B == current), so
// it takes A's failure for B's and sets authAgain: B, which has done
// nothing wrong, gets its session and then waits out the second before its
// credentials are sent; the Session reports Connected (and Dial returns)
// a second late. The same happens after every loss (expiry, giveUp) that
// retires a *zk.Conn while its AddAuth waits.
//
// Interleaving: A connects through p, has a session; its setAuth is
// dropped (applied, reply swallowed: AddAuth waits). zk2's name resolves;
// run's refresh retires A (closing it ends the AddAuth) and replace makes
// B. run's next select gets authEnded(false) with c == B == s.cur:
// authAgain. B's HasSession wakes run: needAuth, but authAgain != nil.
func TestReviewR20RetiredAuthDelaysNext(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	live := zktest.NewProxy(t, shared.Addr())
	_, livePort, _ := net.SplitHostPort(live.Addr())
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.Drop)
	rec := &r20Conns{}
	dns := &fakeDNS{name: "zk2.r20.test"} // NXDOMAIN for now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var before int
	r := dialResolving(t, ctx, []string{p.Addr(), "zk2.r20.test:" + livePort}, dns.resolver(),
		[]Option{WithDigestAuth("alice", "secret"), WithSessionTimeout(10 * time.Second), WithDialer(rec.dial)},
		func() {
			zktest.AwaitStruck(t, f) // A's AddAuth waits for a reply that never comes
			awaitGoroutines(t, "A's AddAuth under way", inAddAuth)
			rec.mu.Lock()
			before = len(rec.conns)
			rec.mu.Unlock()
			dns.on.Store(true) // refresh retires A
		})
	if r.err != nil {
		t.Fatalf("Dial = %v", r.err)
	}
	defer r.s.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var b *r20Conn
	for _, c := range rec.conns[before:] {
		if !c.authSent.IsZero() {
			b = c
		}
	}
	if b == nil {
		t.Fatalf("no setAuth on the connections made after A (%d of them)", len(rec.conns)-before)
	}
	gap := b.authSent.Sub(b.greeted)
	t.Logf("B (%s): setAuth written %v after its connect response", b.addr, gap.Round(time.Millisecond))
	if gap > 500*time.Millisecond {
		t.Fatalf("B's credentials were sent %v after B had its session: run took the failure of retired A's AddAuth (ended by A's close) for B's and waited authAgain's second before authenticating B",
			gap.Round(time.Millisecond))
	}
}

// inAddAuth reports whether some goroutine is authenticate's, in AddAuth.
func inAddAuth(gs [][]byte) bool {
	for _, g := range gs {
		if bytes.Contains(g, []byte("(*Session).authenticate")) && bytes.Contains(g, []byte("(*Conn).AddAuth")) {
			return true
		}
	}
	return false
}

// noAuthenticate reports whether no goroutine is authenticate's.
func noAuthenticate(gs [][]byte) bool {
	for _, g := range gs {
		if bytes.Contains(g, []byte("(*Session).authenticate")) || bytes.Contains(g, []byte("(*Session).run")) {
			return false
		}
	}
	return true
}

// TestReviewR20DialFailsWhileAuthenticating (a check, passes): Dial's ctx
// ends while authenticate's AddAuth waits for a reply that never comes
// (dropped). Dial returns within a second or so of ctx's end (Close's
// c.close ends the AddAuth: go-zookeeper's Close closes shouldQuit first),
// and neither run nor the authenticate goroutine outlives it.
func TestReviewR20DialFailsWhileAuthenticating(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.Drop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan dialed, 1)
	go func() {
		s, err := Dial(ctx, []string{p.Addr()}, WithDigestAuth("alice", "secret"), WithSessionTimeout(10*time.Second))
		done <- dialed{s, err}
	}()
	select {
	case <-f.Struck():
	case r := <-done:
		t.Fatalf("Dial returned %v before the setAuth", r.err)
	}
	awaitGoroutines(t, "AddAuth under way", inAddAuth)
	cancel()
	start := time.Now()
	r := <-done
	if r.err == nil {
		r.s.Close()
		t.Fatal("Dial succeeded without the credentials' reply")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Dial returned %v after ctx ended", d)
	}
	awaitGoroutines(t, "run and authenticate ended", noAuthenticate)
}

// TestReviewR20CloseWhileAuthenticating (a check, passes): the same with a
// Session whose *zk.Conn was replaced: its first session was lost while
// connected (expired), the new *zk.Conn's AddAuth is dropped, and Close
// returns with every goroutine ended.
func TestReviewR20CloseWhileAuthenticating(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithDigestAuth("alice", "secret"), WithSessionTimeout(4*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, 5*time.Second)
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.Drop)
	p.BlackHole() // suspended, then given up: a new *zk.Conn
	await(t, sub, StateSuspended, 30*time.Second)
	await(t, sub, StateLost, 30*time.Second)
	p.Heal()
	zktest.AwaitStruck(t, f)
	awaitGoroutines(t, "AddAuth under way", inAddAuth)
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
	awaitGoroutines(t, "run and authenticate ended", noAuthenticate)
}
