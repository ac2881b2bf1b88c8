package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// critical is a shell command that logs its entry and exit (one write(2)
// each, O_APPEND) to the file $1, with a pause in between.
const critical = `echo "enter $$" >> "$1"; sleep 0.2; echo "exit $$" >> "$1"`

// maxInside checks that log (written by critical) has each of n runs enter
// then exit, and returns the most runs inside at once.
func maxInside(t *testing.T, log string, n int) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("log has %d lines; want %d:\n%s", len(lines), 2*n, b)
	}
	in := map[string]bool{}
	most := 0
	for _, l := range lines {
		what, pid, _ := strings.Cut(l, " ")
		switch what {
		case "enter":
			in[pid] = true
		case "exit":
			if !in[pid] {
				t.Fatalf("exit before enter of %s:\n%s", pid, b)
			}
			delete(in, pid)
		}
		most = max(most, len(in))
	}
	if len(in) != 0 {
		t.Fatalf("never exited: %v\n%s", in, b)
	}
	return most
}

// together runs dsync with args (a subcommand, its flags and PATH) runs
// times at once, each running critical, and returns the most runs that were
// inside at once.
func together(t *testing.T, runs int, args ...string) int {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	procs := make([]*proc, runs)
	for i := range procs {
		procs[i] = start(t, slices.Concat(args, []string{"--", "sh", "-c", critical, "sh", log})...)
	}
	for _, p := range procs {
		if code := p.wait(t, time.Minute); code != 0 {
			t.Fatalf("dsync %s exited %d; stderr:\n%s", args[0], code, &p.stderr)
		}
	}
	return maxInside(t, log, runs)
}

func TestLockExcludes(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	if most := together(t, 3, "lock", "-zk", shared.Addr(), path); most != 1 {
		t.Fatalf("%d runs held the lock at once; want 1", most)
	}
	if kids := awaitChildren(t, observer(t), path, 0); len(kids) != 0 {
		t.Fatalf("nodes left: %v", kids)
	}
}

func TestLockExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  []string
		want int
	}{
		{"exit 0", []string{"true"}, 0},
		{"exit 7", []string{"sh", "-c", "exit 7"}, 7},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + int(syscall.SIGKILL)},
		{"not found", []string{"/nonexistent/cmd"}, exitNotFound},
		{"not executable", []string{"/dev/null"}, exitNoExec},
	}
	path := lockPath(t)
	for _, tt := range tests {
		args := append([]string{"lock", "-zk", shared.Addr(), path, "--"}, tt.cmd...)
		if code, _, stderr := dsyncRun(t, args...); code != tt.want {
			t.Errorf("%s: dsync exited %d; want %d; stderr:\n%s", tt.name, code, tt.want, stderr)
		}
	}
}

func TestLockEnvironment(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, stdout, stderr := dsyncRun(t, "lock", "-zk", shared.Addr(), path, "--",
		"sh", "-c", `echo "$DSYNC_PATH $DSYNC_TOKEN"`)
	if code != 0 || stderr != "" {
		t.Fatalf("dsync exited %d; want 0 and nothing on stderr; stderr:\n%s", code, stderr)
	}
	gotPath, tok, _ := strings.Cut(strings.TrimSpace(stdout), " ")
	if n, err := strconv.ParseInt(tok, 10, 64); gotPath != path || err != nil || n <= 0 {
		t.Fatalf("CMD saw DSYNC_PATH DSYNC_TOKEN = %q; want %q and a positive token", stdout, path)
	}
}

