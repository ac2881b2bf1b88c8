package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaderScript logs "start ID TOKEN" to $2/log as it starts leading (one
// write each, O_APPEND) and says "leading" on stdout, then waits until
// $2/ID.go exists and logs "end ID"; on SIGTERM it logs "term ID" and exits
// 0. $1 is ID.
const leaderScript = `trap 'echo "term $1" >> "$2/log"; exit 0' TERM
echo "start $1 $DSYNC_TOKEN" >> "$2/log"
echo leading
while [ ! -e "$2/$1.go" ]; do sleep 0.05; done
echo "end $1" >> "$2/log"`

// latchNode is the name of a LeaderLatch node: _c_<uuid>-latch-<sequence>.
var latchNode = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-latch-[0-9]{10}$`)

// TestElectTakesTurns: three "dsync elect" wait in line in the order they
// started; one CMD runs at a time; when the leader's CMD exits, or the
// leader dsync gets SIGTERM, the next one leads. "dsync elect -listen" prints
// each leader in turn.
func TestElectTakesTurns(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	log := filepath.Join(dir, "log")
	obs := observer(t)
	listener := start(t, "elect", "-listen", "-zk", shared.Addr(), path)
	ids := []string{"A", "B", "C"}
	procs := map[string]*proc{}
	for i, id := range ids {
		procs[id] = start(t, "elect", "-id", id, "-zk", shared.Addr(), path, "--", "sh", "-c", leaderScript, "sh", id, dir)
		awaitChildren(t, obs, path, i+1) // in line in this order
	}

	// The nodes: LeaderLatch's names, the ids as data, in sequence order.
	kids := awaitChildren(t, obs, path, 3)
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	for i, k := range kids {
		if !latchNode.MatchString(k) {
			t.Errorf("node %q; want _c_<uuid>-latch-<sequence>", k)
		}
		if got := dataOf(t, obs, path+"/"+k); got != ids[i] {
			t.Errorf("node %d data %q; want %q", i, got, ids[i])
		}
	}

	lead := func(id string) {
		t.Helper()
		if !listener.stdout.Await(id+"\t", 30*time.Second) {
			t.Fatalf("dsync elect -listen did not print %s; stdout:\n%s\nstderr:\n%s", id, &listener.stdout, &listener.stderr)
		}
		if !procs[id].stdout.Await("leading", 30*time.Second) {
			t.Fatalf("CMD of %s did not start; stderr:\n%s", id, &procs[id].stderr)
		}
	}
	lead("A")
	if got := strings.Count(readFile(t, log), "start"); got != 1 {
		t.Fatalf("%d CMDs started; want 1:\n%s", got, readFile(t, log))
	}
	// A's CMD exits: B leads.
	touch(t, filepath.Join(dir, "A.go"))
	if code := procs["A"].wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync elect A exited %d; want 0; stderr:\n%s", code, &procs["A"].stderr)
	}
	lead("B")
	// B's dsync gets SIGTERM: forwarded, CMD exits, C leads.
	if err := procs["B"].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := procs["B"].wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync elect B exited %d; want CMD's 0; stderr:\n%s", code, &procs["B"].stderr)
	}
	lead("C")
	touch(t, filepath.Join(dir, "C.go"))
	if code := procs["C"].wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync elect C exited %d; want 0; stderr:\n%s", code, &procs["C"].stderr)
	}

	// One CMD at a time, in line order, each with a greater token.
	lines := strings.Split(strings.TrimSpace(readFile(t, log)), "\n")
	var got []string
	var tokens []int64
	for _, l := range lines {
		f := strings.Fields(l)
		got = append(got, f[0]+" "+f[1])
		if f[0] == "start" {
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil || n <= 0 {
				t.Errorf("DSYNC_TOKEN in %q; want a positive token", l)
			}
			tokens = append(tokens, n)
		}
	}
	if want := "[start A end A start B term B start C end C]"; fmt.Sprint(got) != want {
		t.Errorf("log = %v; want %s", got, want)
	}
	if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
		t.Errorf("tokens %v; want them growing", tokens)
	}

	if err := listener.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := listener.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync elect -listen exited %d after SIGINT; want 0; stderr:\n%s", code, &listener.stderr)
	}
	var want []string
	for i, id := range ids {
		want = append(want, id+"\t"+kids[i])
	}
	if got := strings.Split(strings.TrimSpace(listener.stdout.String()), "\n"); !slices.Equal(got, want) {
		t.Errorf("dsync elect -listen printed %q; want %q", got, want)
	}
	awaitChildren(t, obs, path, 0)
}

// TestElectLostKillsCMD: the leader's node, deleted behind its back, ends
// its leadership: CMD's group is terminated and dsync exits 3.
func TestElectLostKillsCMD(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	p := start(t, "elect", "-zk", shared.Addr(), path, "--", "sh", "-c", readyScript, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	obs := observer(t)
	kids := awaitChildren(t, obs, path, 1)
	if err := obs.Delete(path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitLost {
		t.Fatalf("dsync elect exited %d; want %d; stderr:\n%s", code, exitLost, &p.stderr)
	}
	if want := "dsync: leadership of " + path + " lost: "; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr = %q; want it to contain %q", &p.stderr, want)
	}
	// dsync exits once CMD's group is gone.
	for _, pid := range ps {
		if alive(pid) {
			t.Errorf("process %d of CMD outlived dsync", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestElectSelector: with -selector, the participant's node is in Curator
// LeaderSelector's layout: an InterProcessMutex's lock- node, data the id.
func TestElectSelector(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	p := start(t, "elect", "-selector", "-id", "sel", "-zk", shared.Addr(), path, "--", "sh", "-c", readyScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	obs := observer(t)
	kids := awaitChildren(t, obs, path, 1)
	if !regexp.MustCompile(`^_c_[0-9a-f-]{36}-lock-[0-9]{10}$`).MatchString(kids[0]) {
		t.Errorf("node %q; want _c_<uuid>-lock-<sequence>", kids[0])
	}
	if got := dataOf(t, obs, path+"/"+kids[0]); got != "sel" {
		t.Errorf("node data %q; want the id sel", got)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("dsync elect exited %d; want CMD's %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), &p.stderr)
	}
	awaitChildren(t, obs, path, 0)
}

// TestLsElection lists the leader first, then the participant waiting, with
// their ids.
func TestLsElection(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	leader := start(t, "elect", "-id", "the leader", "-zk", shared.Addr(), path, "--", "sh", "-c", readyScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	waiter := start(t, "elect", "-id", "next", "-zk", shared.Addr(), path, "--", "true")
	awaitChildren(t, observer(t), path, 2)

	rows := lsRows(t, path)
	var got []string
	for _, r := range rows {
		got = append(got, r[0]+" "+r[4])
		if !latchNode.MatchString(r[1]) {
			t.Errorf("node %q; want _c_<uuid>-latch-<sequence>", r[1])
		}
	}
	if want := "[leader the leader waiter next]"; fmt.Sprint(got) != want {
		t.Errorf("dsync ls rows %v; want %s", got, want)
	}
	if len(rows) == 2 && rows[0][2] == rows[1][2] {
		t.Errorf("sessions %s and %s; want two", rows[0][2], rows[1][2])
	}
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := leader.wait(t, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("leader exited %d; want CMD's %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), &leader.stderr)
	}
	if code := waiter.wait(t, 30*time.Second); code != 0 {
		t.Errorf("waiter exited %d; want 0; stderr:\n%s", code, &waiter.stderr)
	}
}

// readFile returns the content of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// touch creates the empty file path.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
