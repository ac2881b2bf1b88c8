package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// r126Tasks returns the thread ids of process pid.
func r126Tasks(pid int) []string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// r126Freeze stops process pid (SIGSTOP) and returns once every thread of
// it is stopped, or false if it is gone.
func r126Freeze(t *testing.T, pid int) bool {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Logf("SIGSTOP to %d: %v", pid, err)
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		tasks := r126Tasks(pid)
		if len(tasks) == 0 {
			return false
		}
		for _, tid := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, tid))
			if err != nil {
				continue
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if st := s[i+2]; st != 'T' && st != 't' {
				if st == 'Z' || st == 'X' {
					if tid == strconv.Itoa(pid) {
						st2, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
						cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
						t.Logf("process %d: main thread state %c; tasks %v; cmdline %q; status:\n%s", pid, st, tasks, cl, st2)
						return false
					}
					continue // a thread on its way out
				}
				all = false
			}
		}
		if all {
			return true
		}
	}
	t.Fatalf("process %d not stopped within 30s", pid)
	return false
}

// r126Status returns the field name of /proc/pid/status as a 64-bit mask.
func r126Mask(pid int, name string) uint64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			m, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return m
		}
	}
	return 0
}

func r126Bit(sig syscall.Signal) uint64 { return 1 << (uint(sig) - 1) }

// r126ChildOf returns a child of pid (any thread's), or 0.
func r126ChildOf(pid int) int {
	for _, tid := range r126Tasks(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, tid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	return 0
}

// r126CatchGuardBeforeNotify starts dsync lock with CMD cat (reading a
// pipe the test holds) and stops dsync's guard at a moment when the Go
// runtime has installed its signal handlers (SigCgt has SIGQUIT) and the
// guard has not yet made its pipe's read end close-on-exec, which it does
// right after signal.Notify: a moment before the guard's signal.Notify,
// CMD not yet started. It returns dsync, the stopped guard's pid and the
// write end of CMD's stdin, or guard 0 if it overshot (the caller retries).
func r126CatchGuardBeforeNotify(t *testing.T) (*proc, int, *os.File) {
	return r126CatchGuard(t, false)
}

// r126CatchGuard is r126CatchGuardBeforeNotify, or with after set, stops
// the guard after it made the read end close-on-exec (after its
// signal.Notify) and before it has forked CMD.
func r126CatchGuard(t *testing.T, after bool) (*proc, int, *os.File) {
	t.Helper()
	return r126CatchGuardArgs(t, after, "lock", "-zk", shared.Addr(), lockPath(t), "--", "cat")
}

// r126CatchGuardArgs is r126CatchGuard for dsync run with args (CMD
// reading its stdin).
func r126CatchGuardArgs(t *testing.T, after bool, args ...string) (*proc, int, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	p := startWith(t, func(p *proc) { p.cmd.Stdin = r }, args...)
	r.Close()
	var guard int
	deadline := time.Now().Add(30 * time.Second)
	for guard == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("dsync started no guard within 30s; stderr:\n%s", &p.stderr)
		}
		// dsync's child in a group of its own: not the child Go's os
		// package clones to probe CLONE_PIDFD before the first fork, in
		// dsync's group, which exits at once.
		if c := r126ChildOf(p.cmd.Process.Pid); c != 0 {
			if pg, err := syscall.Getpgid(c); err == nil && pg == c {
				guard = c
			}
		}
	}
	t.Cleanup(func() { _ = syscall.Kill(-guard, syscall.SIGKILL) })
	for {
		if !r126Freeze(t, guard) {
			t.Fatalf("guard %d gone; dsync exited %d; stderr:\n%s", guard, p.wait(t, 30*time.Second), &p.stderr)
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", guard))
		args := strings.Split(string(cmdline), "\x00")
		if args[0] == guardArg0 && r126Mask(guard, "SigCgt")&r126Bit(syscall.SIGQUIT) != 0 {
			info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", guard, args[1]))
			if err != nil {
				t.Fatal(err)
			}
			var flags uint64
			for line := range strings.Lines(string(info)) {
				if v, ok := strings.CutPrefix(line, "flags:"); ok {
					flags, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 64)
				}
			}
			cloexec, child := flags&syscall.O_CLOEXEC != 0, r126ChildOf(guard) != 0
			switch {
			case child || (cloexec && !after):
				_ = syscall.Kill(guard, syscall.SIGCONT)
				return p, 0, w // overshot
			case cloexec == after:
				return p, guard, w
			}
		}
		_ = syscall.Kill(guard, syscall.SIGCONT)
	}
}

