package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// onceAll starts n "dsync once" at once on path, each running sh -c script
// with the arguments args, and returns them.
func onceAll(t *testing.T, n int, path string, flags []string, script string, args ...string) []*proc {
	t.Helper()
	procs := make([]*proc, n)
	for i := range procs {
		argv := slices.Concat([]string{"once", "-zk", shared.Addr()}, flags, []string{path, "--", "sh", "-c", script, "sh"}, args)
		procs[i] = start(t, argv...)
	}
	return procs
}

// onceStatus runs "dsync once -status" on path and returns what it printed.
func onceStatus(t *testing.T, path string) string {
	t.Helper()
	code, stdout, stderr := dsyncRun(t, "once", "-status", "-zk", shared.Addr(), path)
	if code != 0 || stderr != "" {
		t.Fatalf("dsync once -status exited %d; want 0 and nothing on stderr; stderr:\n%s", code, stderr)
	}
	return strings.TrimSuffix(stdout, "\n")
}

// wantDoneBy checks that status ("dsync once -status") says done by one of
// procs, and returns it.
func wantDoneBy(t *testing.T, status string, procs []*proc) *proc {
	t.Helper()
	for _, p := range procs {
		if strings.HasPrefix(status, "done host=") && strings.Contains(status, fmt.Sprintf(" pid=%d at=", p.cmd.Process.Pid)) {
			return p
		}
	}
	t.Fatalf("dsync once -status printed %q; want done by one of the runs", status)
	return nil
}

// TestOnceRunsOnce: eight "dsync once" at once run CMD once, and all exit
// 0; -status shows the record, and after -reset CMD runs again.
func TestOnceRunsOnce(t *testing.T) {
	t.Parallel()
	path, log := lockPath(t), filepath.Join(t.TempDir(), "log")
	if got := onceStatus(t, path); got != "not done" {
		t.Fatalf("dsync once -status before any run printed %q; want not done", got)
	}
	const script = `echo "run $$" >> "$1"`
	procs := onceAll(t, 8, path, nil, script, log)
	for _, p := range procs {
		if code := p.wait(t, time.Minute); code != 0 || p.stderr.String() != "" {
			t.Errorf("dsync once exited %d; want 0 and nothing on stderr; stderr:\n%s", code, &p.stderr)
		}
	}
	if got := strings.Count(readFile(t, log), "run"); got != 1 {
		t.Fatalf("CMD ran %d times; want once:\n%s", got, readFile(t, log))
	}
	wantDoneBy(t, onceStatus(t, path), procs)

	rows := lsRows(t, path)
	if len(rows) != 1 || rows[0][0] != "done" || rows[0][1] != "done" || rows[0][2] != "-" || !strings.HasPrefix(rows[0][4], "host=") {
		t.Errorf("dsync ls rows %q; want the record alone", rows)
	}

	if code, stdout, stderr := dsyncRun(t, "once", "-reset", "-zk", shared.Addr(), path); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("dsync once -reset: exit %d, stdout %q, stderr %q; want 0 and nothing", code, stdout, stderr)
	}
	if got := onceStatus(t, path); got != "not done" {
		t.Fatalf("dsync once -status after -reset printed %q; want not done", got)
	}
	again := onceAll(t, 1, path, nil, script, log)
	if code := again[0].wait(t, time.Minute); code != 0 {
		t.Fatalf("dsync once after -reset exited %d; stderr:\n%s", code, &again[0].stderr)
	}
	if got := strings.Count(readFile(t, log), "run"); got != 2 {
		t.Fatalf("CMD ran %d times in all; want twice:\n%s", got, readFile(t, log))
	}
	wantDoneBy(t, onceStatus(t, path), again)
}

// TestOnceFailureNotRecorded: the first run of CMD fails (it makes $1/marker
// and exits 7), the second succeeds. The failure's status goes to its
// caller alone; nothing else runs CMD after the success.
func TestOnceFailureNotRecorded(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	const script = `if mkdir "$1/marker" 2>/dev/null; then echo fail >> "$1/log"; exit 7; fi
echo ok >> "$1/log"`
	procs := onceAll(t, 8, path, nil, script, dir)
	var codes []int
	for _, p := range procs {
		codes = append(codes, p.wait(t, time.Minute))
	}
	slices.Sort(codes)
	if want := "[0 0 0 0 0 0 0 7]"; fmt.Sprint(codes) != want {
		t.Errorf("dsync once exit statuses %v; want %s", codes, want)
	}
	if got, want := readFile(t, filepath.Join(dir, "log")), "fail\nok\n"; got != want {
		t.Errorf("runs %q; want %q", got, want)
	}
	wantDoneBy(t, onceStatus(t, path), procs)
}

