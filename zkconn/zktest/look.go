package zktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Observer returns a plain go-zookeeper connection to addrs, for a test to
// look at what the code under test left in ZooKeeper. It is closed when the
// test ends; go-zookeeper's informational logging is off. Under the race
// detector its first replies wait (see heldConn).
func Observer(t testing.TB, addrs ...string) *zk.Conn {
	t.Helper()
	c, err := connect(addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// connect returns a plain go-zookeeper connection to addrs, as Observer
// describes it.
func connect(addrs []string) (*zk.Conn, error) {
	dial := zk.Dialer(net.DialTimeout)
	if raceEnabled {
		dial = dialHeld
	}
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(dial))
	return c, err
}

// CreatePersistent makes each of paths, in order, a persistent node with no
// data and an open ACL on the ZooKeeper at addrs, unless a node is there
// already; a path's parent must be there or come before it in paths. It is
// for TestMain, to give a package's tests a root on a shared server that
// stays for the whole run. Code under test may make a missing parent a
// container, as dsync does, which ZooKeeper removes once it is empty, at a
// check every 60 s: a test that made a node under such a root with a plain
// create would fail if the check came just before. A create cut by a lost
// connection is sent again. When ctx is done first, CreatePersistent
// returns an error wrapping ctx.Err() (some of paths may have been made).
func CreatePersistent(ctx context.Context, addrs []string, paths ...string) error {
	c, err := connect(addrs)
	if err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		for _, p := range paths {
			_, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			for errors.Is(err, zk.ErrConnectionClosed) && ctx.Err() == nil { // after Close, every request fails so at once
				_, err = c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			}
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
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
		c.Close() // fails the create in flight
		<-done
		return fmt.Errorf("zktest: create %s: %w", strings.Join(paths, ", "), ctx.Err())
	}
}

// AwaitChildren blocks until path has exactly n children and returns them,
// waiting on watches (a missing path counts as none). It fails the test if
// that does not happen within 30 seconds, so it must be called from the
// goroutine running the test.
func AwaitChildren(t testing.TB, c *zk.Conn, path string, n int) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ok, _, appeared, err := c.ExistsW(path)
		if err != nil {
			t.Fatal(err)
		}
		var changed <-chan zk.Event
		var kids []string
		if ok {
			kids, _, changed, err = c.ChildrenW(path)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(kids) == n {
			return kids
		}
		select {
		case <-appeared:
		case <-changed:
		case <-deadline:
			t.Fatalf("%s has children %v; want %d of them", path, kids, n)
		}
	}
}

// CreateEvery creates paths in order with c, one at each tick of d (empty
// persistent nodes), on a goroutine, until all exist or the returned stop is
// called; stop waits for the goroutine to end and may be called more than
// once. It makes traffic that lasts, such as the notifications of watches
// set on paths: it is not a way to wait for anything. A failed create
// fails the test (t.Error) and ends the goroutine.
func CreateEvery(t testing.TB, c *zk.Conn, d time.Duration, paths ...string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(d)
		defer tick.Stop()
		for _, p := range paths {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
