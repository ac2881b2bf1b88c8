package zktest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Observer returns a plain go-zookeeper connection to addrs, for a test to
// look at what the code under test left in ZooKeeper. It is closed when the
// test ends; go-zookeeper's informational logging is off. Under the race
// detector its first replies wait up to 100ms after the dial, for
// go-zookeeper to send its watches again first (go-zookeeper/zk#35: a data
// race of the dependency, harmless, which would fail the test).
func Observer(t testing.TB, addrs ...string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(dialer()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// awaitFor bounds how long the Await functions wait before they fail the
// test.
const awaitFor = 30 * time.Second

// AwaitStruck blocks until f has struck: until its Struck channel is
// closed. It fails the test if f has not struck within 30 seconds, so it
// must be called from the goroutine running the test.
func AwaitStruck(t testing.TB, f *Fault) {
	t.Helper()
	select {
	case <-f.Struck():
	case <-time.After(awaitFor):
		t.Fatalf("the fault %v on %v has not struck within %v", f.action, f.match, awaitFor)
	}
}

// AwaitChildren blocks until path has exactly n children and returns them,
// waiting on watches (a missing path counts as none). A request that fails
// with c's connection is made again: across a server's restart,
// go-zookeeper fails what it has queued each time it has tried every
// server, and a test that restarts one looks with c after its sessions are
// back, which can be before c is. It fails the test on any other error, or
// if path does not have n children within 30 seconds, so it must be called
// from the goroutine running the test.
func AwaitChildren(t testing.TB, c *zk.Conn, path string, n int) []string {
	t.Helper()
	deadline := time.After(awaitFor)
	for {
		ok, _, appeared, err := c.ExistsW(path)
		var changed <-chan zk.Event
		var kids []string
		if err == nil && ok {
			kids, _, changed, err = c.ChildrenW(path)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
		}
		switch {
		case connectionFailed(err):
			// Made again at once: the request waits for c's next
			// connection.
			select {
			case <-deadline:
				t.Fatalf("%s: %v; want %d children", path, err, n)
			default:
				continue
			}
		case err != nil:
			t.Fatal(err)
		case len(kids) == n:
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

// connectionFailed reports whether err is go-zookeeper's failure of a
// request with its connection, not the server's answer to it.
func connectionFailed(err error) bool {
	return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed)
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
