package zkconn

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR94SlowFirstConnect: the first connect of a Dial is answered
// after two thirds of the granted timeout (a server slow to fsync the
// createSession, a long link), and the link is fast afterwards. The tap
// reads the connect response, finds heard (the connect request's write
// time) 2T/3 old and, since round 94, refuses it (deafNow) instead of
// handing it on: go-zookeeper never learns the session id, while the wire
// has recorded it, so every later connect of the *zk.Conn (id 0) is
// refused with errNewSession. Dial then waits for its ctx, whatever the
// servers do. Before, go-zookeeper read the response, learned the id, and
// reconnected to the same session once the tap closed the connection.
func TestReviewR94SlowFirstConnect(t *testing.T) {
	const timeout = 3 * time.Second
	p := zktest.NewProxy(t, shared.Addr())
	p.SetDelay(timeout/3 + 100*time.Millisecond) // each way: the connect's round trip is 2T/3 + 200ms
	var dials atomic.Int32
	dialer := func(network, addr string, d time.Duration) (net.Conn, error) {
		if dials.Add(1) == 2 {
			p.SetDelay(0) // the link is fast from the second connection on
		}
		return net.DialTimeout(network, addr, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	s, err := Dial(ctx, []string{p.Addr()}, WithSessionTimeout(timeout), WithDialer(dialer))
	if err != nil {
		t.Fatalf("Dial after a slow first connect (then a fast link) = %v after %v, %d connections dialed", err, time.Since(start).Round(time.Millisecond), dials.Load())
	}
	s.Close()
}

// r94Conn holds back a read that brings a watch notification, once armed,
// until the tap closes the connection (its deaf timer): the read then
// returns what it read, as a read that completed just before the timer ran.
type r94Conn struct {
	net.Conn
	armed  *atomic.Bool
	closed chan struct{}
	once   sync.Once
	held   chan struct{} // closed when a notification is held
	hold   sync.Once
}

func (c *r94Conn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *r94Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.armed.Load() && n >= 8 && int32(binary.BigEndian.Uint32(b[4:8])) == xidNotification {
		c.hold.Do(func() { close(c.held) })
		<-c.closed
	}
	return n, err
}

// TestReviewR94DeafNowAfterTimer: deafNow hands on what was read if the
// connection was closed meanwhile ("!t.closed"), which is what happens
// when the deaf timer (deafCheck) runs between the read and deafNow, as it
// can on waking from a stop, both being overdue. A notification read with
// heard two thirds of the timeout old then reaches go-zookeeper, which the
// change says must never happen "whatever the timer has done meanwhile".
func TestReviewR94DeafNowAfterTimer(t *testing.T) {
	const timeout = 2 * time.Second
	p := zktest.NewProxy(t, shared.Addr())
	var armed atomic.Bool
	held := make(chan struct{})
	dialer := func(network, addr string, d time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, d)
		if err != nil {
			return nil, err
		}
		return &r94Conn{Conn: c, armed: &armed, closed: make(chan struct{}), held: held}, nil
	}
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(timeout), WithDialer(dialer))
	h := current(t, s)
	root := testRoot(t)
	obs := zktest.Observer(t, shared.Addr())
	plainRoot(t, obs, root, nil)
	node := root
	var ch <-chan zk.Event
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Do(ctx, func(c *zk.Conn) error {
		var err error
		_, _, ch, err = c.GetW(node)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	p.Deafen()
	if err := obs.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the notification did not come")
	}
	select {
	case ev := <-ch:
		if ev.Type == zk.EventNodeDeleted {
			t.Errorf("a notification read once heard was 2T/3 old reached go-zookeeper: %v", ev)
		}
	case <-h.Lost():
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNodeDeleted {
				t.Errorf("a notification read once heard was 2T/3 old reached go-zookeeper: %v", ev)
			}
		default:
		}
	case <-time.After(20 * time.Second):
		t.Fatal("neither the watch nor the loss")
	}
}

// r94Fast turns the proxy's delay off once a read of its connection has
// brought something (the connect response, slow).
type r94Fast struct {
	net.Conn
	armed *atomic.Bool
	p     *zktest.Proxy
}

func (c *r94Fast) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.armed.CompareAndSwap(true, false) {
		c.p.SetDelay(0)
	}
	return n, err
}

// TestReviewR94SlowConnectAfterLoss: SlowFirstConnect for a Session that
// has been in use: its session is lost (a partition longer than the
// timeout), and the Session's new *zk.Conn gets its first connect response
// after 2T/3 (servers busy after an outage), the link fast after that. The
// new *zk.Conn never learns its session; the Session stays without one.
func TestReviewR94SlowConnectAfterLoss(t *testing.T) {
	const timeout = 3 * time.Second
	p := zktest.NewProxy(t, shared.Addr())
	var armed atomic.Bool
	dialer := func(network, addr string, d time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, d)
		if err != nil {
			return nil, err
		}
		return &r94Fast{Conn: c, armed: &armed, p: p}, nil
	}
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(timeout), WithDialer(dialer))
	h := current(t, s)
	p.BlackHole()
	select {
	case <-h.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("the session was not lost within 20s")
	}
	p.SetDelay(timeout/3 + 100*time.Millisecond) // the next connect's round trip: 2T/3 + 200ms
	armed.Store(true)
	p.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Current(ctx); err != nil {
		t.Errorf("no new session within 20s of the heal (its first connect slow, the link fast after): %v", err)
	}
}