// TestReviewR126SignalBeforeGuardNotify: a signal dsync forwards to CMD's
// group just after it started the guard, before the guard's
// signal.Notify, is held back until the guard has started CMD, and CMD
// dies of it (131, 138) as it would without a guard. It used to meet the
// Go runtime's default handling in the guard: SIGQUIT made the guard exit
// 2, CMD never ran, and SIGUSR1 was dropped.
func TestReviewR126SignalBeforeGuardNotify(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGUSR1} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			var (
				p     *proc
				guard int
				w     *os.File
			)
			for i := 0; i < 20 && guard == 0; i++ {
				p, guard, w = r126CatchGuardBeforeNotify(t)
				if guard == 0 {
					w.Close()
					p.wait(t, 30*time.Second)
				}
			}
			if guard == 0 {
				t.Fatal("did not catch the guard before its signal.Notify in 20 tries")
			}
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			r126HeldBack(t, p, guard, sig, fmt.Sprintf("dsync: got %v: forwarded", sig))
		})
	}
}

// r126HeldBack: dsync p's guard is stopped before it has started CMD (cat,
// reading a pipe the test holds open). It waits for dsync to say msg (that
// it sends sig to CMD's group), checks that the guard has not got sig, lets
// the guard go on, and checks that CMD dies of sig.
func r126HeldBack(t *testing.T, p *proc, guard int, sig syscall.Signal, msg string) {
	t.Helper()
	if !p.stderr.Await(msg, 30*time.Second) {
		t.Fatalf("dsync did not say %q within 30s; stderr:\n%s", msg, &p.stderr)
	}
	if r126Mask(guard, "ShdPnd")&r126Bit(sig) != 0 {
		t.Errorf("the guard got %v before it started CMD; want it held back for CMD", sig)
	}
	if err := syscall.Kill(guard, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code, want := p.wait(t, 30*time.Second), 128+int(sig); code != want {
		t.Errorf("dsync exited %d; want %d (CMD's death by %v); stderr:\n%s", code, want, sig, &p.stderr)
	}
}

// TestReviewR126SignalAfterGuardNotifyBeforeFork: a SIGTERM dsync forwards
// to CMD's group after the guard's signal.Notify and before the guard has
// forked CMD is held back until CMD runs, and CMD dies of it. The guard
// used to catch it and drop it: CMD ran to its end.
func TestReviewR126SignalAfterGuardNotifyBeforeFork(t *testing.T) {
	t.Parallel()
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "cat")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r126HeldBack(t, p, guard, syscall.SIGTERM, "dsync: got terminated: forwarded")
}

// r126CatchGuardAfterNotify is r126CatchGuardArgs with after set, tried
// up to 100 times; it fails the test if it never catches the guard.
func r126CatchGuardAfterNotify(t *testing.T, args ...string) (*proc, int) {
	t.Helper()
	return r126CatchGuardAfterNotifyEach(t, func() []string { return args })
}

// r126CatchGuardAfterNotifyEach is r126CatchGuardAfterNotify with the
// arguments of each try from argsFor (an overshot try ran CMD to its end,
// which may leave a mark, as a once's record).
func r126CatchGuardAfterNotifyEach(t *testing.T, argsFor func() []string) (*proc, int) {
	t.Helper()
	for tries := 1; tries <= 100; tries++ {
		p, guard, w := r126CatchGuardArgs(t, true, argsFor()...)
		if guard != 0 {
			return p, guard
		}
		w.Close()
		p.wait(t, 30*time.Second)
	}
	t.Fatal("did not catch the guard between signal.Notify and its fork of CMD in 100 tries")
	return nil, 0
}

// TestReviewR126RevocationInGuardWindow: -revocable: the one SIGTERM of a
// revocation requested after the guard's start and before its fork of CMD
// (no SIGKILL follows a revocation) is held back until CMD runs, and CMD
// dies of it. The guard used to drop it: CMD never learnt of the request
// and kept the lock until it ended by itself.
func TestReviewR126RevocationInGuardWindow(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	path := lockPath(t)
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", shared.Addr(), "-revocable", path, "--", "cat")
	kids := awaitChildren(t, obs, path, 1)
	if _, err := obs.Set(path+"/"+kids[0], []byte("__REVOKE__"), -1); err != nil {
		t.Fatal(err)
	}
	r126HeldBack(t, p, guard, syscall.SIGTERM, fmt.Sprintf("revocation of the lock on %s requested: SIGTERM", path))
}

// TestReviewR126NoGuardPipeInCMD: CMD holds no descriptor but stdio (ls's
// own, on /proc/PID/fd, aside): neither end of the guard's pipe reaches it.
func TestReviewR126NoGuardPipeInCMD(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := dsyncRun(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "ls", "-l", "/proc/self/fd")
	if code != 0 {
		t.Fatalf("dsync exited %d; stderr:\n%s", code, stderr)
	}
	for line := range strings.Lines(stdout) {
		f := strings.Fields(line)
		if len(f) < 11 || f[8] == "0" || f[8] == "1" || f[8] == "2" || strings.HasPrefix(f[10], "/proc/") {
			continue
		}
		if mine, err := os.Readlink("/proc/self/fd/" + f[8]); err == nil && mine == f[10] {
			continue // inherited by the test process, and so by dsync: passed on as intended
		}
		t.Errorf("CMD holds descriptor %s -> %s", f[8], f[10])
	}
}
