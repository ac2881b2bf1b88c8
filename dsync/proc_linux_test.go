package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// awaitState waits until every process of ps is in a state for which ok
// holds. These processes are not the test's children and Linux offers no
// event for a state change, so it reads /proc every 10ms.
func awaitState(t *testing.T, ps []int, what string, ok func(byte) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range ps {
		for !ok(procState(pid)) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is in state %q; want it %s", pid, procState(pid), what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func isStopped(s byte) bool { return s == 'T' }
func isRunning(s byte) bool { return s == 'S' || s == 'R' }
func isGone(s byte) bool    { return s == 0 || s == 'Z' }

// TestLockKilledDsyncKillsCMD pins CMD running on without the lock after
// dsync was SIGKILLed (Pdeathsig).
func TestLockKilledDsyncKillsCMD(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", `echo "$$" > "$1/ready"; exec sleep 60`, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	awaitState(t, ps, "gone", isGone)
}

// TestLockStopStopsCMD pins SIGTSTP stopping dsync alone: it stops CMD's
// group and dsync, and SIGCONT continues both.
func TestLockStopStopsCMD(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", readyScript, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	dsyncPid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, append(ps, dsyncPid), "stopped", isStopped)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	awaitState(t, append(ps, dsyncPid), "running", isRunning)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("dsync exited %d; want CMD's %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), &p.stderr)
	}
}

// TestLockStoppedPastExpiry: continued after its session expired, dsync
// SIGKILLs CMD's stopped group instead of continuing it.
func TestLockStoppedPastExpiry(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	p := start(t, "lock", "-zk", shared.Addr(), "-session-timeout", "2s", path, "--", "sh", "-c", readyScript, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, append(ps, p.cmd.Process.Pid), "stopped", isStopped)
	awaitChildren(t, obs, path, 0) // the session expired
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitLost {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, exitLost, &p.stderr)
	}
	if want := "SIGKILL to CMD's stopped process group"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr = %q; want it to contain %q", &p.stderr, want)
	}
	for _, pid := range ps {
		if !isGone(procState(pid)) {
			t.Errorf("process %d of CMD outlived dsync", pid)
		}
	}
}