// TestOnceRunnerKilled: the dsync whose CMD runs is killed (SIGKILL); once
// its session has expired, another runs CMD, and its success is recorded.
func TestOnceRunnerKilled(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	// The first run writes its guard's pid (CMD's parent; dsync is the
	// guard's) to $1/runner and blocks (exec: the guard kills it with
	// dsync); the others log ok.
	const script = `if mkdir "$1/first" 2>/dev/null; then echo "$PPID" > "$1/runner"; exec sleep 60; fi
echo ok >> "$1/log"`
	procs := onceAll(t, 3, path, []string{"-session-timeout", "2s"}, script, dir)
	runner := parentOf(t, pids(t, awaitFile(t, filepath.Join(dir, "runner"), 30*time.Second))[0])
	i := slices.IndexFunc(procs, func(p *proc) bool { return p.cmd.Process.Pid == runner })
	if i < 0 {
		t.Fatalf("the parent %d of CMD's guard is none of the dsync processes", runner)
	}
	killed := procs[i]
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.wait(t, 30*time.Second)
	rest := slices.Delete(procs, i, i+1)
	for _, p := range rest {
		if code := p.wait(t, time.Minute); code != 0 {
			t.Errorf("dsync once exited %d; want 0; stderr:\n%s", code, &p.stderr)
		}
	}
	if got, want := readFile(t, filepath.Join(dir, "log")), "ok\n"; got != want {
		t.Errorf("runs after the kill %q; want %q", got, want)
	}
	wantDoneBy(t, onceStatus(t, path), rest)
}

// TestOnceLostRunNotRecordedWhateverExitLost pins a killed CMD recorded as
// a success: a run whose CMD child.run ended for a loss that its hold
// context never showed (dsync stopped past a quarter of the session
// timeout) came back with status -exit-lost, and with -exit-lost 0 that
// read as CMD's success.
func TestOnceLostRunNotRecordedWhateverExitLost(t *testing.T) {
	path := lockPath(t)
	s, err := parse("once", []string{"-zk", shared.Addr(), "-exit-lost", "0", path, "--", "true"})
	if err != nil {
		t.Fatal(err)
	}
	sess := dial(t, shared.Addr())
	var stderr strings.Builder
	g, err := takeRun(t.Context(), sess, s, &stderr)
	if err != nil {
		t.Fatalf("takeRun = %v", err)
	}
	if code := g.end(s.exitLost, true); code != 0 {
		t.Fatalf("exit status %d; want -exit-lost's 0", code)
	}
	if status := onceStatus(t, path); status != "not done" {
		t.Fatalf("dsync once -status = %q after a run ended for a loss; want not done", status)
	}
}

// TestOnceRecordHeld: the record's transaction of a run whose CMD
// succeeded is held in the network while the run's session is given up
// (zktest's Hold): dsync exits 3 and says the record may or may not be
// written, not that nothing was recorded. Delivered late, for the session
// the server still keeps, the record is written, and the next "dsync once"
// does not run CMD.
func TestOnceRecordHeld(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	proxy := zktest.NewProxy(t, shared.Addr())
	f := proxy.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.Hold)
	defer f.Disarm()
	d := start(t, "once", "-zk", proxy.Addr(), "-session-timeout", "2s", path, "--", "sh", "-c", "echo ran")
	select {
	case <-f.Struck():
	case <-time.After(time.Minute):
		t.Fatal("the record was not struck")
	}
	proxy.BlackHole() // the run's session is given up; the held connection keeps it at the server
	if code := d.wait(t, time.Minute); code != exitLost || !strings.Contains(d.stderr.String(), "may or may not be written") {
		t.Fatalf("dsync once exited %d; want %d, and the record may or may not be written; stderr:\n%s", code, exitLost, &d.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	code, stdout, stderr := dsyncRun(t, "once", "-zk", shared.Addr(), path, "--", "sh", "-c", "echo ran")
	if code != 0 || strings.Contains(stdout, "ran") {
		t.Errorf("the next dsync once exited %d, stdout %q; want 0, CMD not run (recorded late); stderr:\n%s", code, stdout, stderr)
	}
}
