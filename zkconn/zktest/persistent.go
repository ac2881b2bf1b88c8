package zktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// CreatePersistent makes each of paths, in order, a persistent node with no
// data and an open ACL on the ZooKeeper at addrs, unless a node is there
// already (whatever its kind: a container or ephemeral node there is not
// made persistent); a path's parent must be there or come before it in
// paths. It is for TestMain, to give a package's tests a root on a shared
// server that stays for the whole run. Code under test may make a missing
// parent a container, as dsync does, which ZooKeeper removes once it is
// empty, at a check every 60 s: a test that made a node under such a root
// with a plain create would fail if the check came just before.
//
// Each create is sent once: a lost connection fails the call with
// go-zookeeper's error (the create may have been applied), as does a server
// that is not serving (zk.ErrNoServer). When ctx is done first,
// CreatePersistent returns an error wrapping ctx.Err(), within about a
// second (go-zookeeper's wait for its session's close; a session it got
// then ends by timing out on the server); some of paths may have been made.
// It leaves no goroutine or connection behind.
func CreatePersistent(ctx context.Context, addrs []string, paths ...string) error {
	var conns connSet
	c, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(conns.dialer(dialer())))
	if err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	defer func() {
		c.Close()
		conns.close()
		for range events { // closed once go-zookeeper's goroutines are done
		}
	}()
	done := make(chan error, 1)
	go func() {
		for _, p := range paths {
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				done <- fmt.Errorf("zktest: create %s: %w", p, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// go-zookeeper's Close neither ends a read of its handshake, which
		// waits up to ten read timeouts (over a minute) on a server that
		// answers nothing, nor stops it dialing each of addrs in turn: so
		// its connections go first, and no more are made.
		conns.close()
		c.Close() // fails the create waiting
		<-done
		return fmt.Errorf("zktest: create %s: %w", strings.Join(paths, ", "), ctx.Err())
	}
}

// A connSet is the connections a dialer made, to close them all at once;
// once closed, it refuses new ones.
type connSet struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// dialer returns d recording its connections in s.
func (s *connSet) dialer(d zk.Dialer) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		c, err := d(network, address, timeout)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed { // while it dialed
			c.Close()
			return nil, net.ErrClosed
		}
		s.conns = append(s.conns, c)
		return c, nil
	}
}

// close closes the connections made and refuses new ones; it may be called
// more than once.
func (s *connSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
}
