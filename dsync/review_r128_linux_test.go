package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"golang.org/x/sys/unix"
)

// TestReviewR128GuardKilledBeforeCMD: someone else SIGKILLs the guard after
// its signal.Notify and before its fork of CMD, while a forwarded SIGTERM
// is held back: dsync reads end of file (the guard is gone), sends the held
// SIGTERM into an empty group, exits as its "CMD" died (137), releases the
// lock, and CMD never ran.
func TestReviewR128GuardKilledBeforeCMD(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", shared.Addr(), path, "--", "cat")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.stderr.Await("dsync: got terminated: forwarded", 30*time.Second) {
		t.Fatalf("no forward; stderr:\n%s", &p.stderr)
	}
	if r126ChildOf(guard) != 0 {
		t.Fatal("the stopped guard has a child")
	}
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("dsync exited %d; want 137; stderr:\n%s", code, &p.stderr)
	}
	awaitChildren(t, observer(t), path, 0) // the lock released
}

// TestReviewR128ExecFailsInGuard: CMD, executable when dsync looked it up,
// loses its execute bits before the guard execs it (the guard caught after
// its signal.Notify), with a SIGUSR1 held back meanwhile: the guard exits
// 126, dsync reads end of file, exits 126 and releases the lock; no hang.
func TestReviewR128ExecFailsInGuard(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	script := filepath.Join(t.TempDir(), "cmd")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", shared.Addr(), path, "--", script)
	if err := os.Chmod(script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !p.stderr.Await("forwarded", 30*time.Second) {
		t.Fatalf("no forward; stderr:\n%s", &p.stderr)
	}
	if err := syscall.Kill(guard, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitNoExec {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, exitNoExec, &p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "permission denied") {
		t.Errorf("stderr does not say why CMD did not start:\n%s", &p.stderr)
	}
	awaitChildren(t, observer(t), path, 0) // the lock released
}

// TestReviewR128StopContWithHeldSignal: a SIGUSR1 held back (guard caught
// after its signal.Notify), then SIGTSTP (SIGSTOP to the group at once:
// the guard) and SIGCONT to dsync: the guard goes on, starts CMD, and CMD
// dies of the held SIGUSR1 (138): nothing lost or reordered away.
func TestReviewR128StopContWithHeldSignal(t *testing.T) {
	t.Parallel()
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "cat")
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !p.stderr.Await("forwarded", 30*time.Second) {
		t.Fatalf("no forward; stderr:\n%s", &p.stderr)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, []int{p.cmd.Process.Pid}, "stopped", isStopped)
	if r126Mask(guard, "ShdPnd")&r126Bit(syscall.SIGUSR1) != 0 {
		t.Errorf("the guard got SIGUSR1 before it started CMD")
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code, want := p.wait(t, 30*time.Second), 128+int(syscall.SIGUSR1); code != want {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, want, &p.stderr)
	}
}

// TestReviewR128OnceNodeDeletedBeforeCMD: "dsync once": the run's lock node
// deleted after the guard's start and before its fork of CMD: the guard
// dies of SIGKILL, CMD never starts, dsync exits 3 and nothing is recorded.
func TestReviewR128OnceNodeDeletedBeforeCMD(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	var path string
	// A fresh path each try: an overshot try runs cat to its end, which
	// records the run.
	p, guard := r126CatchGuardAfterNotifyEach(t, func() []string {
		path = lockPath(t)
		return []string{"once", "-zk", shared.Addr(), path, "--", "cat"}
	})
	lock := oncePath(path, "lock")
	kids := awaitChildren(t, obs, lock, 1)
	if err := obs.Delete(lock+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	r127GuardKilledBeforeCMD(t, p, guard, "SIGKILL")
	if got := strings.TrimSpace(onceStatus(t, path)); got != "not done" {
		t.Errorf("once -status: %q; want not done", got)
	}
}

// TestReviewR128RevokedThenDroppedBeforeCMD: -revocable: a revocation in
// the guard's window (its SIGTERM held back), then the connection dropped
// in the same window: the guard dies of SIGKILL, CMD never starts (the
// held SIGTERM does not turn the loss into a wait for CMD), dsync exits 3.
func TestReviewR128RevokedThenDroppedBeforeCMD(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	path := lockPath(t)
	proxy := zktest.NewProxy(t, shared.Addr())
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s", "-revocable", path, "--", "cat")
	kids := awaitChildren(t, obs, path, 1)
	if _, err := obs.Set(path+"/"+kids[0], []byte("__REVOKE__"), -1); err != nil {
		t.Fatal(err)
	}
	if !p.stderr.Await(fmt.Sprintf("revocation of the lock on %s requested: SIGTERM", path), 30*time.Second) {
		t.Fatalf("no revocation; stderr:\n%s", &p.stderr)
	}
	proxy.BlackHole()
	r127GuardKilledBeforeCMD(t, p, guard, " lost: ")
}

// TestReviewR128GuardErrorOnTostopTerminal: dsync in the foreground of a
// terminal with tostop set, its stderr; CMD is a script without "#!",
// which the guard, in the background, fails to exec. The guard says so
// and dsync exits 126. The guard, which catches SIGTTOU, used to retry its
// write forever (each try sent SIGTTOU, caught, and the write restarted),
// and dsync never exited.
func TestReviewR128GuardErrorOnTostopTerminal(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "noshebang")
	if err := os.WriteFile(script, []byte("echo ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var tty *os.File
	p := startWith(t, func(p *proc) {
		tty = r128TostopTTY(t, p)
	}, "lock", "-zk", shared.Addr(), lockPath(t), "--", script)
	tty.Close() // dsync has its own
	if code := p.wait(t, 30*time.Second); code != exitNoExec {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, exitNoExec, &p.stderr)
	}
	if !p.stderr.Await("exec format error", 10*time.Second) {
		t.Errorf("stderr does not say why CMD did not start:\n%s", &p.stderr)
	}
}

// r128TostopTTY makes p's stderr a new terminal with tostop set, and dsync
// the leader of a session with it as its controlling terminal: dsync's
// group is the foreground, CMD's (the guard's) is not. The caller closes
// tty once p has started.
func r128TostopTTY(t *testing.T, p *proc) (tty *os.File) {
	t.Helper()
	tty, _ = openTTY(t, &p.stderr)
	termios, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	termios.Lflag |= unix.TOSTOP
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, termios); err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = tty
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	return tty
}
