package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/internal/syncbuf"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

var (
	// shared is the ZooKeeper server of the tests that need nothing special
	// of it; each test works under its own path.
	shared *zktest.Server
	// bin is the dsync binary, built once by TestMain.
	bin string
	// java runs Curator 5.4 (Debian's jars) for the interop tests.
	java *curator.Tool
)

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise: each runs dsync processes that wait on
// locks, timeouts and partitions, and at go test's default (the machine's
// cores) the package kept its two cores about 13 % busy and took 135s; at 8,
// 43s.
const parallelTests = 8

func TestMain(m *testing.M) {
	// The default only: m.Run parses the command line after, and a
	// -parallel given there wins.
	flag.Set("test.parallel", fmt.Sprint(parallelTests))
	os.Exit(testMain(m))
}

// testMain starts the server, builds dsync and the Curator tool (all three
// at once), makes lockPath's parent, runs the tests and cleans up before
// looking for leaks.
func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dsync-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "dsync")

	var wg sync.WaitGroup
	var srvErr, buildErr, javaErr error
	wg.Go(func() { shared, srvErr = zktest.StartServer() })
	wg.Go(func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	wg.Go(func() {
		jdir := filepath.Join(dir, "curator")
		if javaErr = os.Mkdir(jdir, 0o755); javaErr == nil {
			java, javaErr = curator.Build(jdir)
		}
	})
	wg.Wait()
	if err := errors.Join(srvErr, buildErr, javaErr); err != nil {
		if shared != nil {
			shared.Close()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// lockPath's parent: persistent, so that no test races with ZooKeeper's
	// removal of empty containers to make it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = zktest.CreatePersistent(ctx, []string{shared.Addr()}, "/dsync-cmd-test")
	cancel()
	if err != nil {
		shared.Close()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- ZooKeeper server log (last lines):\n%s\n", lastLines(shared.Log(), 40))
	}
	// The server goes before goleak looks: its process has a waiting goroutine.
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "zktest:", err)
	}
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockPath returns a lock path unique to the test and run. Its parent,
// /dsync-cmd-test, is persistent on the shared server (testMain).
func lockPath(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/dsync-cmd-test/%s-%d", name, time.Now().UnixNano())
}

// A proc is a running dsync binary.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
	done           chan struct{}
	err            error
}

// start runs the dsync binary with args. It is killed when the test ends.
func start(t testing.TB, args ...string) *proc {
	t.Helper()
	return startWith(t, nil, args...)
}

// startWith is start with setup, if not nil, called on p before it starts
// (to give it other stdio, say).
func startWith(t testing.TB, setup func(*proc), args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p := &proc{cmd: exec.CommandContext(ctx, bin, args...), done: make(chan struct{})}
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	p.cmd.Env = append(os.Environ(), "DSYNC_ZK=") // only -zk counts
	p.cmd.WaitDelay = 5 * time.Second
	if setup != nil {
		setup(p)
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for p to exit, at most d, and returns its exit code.
func (p *proc) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("dsync %s did not exit within %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(p.cmd.Args[1:], " "), d, &p.stdout, &p.stderr)
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("dsync: %v", p.err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// dsyncRun runs the dsync binary to completion (at most 60s) and returns its
// exit code, stdout and stderr.
func dsyncRun(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := start(t, args...)
	code = p.wait(t, time.Minute)
	return code, p.stdout.String(), p.stderr.String()
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if s := procState(pid); s != 0 {
		return s != 'Z'
	}
	return syscall.Kill(pid, 0) == nil // no /proc
}

// procState returns the state letter of process pid in /proc (R, S, T,
// Z…), or 0 if it is gone or there is no /proc.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2]
	}
	return 0
}

// parentOf returns the parent of process pid, from /proc.
func parentOf(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces, the state follows the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return ppid
}

// pids parses the whitespace-separated process ids in s.
func pids(t testing.TB, s string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid %q in %q", f, s)
		}
		out = append(out, n)
	}
	return out
}

// dial opens a Session to addr, closed when the test ends.
func dial(t testing.TB, addr string) *zkconn.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := zkconn.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatalf("Dial(%s) = %v", addr, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// observer is a plain connection for looking at what dsync left in
// ZooKeeper.
func observer(t testing.TB) *zk.Conn { return zktest.Observer(t, shared.Addr()) }

// awaitChildren blocks until path has exactly n children, using watches.
func awaitChildren(t testing.TB, c *zk.Conn, path string, n int) []string {
	t.Helper()
	return zktest.AwaitChildren(t, c, path, n)
}