// holdMutex locks path in this process until the test ends or the returned
// function is called.
func holdMutex(t *testing.T, path string) (unlock func()) {
	t.Helper()
	m := dsync.NewMutex(dial(t, shared.Addr()), path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() { once.Do(m.Unlock) }
	t.Cleanup(unlock)
	return unlock
}

func TestLockTryHeld(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	unlock := holdMutex(t, path)
	marker := filepath.Join(t.TempDir(), "ran")
	begin := time.Now()
	code, _, stderr := dsyncRun(t, "lock", "-try", "-zk", shared.Addr(), path, "--", "touch", marker)
	if code != exitFail || !strings.Contains(stderr, "dsync: "+path+" is held") {
		t.Fatalf("dsync lock -try on a held lock: exit %d, stderr %q; want 1 and %q", code, stderr, "dsync: "+path+" is held")
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("dsync lock -try took %v", d)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran without the lock")
	}
	if kids := awaitChildren(t, observer(t), path, 1); len(kids) != 1 {
		t.Fatalf("children %v; want the holder only", kids)
	}
	unlock()
	awaitChildren(t, observer(t), path, 0) // Unlock does not wait for its delete; dsync lock -try is another session
	if code, _, stderr := dsyncRun(t, "lock", "-try", "-zk", shared.Addr(), path, "--", "touch", marker); code != 0 {
		t.Fatalf("dsync lock -try on a free lock: exit %d; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("CMD did not run: %v", err)
	}
}

func TestLockTimeout(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	unlock := holdMutex(t, path)
	begin := time.Now()
	code, _, stderr := dsyncRun(t, "lock", "-timeout", "300ms", "-zk", shared.Addr(), path, "--", "true")
	d := time.Since(begin)
	want := "dsync: timed out waiting for " + path
	if code != exitFail || !strings.Contains(stderr, want) {
		t.Fatalf("dsync lock -timeout 300ms on a held lock: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("dsync lock -timeout 300ms gave up after %v", d)
	}
	if kids := awaitChildren(t, observer(t), path, 1); len(kids) != 1 {
		t.Fatalf("children %v; want the holder only", kids)
	}

	// -timeout bounds the wait only, not the hold (a bound with room for a
	// process started on a loaded machine to dial and lock).
	unlock()
	code, _, stderr = dsyncRun(t, "lock", "-timeout", "3s", "-zk", shared.Addr(), path, "--", "sleep", "3.3")
	if code != 0 {
		t.Fatalf("dsync lock -timeout 3s -- sleep 3.3 on a free lock: exit %d; stderr:\n%s", code, stderr)
	}
}

// trapScript traps TERM (writing $2/marker and exiting 0), writes $2/ready
// and waits. The sleep runs in the background so that the shell runs the trap
// at once.
const trapScript = `trap 'echo term > "$1/marker"; exit 0' TERM
sleep 60 &
echo ready > "$1/ready"
wait`

func TestLockForwardsSIGTERM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", trapScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || string(b) != "term\n" {
		t.Fatalf("marker = %q, %v; want CMD's trap to have run", b, err)
	}
}

func TestLockInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	holdMutex(t, path)
	obs := observer(t)
	p := start(t, "lock", "-zk", shared.Addr(), path, "--", "true")
	awaitChildren(t, obs, path, 2) // dsync is in line
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 128+int(syscall.SIGINT) {
		t.Fatalf("dsync exited %d; want %d; stderr:\n%s", code, 128+int(syscall.SIGINT), &p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "interrupted") {
		t.Errorf("stderr = %q; want it to say interrupted", &p.stderr)
	}
	awaitChildren(t, obs, path, 1) // its node is gone
}

// readyScript writes "$$ $!" (the shell's and its sleep's pids) to $1/ready,
// then waits for the sleep.
const readyScript = `sleep 60 &
echo "$$ $!" > "$1/ready"
wait`

func TestLockLostKillsCMD(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	dir := t.TempDir()
	p := start(t, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s",
		lockPath(t), "--", "sh", "-c", readyScript, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	proxy.BlackHole()
	begin := time.Now()
	code := p.wait(t, 20*time.Second)
	if code == 0 {
		t.Fatalf("dsync exited 0 after losing the lock; stderr:\n%s", &p.stderr)
	}
	if code != exitLost {
		t.Errorf("dsync exited %d; want %d", code, exitLost)
	}
	t.Logf("dsync exited %d %v after the partition; stderr:\n%s", code, time.Since(begin), &p.stderr)
	if want := "dsync: lock on "; !strings.Contains(p.stderr.String(), want) || !strings.Contains(p.stderr.String(), " lost: ") {
		t.Errorf("stderr = %q; want it to say the lock was lost", &p.stderr)
	}
	for _, pid := range ps {
		if !awaitExit(t, pid, 5*time.Second) {
			t.Errorf("process %d of CMD is still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitScript writes $1/ready, then waits until $1/go exists and exits 5.
const waitScript = `echo ready > "$1/ready"
while [ ! -e "$1/go" ]; do sleep 0.05; done
exit 5`

func TestLockLostIgnore(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	dir := t.TempDir()
	p := start(t, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s", "-lost", "ignore",
		lockPath(t), "--", "sh", "-c", waitScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	proxy.BlackHole()
	// Wait for the warning: dsync noticed and CMD keeps running.
	if !p.stderr.Await("warning: lock on", 20*time.Second) {
		t.Fatalf("no warning within 20s; stderr:\n%s", p.stderr.String())
	}
	select {
	case <-p.done:
		t.Fatalf("dsync exited after the loss with -lost ignore; stderr:\n%s", &p.stderr)
	default:
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != 5 {
		t.Fatalf("dsync exited %d; want CMD's 5; stderr:\n%s", code, &p.stderr)
	}
}
