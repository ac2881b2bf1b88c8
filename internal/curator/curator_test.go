package curator

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	runLoops(t, Mutex, 2, 20, nil)
}

// runLoops runs procs "loop kind" processes at once, ITER iter, on one path
// and log file, process i with the arguments max(i) after LOGFILE (none if
// max is nil), and checks their log.
func runLoops(t *testing.T, kind string, procs, iter int, max func(i int) []string) {
	t.Helper()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	logfile := filepath.Join(t.TempDir(), "log")

	var wg sync.WaitGroup
	errs := make([]error, procs)
	outs := make([][]string, procs)
	for i := range procs {
		args := []string{"loop", kind, addr, path, strconv.Itoa(iter), logfile}
		if max != nil {
			args = append(args, max(i)...)
		}
		wg.Go(func() {
			outs[i], errs[i] = tool.Run(ctx, args...)
		})
	}
	wg.Wait()
	for i := range procs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if want := []string{"done " + strconv.Itoa(iter)}; strings.Join(outs[i], "\n") != want[0] {
			t.Fatalf("loop %s printed %q, want %q", kind, outs[i], want)
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
	if len(out) != 2 || out[0] != "ready" || !re.MatchString(out[1]) {
		t.Fatalf("bench printed %q; want ready, then the report", out)
	}
	m := re.FindStringSubmatch(out[1])
	ops, _ := strconv.Atoi(m[1])
	secs, _ := strconv.ParseFloat(m[2], 64)
	p50, _ := strconv.Atoi(m[3])
	p99, _ := strconv.Atoi(m[4])
	if ops < 1 || secs < 2 || p50 > p99 {
		t.Fatalf("implausible bench line %q", out[1])
	}
	t.Log(out[1])
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

// TestHoldCount checks HoldCount: the semaphore's maximum is the SharedCount
// at count, followed while the holder waits. With the count at 1 a second
// holder queues behind the first; raising the count to 2 grants it while the
// first still holds.
func TestHoldCount(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	count := path + "-count"
	setCount := func(v int) {
		t.Helper()
		out, err := tool.Run(ctx, "count-set", addr, count, strconv.Itoa(v))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0] != "ok" {
			t.Fatalf("count-set printed %q, want [ok]", out)
		}
	}
	holdCount := func() *Holder {
		t.Helper()
		h, err := tool.HoldCount(ctx, addr, path, count)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Kill)
		return h
	}
	c := dialZK(t, addr)

	setCount(1)
	a := holdCount()
	waitAcquired(t, a)
	if dir, name := filepath.Split(a.Node()); dir != path+"/leases/" || !leaseRE.MatchString(name) {
		t.Fatalf("lease node %q, want %s/leases/_c_<uuid>-lease-<10 digits>", a.Node(), path)
	}
	b := holdCount()
	zktest.AwaitChildren(t, c, path+"/leases", 2)
	if isAcquired(b) {
		t.Fatal("second lease granted with the count at 1")
	}
	setCount(2)
	waitAcquired(t, b)
	// Both hold at once: the first lease is still there.
	if ok, _, err := c.Exists(a.Node()); err != nil || !ok {
		t.Fatalf("first lease %s after the second was granted: exists %v, %v", a.Node(), ok, err)
	}
	for _, h := range []*Holder{a, b} {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}
	zktest.AwaitChildren(t, c, path+"/leases", 0)
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

var (
	readName  = regexp.MustCompile(`^_c_` + uuid + `-__READ__[0-9]{10}$`)
	writeName = regexp.MustCompile(`^_c_` + uuid + `-__WRIT__[0-9]{10}$`)
)

// holdRevocable starts a revocable Holder that is killed at the end of t
// unless it ended before.
func holdRevocable(t testing.TB, ctx context.Context, kind, addr, path string) *Holder {
	t.Helper()
	h, err := tool.HoldRevocable(ctx, kind, addr, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	return h
}

func waitRevoked(t testing.TB, h *Holder) {
	t.Helper()
	select {
	case <-h.Revoked():
	case <-h.Done():
		t.Fatalf("hold exited without printing revoked: %v", h.Release())
	case <-time.After(60 * time.Second):
		t.Fatal("hold was not revoked within 60s")
	}
}

// participants runs "participants kind addr path" and returns the nodes it
// printed before "end".
func participants(t testing.TB, ctx context.Context, kind, addr, path string) []string {
	t.Helper()
	out, err := tool.Run(ctx, "participants", kind, addr, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 || out[len(out)-1] != "end" {
		t.Fatalf("participants %s printed %q, want nodes then end", kind, out)
	}
	return out[:len(out)-1]
}

func checkNode(t testing.TB, node, dir string, name *regexp.Regexp) {
	t.Helper()
	if d, n := filepath.Split(node); d != dir+"/" || !name.MatchString(n) {
		t.Fatalf("node %q, want a child of %s matching %s", node, dir, name)
	}
}

// TestReadersShare checks that two Curator read locks are held at once, and
// what participants prints for each side and for the whole queue.
func TestReadersShare(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)

	r1 := hold(t, ctx, Read, addr, path, 0)
	r2 := hold(t, ctx, Read, addr, path, 0)
	waitAcquired(t, r1)
	waitAcquired(t, r2)
	for _, r := range []*Holder{r1, r2} {
		checkNode(t, r.Node(), path, readName)
		if got := r.Nodes(); len(got) != 1 || got[0] != r.Node() {
			t.Fatalf("Nodes() = %q, want [%s]", got, r.Node())
		}
	}
	// Both hold: either may have queued first, so compare as sets.
	want := []string{r1.Node(), r2.Node()}
	slices.Sort(want)
	for _, kind := range []string{Read, ReadWrite} {
		got := participants(t, ctx, kind, addr, path)
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("participants %s = %q, want %q", kind, got, want)
		}
	}
	if got := participants(t, ctx, Write, addr, path); len(got) != 0 {
		t.Errorf("participants write = %q, want none", got)
	}
	if err := r1.Release(); err != nil {
		t.Fatal(err)
	}
	if err := r2.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterWaitsForReader checks that a write lock queues behind a held read
// lock and gets it on its release, and that a reader that queued behind the
// writer waits for the writer.
func TestWriterWaitsForReader(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)

	r1 := hold(t, ctx, Read, addr, path, 0)
	waitAcquired(t, r1)
	w := hold(t, ctx, Write, addr, path, 0) // returns once its node is queued
	r2 := hold(t, ctx, Read, addr, path, 0)

	queue := participants(t, ctx, ReadWrite, addr, path)
	if len(queue) != 3 || queue[0] != r1.Node() {
		t.Fatalf("participants rw = %q, want [%s <writer> <reader>]", queue, r1.Node())
	}
	checkNode(t, queue[1], path, writeName)
	checkNode(t, queue[2], path, readName)
	if got := participants(t, ctx, Write, addr, path); !slices.Equal(got, queue[1:2]) {
		t.Errorf("participants write = %q, want %q", got, queue[1:2])
	}
	if got, want := participants(t, ctx, Read, addr, path), []string{queue[0], queue[2]}; !slices.Equal(got, want) {
		t.Errorf("participants read = %q, want %q", got, want)
	}
	if isAcquired(w) {
		t.Fatal("writer acquired while a reader holds the lock")
	}
	if isAcquired(r2) {
		t.Fatal("reader queued behind a writer acquired")
	}

	if err := r1.Release(); err != nil {
		t.Fatal(err)
	}
	waitAcquired(t, w)
	if w.Node() != queue[1] {
		t.Errorf("writer's node %q, want %q", w.Node(), queue[1])
	}
	if isAcquired(r2) {
		t.Fatal("reader acquired while the writer holds the lock")
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	waitAcquired(t, r2)
	if r2.Node() != queue[2] {
		t.Errorf("second reader's node %q, want %q", r2.Node(), queue[2])
	}
	if err := r2.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestRevocable revokes a revocable Curator hold through the revoke command
// (Revoker.attemptRevoke): the holder lets go and exits, and the waiter
// behind it gets the lock.
func TestRevocable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, waiter string
		name         *regexp.Regexp
	}{
		{Mutex, Mutex, lockName},
		{Read, Write, readName},
		{Write, Read, writeName},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
			c := dialZK(t, addr)

			h := holdRevocable(t, ctx, tc.kind, addr, path)
			waitAcquired(t, h)
			checkNode(t, h.Node(), path, tc.name)
			// A revocable lock's node carries empty data.
			data, _, err := c.Get(h.Node())
			if err != nil {
				t.Fatal(err)
			}
			if len(data) != 0 {
				t.Fatalf("revocable lock node data %q, want empty", data)
			}
			waiter := hold(t, ctx, tc.waiter, addr, path, 0)
			if isAcquired(waiter) {
				t.Fatalf("%s waiter acquired while a %s holds the lock", tc.waiter, tc.kind)
			}

			if err := tool.Revoke(ctx, addr, h.Node()); err != nil {
				t.Fatal(err)
			}
			waitRevoked(t, h)
			waitAcquired(t, waiter)
			<-h.Done()
			if err := h.Release(); err != nil {
				t.Fatalf("revoked holder: %v", err)
			}
			if ok, _, err := c.Exists(h.Node()); err != nil || ok {
				t.Fatalf("revoked holder's node exists: %v, %v", ok, err)
			}
			if err := waiter.Release(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRevokeMissingNode checks that revoking a node that does not exist is a
// no-op, as Revoker.attemptRevoke is.
func TestRevokeMissingNode(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	if err := tool.Revoke(ctx, addr, path+"/_c_none-lock-0000000000"); err != nil {
		t.Fatal(err)
	}
}

// TestMulti checks that InterProcessMultiLock takes its paths' mutexes in the
// given order and holds a node under each.
func TestMulti(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	c := dialZK(t, addr)
	a, b := path+"/a", path+"/b"
	paths := a + "," + b

	blocker := hold(t, ctx, Mutex, addr, b, 0)
	waitAcquired(t, blocker)
	m := hold(t, ctx, Multi, addr, paths, 0)
	// The multi lock queues under b only once it holds a.
	zktest.AwaitChildren(t, c, b, 2)
	if kids, _, err := c.Children(a); err != nil || len(kids) != 1 || !lockName.MatchString(kids[0]) {
		t.Fatalf("children of %s = %q (%v), want the multi lock's node", a, kids, err)
	}
	if isAcquired(m) {
		t.Fatal("multi lock acquired while another process holds one of its paths")
	}

	if err := blocker.Release(); err != nil {
		t.Fatal(err)
	}
	waitAcquired(t, m)
	nodes := m.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("multi nodes = %q (Node %q), want one per path", nodes, m.Node())
	}
	checkNode(t, nodes[0], a, lockName)
	checkNode(t, nodes[1], b, lockName)
	if got := participants(t, ctx, Multi, addr, paths); !slices.Equal(got, nodes) {
		t.Errorf("participants multi = %q, want %q", got, nodes)
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		kids, _, err := c.Children(p)
		if err != nil && err != zk.ErrNoNode {
			t.Fatal(err)
		}
		if len(kids) != 0 {
			t.Fatalf("children of %s after release = %q", p, kids)
		}
	}
}

func TestBenchReadWrite(t *testing.T) {
	t.Parallel()
	addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
	out, err := tool.Run(ctx, "bench", ReadWrite, addr, path, "2", "1", "50")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^ops=([0-9]+) seconds=([0-9.]+) p50_us=([0-9]+) p99_us=([0-9]+)` +
		` read_ops=([0-9]+) read_p50_us=([0-9]+) read_p99_us=([0-9]+)` +
		` write_ops=([0-9]+) write_p50_us=([0-9]+) write_p99_us=([0-9]+)$`)
	if len(out) != 2 || out[0] != "ready" || !re.MatchString(out[1]) {
		t.Fatalf("bench rw printed %q; want ready, then the report", out)
	}
	m := re.FindStringSubmatch(out[1])
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		if i == 2 {
			continue
		}
		n[i], _ = strconv.Atoi(m[i])
	}
	secs, _ := strconv.ParseFloat(m[2], 64)
	ops, p50, p99 := n[1], n[3], n[4]
	reads, rp50, rp99 := n[5], n[6], n[7]
	writes, wp50, wp99 := n[8], n[9], n[10]
	// With half of some hundreds of cycles each way, neither kind is missing.
	if secs < 1 || ops != reads+writes || reads < 1 || writes < 1 || p50 > p99 || rp50 > rp99 || wp50 > wp99 {
		t.Fatalf("implausible bench rw line %q", out[1])
	}
	t.Log(out[1])
}

var latchName = regexp.MustCompile(`^_c_` + uuid + `-latch-[0-9]{10}$`)

// lead starts a Leader that is killed at the end of t unless it resigned.
func lead(t testing.TB, ctx context.Context, kind, addr, path, id string) *Leader {
	t.Helper()
	l, err := tool.Lead(ctx, kind, addr, path, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Kill)
	return l
}

// nextEvent returns l's next event, which must be a leader event if leader
// is true, a notleader event otherwise.
func nextEvent(t testing.TB, l *Leader, leader bool) LeaderEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := l.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.Leader != leader {
		t.Fatalf("lead reported %+v, want Leader %v", e, leader)
	}
	return e
}

// wantLeader checks that "leader kind" names id as the leader of path, or
// no one if id is empty.
func wantLeader(t testing.TB, ctx context.Context, kind, addr, path, id string) {
	t.Helper()
	got, ok, err := tool.LeaderID(ctx, kind, addr, path)
	if err != nil {
		t.Fatal(err)
	}
	if got != id || ok != (id != "") {
		t.Fatalf("leader %s = %q, %v; want %q", kind, got, ok, id)
	}
}

// checkData checks that node is ephemeral and carries data.
func checkData(t testing.TB, c *zk.Conn, node, data string) {
	t.Helper()
	got, st, err := c.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != data || st.EphemeralOwner == 0 {
		t.Fatalf("%s: data %q, ephemeralOwner %d; want %q, ephemeral", node, got, st.EphemeralOwner, data)
	}
}

// TestElection runs two participants of each recipe: LeaderLatch (latch-
// nodes) and LeaderSelector (an InterProcessMutex's lock- nodes). The first
// in line leads alone, "leader" and "participants" see the recipe's layout
// with the ids as node data, and the second leads once the first resigns;
// a resigned participant reports nothing more.
func TestElection(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		listKind string // the "participants" kind that lists the recipe's nodes
		nodeName *regexp.Regexp
	}{
		{Latch, Latch, latchName},
		{Selector, Mutex, lockName},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			addr, path, ctx := zkAddr(t), testPath(t), testContext(t)
			c := dialZK(t, addr)
			wantLeader(t, ctx, tc.kind, addr, path, "")

			a := lead(t, ctx, tc.kind, addr, path, "alice")
			ea := nextEvent(t, a, true)
			checkNode(t, ea.Node, path, tc.nodeName)
			b := lead(t, ctx, tc.kind, addr, path, "bob") // returns once its node is queued
			wantLeader(t, ctx, tc.kind, addr, path, "alice")
			nodes := participants(t, ctx, tc.listKind, addr, path)
			if len(nodes) != 2 || nodes[0] != ea.Node {
				t.Fatalf("participants %s = %q, want [%s <bob's node>]", tc.listKind, nodes, ea.Node)
			}
			checkNode(t, nodes[1], path, tc.nodeName)
			checkData(t, c, nodes[0], "alice")
			checkData(t, c, nodes[1], "bob")
			if ev := b.Events(); len(ev) != 0 {
				t.Fatalf("second participant reported %+v while the first leads", ev)
			}

			if err := a.Resign(); err != nil {
				t.Fatal(err)
			}
			eb := nextEvent(t, b, true)
			if eb.Node != nodes[1] || !eb.Time.After(ea.Time) {
				t.Fatalf("second leader event %+v, want node %s after %v", eb, nodes[1], ea.Time)
			}
			if ev := a.Events(); len(ev) != 1 {
				t.Fatalf("resigned participant reported %+v, want its leader event alone", ev)
			}
			wantLeader(t, ctx, tc.kind, addr, path, "bob")
			if got := participants(t, ctx, tc.listKind, addr, path); !slices.Equal(got, nodes[1:]) {
				t.Fatalf("participants %s after resign = %q, want %q", tc.listKind, got, nodes[1:])
			}
			if err := b.Resign(); err != nil {
				t.Fatal(err)
			}
			if ev := b.Events(); len(ev) != 1 {
				t.Fatalf("resigned participant reported %+v, want its leader event alone", ev)
			}
			wantLeader(t, ctx, tc.kind, addr, path, "")
		})
	}
}

// forRecipes runs f, in parallel, once for each leader recipe (Latch,
// Selector), with a test server's address, a path of its own, the test's
// context and an observer connection.
func forRecipes(t *testing.T, f func(t *testing.T, kind, addr, path string, ctx context.Context, c *zk.Conn)) {
	t.Parallel()
	for _, kind := range []string{Latch, Selector} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			addr := zkAddr(t)
			f(t, kind, addr, testPath(t), testContext(t), dialZK(t, addr))
		})
	}
}

// TestLeadResignWaiting checks that a participant that resigns before it
// leads leaves the line: the leader is unchanged and its node is gone.
func TestLeadResignWaiting(t *testing.T) {
	forRecipes(t, func(t *testing.T, kind, addr, path string, ctx context.Context, c *zk.Conn) {
		a := lead(t, ctx, kind, addr, path, "alice")
		ea := nextEvent(t, a, true)
		b := lead(t, ctx, kind, addr, path, "bob")
		if err := b.Resign(); err != nil {
			t.Fatal(err)
		}
		if ev := b.Events(); len(ev) != 0 {
			t.Fatalf("participant that resigned in line reported %+v", ev)
		}
		if kids, _, err := c.Children(path); err != nil || len(kids) != 1 || path+"/"+kids[0] != ea.Node {
			t.Fatalf("children of %s = %q (%v), want the leader's node alone", path, kids, err)
		}
		wantLeader(t, ctx, kind, addr, path, "alice")
		if err := a.Resign(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLeadTerm sends SIGTERM to a leader: its shutdown hook resigns before
// the JVM exits, so the leader's node is gone by the time the process has
// exited (a killed JVM's node would stay until its session expired), and the
// participant in line leads.
func TestLeadTerm(t *testing.T) {
	forRecipes(t, func(t *testing.T, kind, addr, path string, ctx context.Context, c *zk.Conn) {
		a := lead(t, ctx, kind, addr, path, "alice")
		ea := nextEvent(t, a, true)
		b := lead(t, ctx, kind, addr, path, "bob")
		if err := a.Term(); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := c.Exists(ea.Node); err != nil || ok {
			t.Fatalf("leader's node %s after its JVM exited on SIGTERM: exists %v (%v); want it gone", ea.Node, ok, err)
		}
		if eb := nextEvent(t, b, true); !eb.Time.After(ea.Time) {
			t.Fatalf("second leader event %+v, want it after %v", eb, ea.Time)
		}
		if ev := a.Events(); len(ev) != 1 {
			t.Fatalf("terminated %s reported %+v, want its leader event alone", kind, ev)
		}
		wantLeader(t, ctx, kind, addr, path, "bob")
		if err := a.Term(); err != nil {
			t.Fatalf("second Term: %v; want the first one's outcome, nil", err)
		}
		if err := b.Resign(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLeadSuspended cuts a leader's connection: Curator suspends it, and
// both recipes report the loss. The session survives, so the latch, whose
// node is still first, leads again on reconnection; the selector, without
// autoRequeue, gives up its lock and stays out.
func TestLeadSuspended(t *testing.T) {
	forRecipes(t, func(t *testing.T, kind, addr, path string, ctx context.Context, c *zk.Conn) {
		proxy := zktest.NewProxy(t, addr)
		l := lead(t, ctx, kind, proxy.Addr(), path, "alice")
		e := nextEvent(t, l, true)
		proxy.Cut()
		lost := nextEvent(t, l, false)
		if !lost.Time.After(e.Time) {
			t.Fatalf("notleader at %v, not after leader at %v", lost.Time, e.Time)
		}
		if kind == Latch {
			if again := nextEvent(t, l, true); again.Node != e.Node {
				t.Fatalf("latch leads again with %s, want its node %s", again.Node, e.Node)
			}
		} else {
			zktest.AwaitChildren(t, c, path, 0)
		}
		if err := l.Resign(); err != nil {
			t.Fatal(err)
		}
		want := 2 // leader, notleader
		if kind == Latch {
			want = 3 // and leader again
		}
		if ev := l.Events(); len(ev) != want {
			t.Fatalf("%s reported %+v, want %d events", kind, ev, want)
		}
	})
}

// TestLoopLatch checks that LeaderLatch participants, each taking turns with
// a new latch as "loop latch" does, never lead at once (and never lose
// leadership: no "lost" line).
func TestLoopLatch(t *testing.T) {
	t.Parallel()
	runLoops(t, Latch, 2, 20, func(i int) []string { return []string{"java" + strconv.Itoa(i)} })
}
