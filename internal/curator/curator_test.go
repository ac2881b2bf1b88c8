package curator

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// tool is built once for all tests by TestMain, and zkAddress is the client
// address of the ZooKeeper server (zkconn/zktest) that TestMain starts for
// all tests; each test works under its own path.
var (
	tool      *Tool
	zkAddress string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dsync-curator-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tool, err = Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// Short sessions, so that a killed JVM's nodes go away quickly.
	tool.Env = []string{"INTEROP_SESSION_MS=4000"}
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	zkAddress = srv.Addr()
	// The server and the classes go away after the tests and before goleak
	// looks for leaked goroutines.
	goleak.VerifyTestMain(runThenCleanup{m, func(code int) {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "--- ZooKeeper server log:\n%s\n", srv.Log())
		}
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "zktest:", err)
		}
		os.RemoveAll(dir)
	}})
}

// runThenCleanup runs the tests, then cleanup, inside goleak.VerifyTestMain.
type runThenCleanup struct {
	m       *testing.M
	cleanup func(code int)
}

func (r runThenCleanup) Run() int {
	code := r.m.Run()
	r.cleanup(code)
	return code
}

// zkAddr returns the address of the test ZooKeeper server.
func zkAddr(testing.TB) string { return zkAddress }

// testPath returns a ZooKeeper path unique to this test and run.
func testPath(t testing.TB) string {
	name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_")
	return fmt.Sprintf("/dsync-curator-test/%s-%d", name, time.Now().UnixNano())
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// dialZK connects go-zookeeper to the test server, closed at the end of t.
func dialZK(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(30 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			t.Fatalf("go-zookeeper: no session with %s", addr)
		}
	}
	return c
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hold starts a Holder that is killed at the end of t unless released.
func hold(t testing.TB, ctx context.Context, kind, addr, path string, max int) *Holder {
	t.Helper()
	h, err := tool.Hold(ctx, kind, addr, path, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	return h
}

func waitAcquired(t testing.TB, h *Holder) {
	t.Helper()
	select {
	case <-h.Acquired():
	case <-h.Done():
		t.Fatalf("hold exited before acquiring: %v", h.Release())
	case <-time.After(60 * time.Second):
		t.Fatal("hold did not acquire within 60s")
	}
}

func isAcquired(h *Holder) bool {
	select {
	case <-h.Acquired():
		return true
	default:
		return false
	}
}

var (
	uuid     = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	lockName = regexp.MustCompile(`^_c_` + uuid + `-lock-[0-9]{10}$`)
	leaseRE  = regexp.MustCompile(`^_c_` + uuid + `-lease-[0-9]{10}$`)
)

func TestBuild(t *testing.T) {
	if _, err := os.Stat(filepath.Join(tool.Dir, "Interop.class")); err != nil {
		t.Fatal(err)
	}
	// A second Build of the same directory reuses the classes.
	again, err := Build(tool.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.ClassPath != tool.ClassPath {
		t.Errorf("class path changed: %q vs %q", again.ClassPath, tool.ClassPath)
	}
}

func TestBuildMissingJars(t *testing.T) {
	t.Setenv("DSYNC_CURATOR_JARS", t.TempDir())
	_, err := Build(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "apt-get install default-jdk-headless libcurator-recipes-java") {
		t.Fatalf("Build without jars: got %v, want the install hint", err)
	}
}

func TestRunError(t *testing.T) {
	_, err := tool.Run(testContext(t), "no-such-command")
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("got %v, want an error carrying stderr", err)
	}
}

func TestMutexHandoff(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)

	h1 := hold(t, ctx, Mutex, addr, path, 0)
	waitAcquired(t, h1)
	if dir, name := filepath.Split(h1.Node()); dir != path+"/" || !lockName.MatchString(name) {
		t.Fatalf("holder node %q, want %s/_c_<uuid>-lock-<10 digits>", h1.Node(), path)
	}

	h2 := hold(t, ctx, Mutex, addr, path, 0) // returns once its node is queued
	out, err := tool.Run(ctx, "participants", Mutex, addr, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0] != h1.Node() || out[2] != "end" {
		t.Fatalf("participants = %q, want [%s <waiter> end]", out, h1.Node())
	}
	waiter := out[1]
	if isAcquired(h2) {
		t.Fatal("second holder acquired while the first holds the lock")
	}

	if err := h1.Release(); err != nil {
		t.Fatal(err)
	}
	waitAcquired(t, h2)
	if h2.Node() != waiter {
		t.Errorf("second holder's node %q, want %q", h2.Node(), waiter)
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestRunHold checks that "hold" with empty stdin acquires, then releases.
func TestRunHold(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	out, err := tool.Run(ctx, "hold", Semaphore, addr, path, "3")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0] != "waiting" || !strings.HasPrefix(out[1], "acquired "+path+"/leases/") || out[2] != "released" {
		t.Fatalf("hold printed %q, want waiting, acquired NODE, released", out)
	}
}

func TestCancelWaiter(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)

	h1 := hold(t, ctx, Mutex, addr, path, 0)
	waitAcquired(t, h1)
	h2 := hold(t, ctx, Mutex, addr, path, 0)
	if err := h2.Release(); err != nil { // abandons the wait
		t.Fatal(err)
	}
	if isAcquired(h2) {
		t.Fatal("canceled waiter reports acquired")
	}
	out, err := tool.Run(ctx, "participants", Mutex, addr, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0] != h1.Node() {
		t.Fatalf("participants after cancel = %q, want only %s", out, h1.Node())
	}
	if err := h1.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	h := hold(t, ctx, Mutex, addr, path, 0)
	waitAcquired(t, h)
	h.Kill()
	select {
	case <-h.Done():
	default:
		t.Fatal("Done not closed after Kill")
	}
	if err := h.Release(); err == nil {
		t.Fatal("Release after Kill succeeded")
	}
}

func TestLoopMutex(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	logfile := filepath.Join(t.TempDir(), "log")
	const procs, iter = 2, 20

	var wg sync.WaitGroup
	errs := make([]error, procs)
	outs := make([][]string, procs)
	for i := range procs {
		wg.Go(func() {
			outs[i], errs[i] = tool.Run(ctx, "loop", Mutex, addr, path, strconv.Itoa(iter), logfile)
		})
	}
	wg.Wait()
	for i := range procs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if want := []string{"done " + strconv.Itoa(iter)}; strings.Join(outs[i], "\n") != want[0] {
			t.Fatalf("loop printed %q, want %q", outs[i], want)
		}
	}
	checkLog(t, logfile, procs, iter)
}

