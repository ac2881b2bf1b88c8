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
// detector its first replies wait (see heldConn).
func Observer(t testing.TB, addrs ...string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(dialer()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
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
