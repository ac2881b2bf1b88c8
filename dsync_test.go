package dsync_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// shared is the ZooKeeper server of the tests that need nothing special of
// it; tests that partition or stop a server start their own.
var shared *zktest.Server

// java runs Curator 5.4 (Debian's jars) for the interop tests.
var java *curator.Tool

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise: they wait on timeouts, reconnects and
// Curator's JVMs far more than they compute, so more of them than the
// machine has cores (go test's default) keep its two cores busy.
//
// A test runs in parallel (after the serial ones) when it works on paths and
// sessions of its own and other tests' load cannot break a bound of its: one
// that asserts how long a call took, needs a short session to stay alive, or
// reads the process's goroutines stays serial (its subtests may run side by
// side, in the serial phase, where nothing else runs).
const parallelTests = 8

func TestMain(m *testing.M) {
	// The default only: m.Run parses the command line after, and a
	// -parallel given there wins.
	flag.Set("test.parallel", fmt.Sprint(parallelTests))
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = srv
	// lockPath's parent: persistent, so that no test races with ZooKeeper's
	// removal of empty containers to make it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = zktest.CreatePersistent(ctx, []string{srv.Addr()}, "/dsync-test")
	cancel()
	var dir string
	if err == nil {
		dir, err = os.MkdirTemp("", "dsync-curator")
	}
	if err == nil {
		java, err = curator.Build(dir)
	}
	if err != nil {
		srv.Close()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// dial opens a Session to addrs, closed when the test ends.
func dial(t testing.TB, addrs []string, opts ...zkconn.Option) *zkconn.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := zkconn.Dial(ctx, addrs, opts...)
	if err != nil {
		t.Fatalf("Dial(%v) = %v", addrs, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// lockPaths holds each test's lockPath, and runs numbers them: go test
// -count=n runs a test again on the same server, where a Once's record or a
// Count's value of the last run would still be.
var (
	lockPaths sync.Map // testing.TB → string
	runs      atomic.Int64
)

// lockPath returns a lock path unique to the test and to this run of it, the
// same on every call within it. Its parent, /dsync-test, is persistent on
// the shared server (TestMain).
func lockPath(t testing.TB) string {
	if p, ok := lockPaths.Load(t); ok {
		return p.(string)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	p, _ := lockPaths.LoadOrStore(t, fmt.Sprintf("/dsync-test/%s-%d", name, runs.Add(1)))
	return p.(string)
}

// longestPath returns a lock path of the test, below lockPath, as long as
// dsync takes one: 4096 bytes.
func longestPath(t testing.TB) string {
	path := lockPath(t) + "/"
	return path + strings.Repeat("a", 4096-len(path))
}

// observer is a plain go-zookeeper connection for looking at what the
// primitives left in ZooKeeper.
func observer(t testing.TB, addrs ...string) *zk.Conn { return zktest.Observer(t, addrs...) }

// children lists path's children (none if path does not exist).
func children(t testing.TB, c *zk.Conn, path string) []string {
	t.Helper()
	kids, _, err := c.Children(path)
	if err != nil && err != zk.ErrNoNode {
		t.Fatalf("Children(%s) = %v", path, err)
	}
	return kids
}

// awaitChildren blocks until path has exactly n children, using watches.
func awaitChildren(t testing.TB, c *zk.Conn, path string, n int) []string {
	t.Helper()
	return zktest.AwaitChildren(t, c, path, n)
}
