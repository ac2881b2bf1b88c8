package zkconn

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r21AuthCutter dials as it is, but a connection to one of targets is
// closed (both sides) when go-zookeeper writes a setAuth on it, before the
// request goes out: the request is not applied, AddAuth fails at once with
// zk.ErrConnectionClosed, and go-zookeeper reconnects to its next server.
// It stands for servers that take a connection and a session but close the
// connection on a setAuth (zktest's Cut on every setAuth; a server whose
// digest provider is disabled answers AUTHFAILED and closes likewise).
type r21AuthCutter struct {
	targets []string
	cuts    atomic.Int64
	mu      sync.Mutex
	cut     chan struct{} // closed at the first cut after arm
}

func (d *r21AuthCutter) arm() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = make(chan struct{})
	return d.cut
}

func (d *r21AuthCutter) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil || !slices.Contains(d.targets, address) {
		return c, err
	}
	return &r21CutConn{Conn: c, d: d}, nil
}

type r21CutConn struct {
	net.Conn
	d *r21AuthCutter
}

func (c *r21CutConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == 100 { // setAuth
		c.Conn.Close()
		c.d.cuts.Add(1)
		c.d.mu.Lock()
		if c.d.cut != nil {
			close(c.d.cut)
			c.d.cut = nil
		}
		c.d.mu.Unlock()
		return 0, errors.New("r21: connection cut at setAuth")
	}
	return c.Conn.Write(b)
}

// TestReviewR21AuthRetriesStarveRefresh: run re-arms refresh's one-second
// timer (fire) on every turn, while authAgain keeps its deadline. With two
// servers that take a session and cut the connection at every setAuth, and
// a third (by name) that did not resolve at Dial but resolves now and
// works, each AddAuth failure sets authAgain = T+1s and, a few
// microseconds later in the next turn, fire = T+1s+δ; go-zookeeper then
// reconnects to the other server at once (two servers: no one-second
// pause), and its HasSession kicks run, which re-arms fire at T+ε+1s,
// after authAgain's deadline. authAgain fires first, AddAuth goes out and
// is cut, and the cycle repeats: the refresh timer never fires, the name
// is never looked up again, and the Session stays without a session for
// good although a server is reachable and its name resolves. The design
// (f62c846) says refresh runs between attempts to add credentials.
func TestReviewR21AuthRetriesStarveRefresh(t *testing.T) {
	p1 := zktest.NewProxy(t, shared.Addr())
	p2 := zktest.NewProxy(t, shared.Addr())
	live := zktest.NewProxy(t, shared.Addr())
	_, livePort, _ := net.SplitHostPort(live.Addr())
	cutter := &r21AuthCutter{targets: []string{p1.Addr(), p2.Addr()}}
	dns := &fakeDNS{name: "zk3.r21.test"} // NXDOMAIN for now
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var queriesAt, cutsAt int64
	var resolvableAt time.Time
	r := dialResolving(t, ctx, []string{p1.Addr(), p2.Addr(), "zk3.r21.test:" + livePort}, dns.resolver(),
		[]Option{WithDigestAuth("alice", "secret"), WithSessionTimeout(10 * time.Second), WithDialer(cutter.dial)},
		func() {
			for range 2 { // the cycle is under way
				<-cutter.arm()
			}
			queriesAt, cutsAt = dns.n.Load(), cutter.cuts.Load()
			resolvableAt = time.Now()
			dns.on.Store(true) // zk3 resolves from now on, to a server that works
		})
	if r.err == nil {
		r.s.Close()
		t.Logf("connected %v after zk3 resolved (%d lookups of zk3 since)", time.Since(resolvableAt).Round(time.Millisecond), dns.n.Load()-queriesAt)
		return
	}
	t.Fatalf("Dial = %v\n%v after zk3 became resolvable: %d lookups of zk3 since, %d setAuth cut since (AddAuth retried each second on the two servers; refresh's timer re-armed by each turn, never fired)",
		r.err, time.Since(resolvableAt).Round(time.Millisecond), dns.n.Load()-queriesAt, cutter.cuts.Load()-cutsAt)
}