// checkLog verifies that the enter/exit lines in logfile never overlap and
// that each of procs writers entered iter times.
func checkLog(t *testing.T, logfile string, procs, iter int) {
	t.Helper()
	f, err := os.Open(logfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	holder := ""
	counts := map[string]int{}
	n := 0
	for sc.Scan() {
		n++
		op, id, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(id, "java-") {
			t.Fatalf("line %d: malformed %q", n, sc.Text())
		}
		switch op {
		case "enter":
			if holder != "" {
				t.Fatalf("line %d: %s entered while %s holds the lock", n, id, holder)
			}
			holder = id
			counts[id]++
		case "exit":
			if holder != id {
				t.Fatalf("line %d: %s exited while %q holds the lock", n, id, holder)
			}
			holder = ""
		default:
			t.Fatalf("line %d: malformed %q", n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2*procs*iter || len(counts) != procs {
		t.Fatalf("log has %d lines from %d writers, want %d from %d", n, len(counts), 2*procs*iter, procs)
	}
	for id, c := range counts {
		if c != iter {
			t.Errorf("%s entered %d times, want %d", id, c, iter)
		}
	}
}

func TestSharedCount(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)

	out, err := tool.Run(ctx, "count-get", addr, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0] != "0" {
		t.Fatalf("count-get of a new count = %q, want [0]", out)
	}
	c := dialZK(t, addr)
	for _, v := range []int32{7, -2, 1 << 20} {
		out, err := tool.Run(ctx, "count-set", addr, path, strconv.Itoa(int(v)))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0] != "ok" {
			t.Fatalf("count-set printed %q, want [ok]", out)
		}
		out, err = tool.Run(ctx, "count-get", addr, path)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0] != strconv.Itoa(int(v)) {
			t.Fatalf("count-get = %q, want [%d]", out, v)
		}
		// The node holds the value as a 4-byte big-endian int.
		data, st, err := c.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != 4 || int32(binary.BigEndian.Uint32(data)) != v || st.EphemeralOwner != 0 {
			t.Fatalf("count node data % x (ephemeralOwner %d), want 4-byte big-endian %d, persistent", data, st.EphemeralOwner, v)
		}
	}
}

func TestBench(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	out, err := tool.Run(ctx, "bench", Mutex, addr, path, "2", "2")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^ops=([0-9]+) seconds=([0-9.]+) p50_us=([0-9]+) p99_us=([0-9]+)$`)
	if len(out) != 1 || !re.MatchString(out[0]) {
		t.Fatalf("bench printed %q", out)
	}
	m := re.FindStringSubmatch(out[0])
	ops, _ := strconv.Atoi(m[1])
	secs, _ := strconv.ParseFloat(m[2], 64)
	p50, _ := strconv.Atoi(m[3])
	p99, _ := strconv.Atoi(m[4])
	if ops < 1 || secs < 2 || p50 > p99 {
		t.Fatalf("implausible bench line %q", out[0])
	}
	t.Log(out[0])
}

// TestMutexLayout checks, with go-zookeeper, the nodes Curator's
// InterProcessMutex creates: EPHEMERAL_SEQUENTIAL children of PATH named
// _c_<uuid>-lock-<seq>, carrying the client's local address.
func TestMutexLayout(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	c := dialZK(t, addr)

	h := hold(t, ctx, Mutex, addr, path, 0)
	waitAcquired(t, h)
	kids, _, err := c.Children(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || path+"/"+kids[0] != h.Node() || !lockName.MatchString(kids[0]) {
		t.Fatalf("children of %s = %q, want [%s]", path, kids, h.Node())
	}
	data, st, err := c.Get(h.Node())
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner == 0 || len(data) == 0 {
		t.Fatalf("lock node: ephemeralOwner %d, data %q; want ephemeral with the client's address", st.EphemeralOwner, data)
	}
	t.Logf("lock node %s data %q", h.Node(), data)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	kids, _, err = c.Children(path)
	if err != nil && err != zk.ErrNoNode {
		t.Fatal(err)
	}
	if len(kids) != 0 {
		t.Fatalf("children after release = %q", kids)
	}
}

// TestSemaphoreLayout checks InterProcessSemaphoreV2's layout (PATH/locks,
// PATH/leases/_c_<uuid>-lease-<seq>) and that MAX leases are shared.
func TestSemaphoreLayout(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	c := dialZK(t, addr)

	a := hold(t, ctx, Semaphore, addr, path, 2)
	b := hold(t, ctx, Semaphore, addr, path, 2)
	waitAcquired(t, a)
	waitAcquired(t, b)
	for _, h := range []*Holder{a, b} {
		dir, name := filepath.Split(h.Node())
		if dir != path+"/leases/" || !leaseRE.MatchString(name) {
			t.Fatalf("lease node %q, want %s/leases/_c_<uuid>-lease-<10 digits>", h.Node(), path)
		}
		data, st, err := c.Get(h.Node())
		if err != nil {
			t.Fatal(err)
		}
		if st.EphemeralOwner == 0 || len(data) == 0 {
			t.Fatalf("lease node: ephemeralOwner %d, data %q", st.EphemeralOwner, data)
		}
	}
	third := hold(t, ctx, Semaphore, addr, path, 2)
	// The third holds the internal mutex (PATH/locks) and waits with a lease
	// node of its own.
	zktest.AwaitChildren(t, c, path+"/leases", 3)
	locks, _, err := c.Children(path + "/locks")
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 1 || !lockName.MatchString(locks[0]) {
		t.Fatalf("children of %s/locks = %q, want the third holder's lock node", path, locks)
	}
	out, err := tool.Run(ctx, "participants", Semaphore, addr, path, "2")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out[3] != "end" {
		t.Fatalf("participants = %q, want three lease names and end", out)
	}
	if isAcquired(third) {
		t.Fatal("third lease granted with max 2")
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	waitAcquired(t, third)
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if err := third.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphoreMutexHandoff(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	h1 := hold(t, ctx, SemaphoreMutex, addr, path, 0)
	waitAcquired(t, h1)
	if !strings.HasPrefix(h1.Node(), path+"/leases/") {
		t.Fatalf("semmutex node %q, want a lease under %s/leases", h1.Node(), path)
	}
	h2 := hold(t, ctx, SemaphoreMutex, addr, path, 0)
	if isAcquired(h2) {
		t.Fatal("second semmutex holder acquired while the first holds it")
	}
	if err := h1.Release(); err != nil {
		t.Fatal(err)
	}
	waitAcquired(t, h2)
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
}
