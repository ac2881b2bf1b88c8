package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR94OnceSessionLostBeforeRun: dsync once takes the run's lock;
// the connection is black-holed at Do's catch-up (its sync of PATH, after
// the lock and before the function) and stays so: the session expires and
// Do's retry of the sync ends with the session's loss (ErrSessionLost),
// not ErrLockLost, although the lock was taken and lost before CMD could
// start. dsync once exits 1 ("dsync: PATH: … session lost"); dsync lock,
// for the same loss, says "lost before CMD started" and exits -exit-lost,
// which round 94 made dsync once do only when the loss shows as held's
// cause.
func TestReviewR94OnceSessionLostBeforeRun(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	proxy := zktest.NewProxy(t, shared.Addr())
	f := proxy.Strike(zktest.Match{Op: zktest.OpSync, Path: path}, zktest.BlackHole)
	defer f.Disarm()
	d := start(t, "once", "-zk", proxy.Addr(), "-session-timeout", "2s", path, "--", "sh", "-c", "echo ran")
	select {
	case <-f.Struck():
	case <-d.done:
		t.Fatalf("dsync exited before the sync was struck; stderr:\n%s", &d.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("the sync was not struck within 30s")
	}
	proxy.BlackHole() // the reconnects too: the session expires
	code := d.wait(t, time.Minute)
	t.Logf("dsync once exited %d, stdout %q; stderr:\n%s", code, &d.stdout, &d.stderr)
	if strings.Contains(d.stdout.String(), "ran") {
		t.Fatalf("CMD ran")
	}
	if code != exitLost || !strings.Contains(d.stderr.String(), "lost before CMD started") {
		t.Errorf("dsync once whose run's lock was taken, then lost with its session before CMD started, exited %d; want %d and \"lost before CMD started\", as dsync lock", code, exitLost)
	}
}

// TestReviewR94SignalWhileStderrBlocked: dsync lock runs CMD with its stderr
// a pipe nobody reads (full). SIGTERM: dsync forwards it, CMD exits, dsync
// releases the lock, and then waits in msgWriter.Close for its queued
// messages to be written, for as long as nobody reads: signals are still
// caught (notifySignals' stop runs after Close), so a second SIGTERM does
// not end it either.
func TestReviewR94SignalWhileStderrBlocked(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	_, w := r92FullPipe(t)
	p := startWith(t, func(p *proc) { p.cmd.Stderr = w }, "lock", "-zk", shared.Addr(), path, "--", "sh", "-c", readyScript, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	t.Cleanup(func() {
		for _, pid := range ps {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0) // released
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("dsync, its lock released and CMD gone, did not exit within 10s of a second SIGTERM (stderr blocked)")
	}
}
