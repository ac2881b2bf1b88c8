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

// r101Conn, once armed, returns two watch notifications in one read (as
// one TCP segment brings them), and records its Close.
type r101Conn struct {
	net.Conn
	armed  *atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (c *r101Conn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// notifications counts the whole notification frames in b, and reports
// whether b ends at a frame's end.
func r101Notifications(b []byte) (n int, whole bool) {
	for len(b) >= 4 {
		end := 4 + int(binary.BigEndian.Uint32(b))
		if len(b) < end {
			return n, false
		}
		if end >= 8 && int32(binary.BigEndian.Uint32(b[4:8])) == xidNotification {
			n++
		}
		b = b[end:]
	}
	return n, len(b) == 0
}

func (c *r101Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.armed.Load() || err != nil {
		return n, err
	}
	if k, _ := r101Notifications(b[:n]); k == 0 {
		return n, err
	}
	for {
		k, whole := r101Notifications(b[:n])
		if k >= 2 && whole || n == len(b) {
			c.armed.Store(false)
			return n, nil
		}
		m, err := c.Conn.Read(b[n:])
		n += m
		if err != nil {
			return n, nil
		}
	}
}

// TestReviewR101BufferedNotificationAfterDeaf: a read brings two
// notifications at once; the tap keeps the second in t.in while
// go-zookeeper handles the first. go-zookeeper's reading goroutine is then
// held up (here: its event callback waits for the wire's mutex; in life a
// stop, SIGSTOP or a starved process) past the session timeout: the deaf
// timer closes the connection and the server expires the session. When
// the reader goes on, Read serves the second notification from t.in
// without deafNow's check (deafNow runs only after a read of the
// connection), although the tap itself closed the connection as deaf and
// the session is gone on the server: go-zookeeper delivers NodeDeleted to
// a watch of an expired session, which a lock waiter takes for its turn.
func TestReviewR101BufferedNotificationAfterDeaf(t *testing.T) {
	const timeout = 2 * time.Second
	var armed atomic.Bool
	var conns []*r101Conn
	var mu sync.Mutex
	dialer := func(network, addr string, d time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, d)
		if err != nil {
			return nil, err
		}
		rc := &r101Conn{Conn: c, armed: &armed, closed: make(chan struct{})}
		mu.Lock()
		conns = append(conns, rc)
		mu.Unlock()
		return rc, nil
	}
	s := dial(t, []string{shared.Addr()}, WithSessionTimeout(timeout), WithDialer(dialer))
	h := current(t, s)
	root := testRoot(t)
	obs := zktest.Observer(t, shared.Addr())
	plainRoot(t, obs, root, nil)
	a, b, eph := root+"/a", root+"/b", root+"/eph"
	for _, p := range []string{a, b} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cha, chb <-chan zk.Event
	if err := h.Do(ctx, func(c *zk.Conn) error {
		if _, err := c.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			return err
		}
		var err error
		if _, _, cha, err = c.GetW(a); err != nil {
			return err
		}
		_, _, chb, err = c.GetW(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	rc := conns[len(conns)-1]
	mu.Unlock()
	s.mu.Lock()
	w := s.cur.wire
	s.mu.Unlock()

	// The reading goroutine will wait in its event callback (wire.fired)
	// for the first notification.
	w.mu.Lock()
	locked := true
	defer func() {
		if locked {
			w.mu.Unlock()
		}
	}()
	armed.Store(true)
	if _, err := obs.Multi(&zk.DeleteRequest{Path: a, Version: -1}, &zk.DeleteRequest{Path: b, Version: -1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rc.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the deaf timer did not close the connection")
	}
	// The server expires the session: its ephemeral node goes.
	awaitGone(t, obs, eph, 15*time.Second)
	w.mu.Unlock()
	locked = false
	select {
	case ev := <-cha:
		t.Logf("first notification (read in time): %v", ev)
	case <-time.After(10 * time.Second):
		t.Fatal("the first notification did not come")
	}
	select {
	case ev := <-chb:
		if ev.Type == zk.EventNodeDeleted {
			t.Errorf("after the tap closed the connection as deaf and the server expired the session, a notification kept in t.in reached go-zookeeper: %v", ev)
		} else {
			t.Logf("second watch: %v", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("nothing on the second watch")
	}
}
