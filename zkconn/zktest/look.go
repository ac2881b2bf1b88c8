package zktest

import (
	"errors"
	"net"
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
	dial := zk.Dialer(net.DialTimeout)
	if raceEnabled {
		dial = dialHeld
	}
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(dial))
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
