package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// awaitState waits until every process of ps is in a state for which ok
// holds (see awaitProc).
func awaitState(t *testing.T, ps []int, what string, ok func(byte) bool) {
	t.Helper()
	for _, pid := range ps {
		awaitProc(t, func() bool { return ok(procState(pid)) }, func() string {
			return fmt.Sprintf("process %d is in state %q; want it %s", pid, procState(pid), what)
		})
	}
}

// awaitProc waits until ok holds of what /proc tells, and fails the test
// with failure() if it does not within 30s. The processes it looks at are
// not the test's children, and Linux offers no event for a change of their
// state or credentials, so it reads every 10ms.
func awaitProc(t *testing.T, ok func() bool, failure func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(failure())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isStopped(s byte) bool { return s == 'T' }
func isRunning(s byte) bool { return s == 'S' || s == 'R' }
func isGone(s byte) bool    { return s == 0 || s == 'Z' }

// TestLockKilledDsyncKillsCMD pins CMD running on without the lock after
// dsync was SIGKILLed (its guard kills it).
func TestLockKilledDsyncKillsCMD(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", `echo "$$" > "$1/ready"; exec sleep 60`, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	for _, pid := range ps {
		if !awaitExit(t, pid, 30*time.Second) {
			t.Fatalf("process %d of CMD still runs 30s after dsync was killed", pid)
		}
	}
}

// awaitExit waits until process pid (not necessarily the test's child) has
// exited, or within has passed, and reports whether it exited: a pidfd
// becomes readable when its process exits.
func awaitExit(t testing.TB, pid int, within time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // gone, and reaped
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(within)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Until(deadline).Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			t.Fatalf("poll of pid %d: %v", pid, err)
		}
		return n > 0
	}
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

// awaitFile waits until path holds a complete line (it ends in a newline)
// and returns its content, failing the test after within. The file is
// written by processes that are not the test's children: it waits on
// inotify events of path's directory, set before the first read.
func awaitFile(t testing.TB, path string, within time.Duration) string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		t.Fatalf("inotify watch of %s: %v", filepath.Dir(path), err)
	}
	deadline := time.Now().Add(within)
	events := make([]byte, 4096)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return string(b)
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%s did not appear within %v", path, within)
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatalf("poll of inotify: %v", err)
		}
		for { // drain: the file is read again whatever the events were
			if _, err := unix.Read(fd, events); err != nil {
				break
			}
		}
	}
}
