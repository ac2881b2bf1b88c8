package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReviewR133StopBeforeNotify: a stop signal that someone sends CMD's
// group before the guard handles signals stops the guard, as it would
// stop CMD, and once the group is continued the guard starts CMD and dsync
// exits as CMD did: nothing is stuck for good, as doc.go says. SIGTSTP
// stops it at once; SIGTTOU, which the guard starts with blocked, stays
// pending until the Go runtime unblocks it in signal.Notify, before it
// installs its handler (round 133), and stops it there. The guard is held
// in a preloaded library's constructor (a FIFO's open), before its main,
// while the test signals its group; the control sends nothing.
func TestReviewR133StopBeforeNotify(t *testing.T) {
	t.Parallel()
	printenv := r130StaticCmd(t)
	lib := r131Preload(t, `#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hold(int argc, char **argv, char **envp) {
	const char *fifo = getenv("R133_FIFO");
	if (fifo == NULL || argc < 1 || strcmp(argv[0], "dsync (guard)") != 0)
		return;
	write(2, "r133 guard waits\n", 17);
	int fd = open(fifo, O_RDONLY);
	if (fd >= 0)
		close(fd);
}
`)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal // sent to the guard's group while it waits, or 0
	}{
		{"control", 0},
		{"ttou", syscall.SIGTTOU},
		{"tstp", syscall.SIGTSTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			p := startWith(t, func(p *proc) {
				p.cmd.Env = append(p.cmd.Env, "LD_PRELOAD="+lib, "R133_FIFO="+fifo, "R133=ran")
			}, "lock", "-zk", shared.Addr(), lockPath(t), "--", printenv, "R133")
			if !p.stderr.Await("r133 guard waits", 30*time.Second) {
				t.Fatalf("the guard did not start; stderr:\n%s", &p.stderr)
			}
			guard := r126ChildOf(p.cmd.Process.Pid)
			if guard == 0 {
				t.Fatalf("no guard; stderr:\n%s", &p.stderr)
			}
			if tc.sig != 0 {
				if err := syscall.Kill(-guard, tc.sig); err != nil {
					t.Fatal(err)
				}
			}
			if tc.sig == syscall.SIGTTOU {
				if m := r126Mask(guard, "ShdPnd"); m&r126Bit(tc.sig) == 0 {
					t.Fatalf("%v not pending for the guard (ShdPnd %x), which should have it blocked", tc.sig, m)
				}
			}
			// Opened for reading and writing, a FIFO does not wait for a
			// reader: the guard, stopped in its open, opens it again once
			// continued.
			w, err := os.OpenFile(fifo, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if tc.sig != 0 {
				awaitState(t, []int{guard}, "stopped", isStopped)
				if out := p.stdout.String(); out != "" {
					t.Errorf("CMD printed %q while its guard was stopped", out)
				}
				if err := syscall.Kill(-guard, syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Errorf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
			}
			if got := p.stdout.String(); got != "ran\n" {
				t.Errorf("CMD printed %q; want %q", got, "ran\n")
			}
		})
	}
}

// TestReviewR133MaskRoundTrip: the mask that blockTTOU reports for a
// thread, set by setMask on another, is the first thread's, for every
// signal the kernel lets a thread block (1 to 64 but SIGKILL and SIGSTOP;
// word boundaries 32/33 and 64 included), alone and all at once; and
// blockTTOU's undo gives the thread its mask back.
func TestReviewR133MaskRoundTrip(t *testing.T) {
	var masks []unix.Sigset_t
	var all unix.Sigset_t
	for sig := 1; sig <= 64; sig++ {
		if sig == int(syscall.SIGKILL) || sig == int(syscall.SIGSTOP) {
			continue
		}
		var one unix.Sigset_t
		addSignal(&one, sig)
		addSignal(&all, sig)
		masks = append(masks, one)
	}
	masks = append(masks, all, unix.Sigset_t{})
	get := func() unix.Sigset_t {
		var now unix.Sigset_t
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &now); err != nil {
			t.Error(err)
		}
		return now
	}
	var ttou unix.Sigset_t
	addSignal(&ttou, int(syscall.SIGTTOU))
	for _, m := range masks {
		type result struct {
			s             string
			during, after unix.Sigset_t
			err           error
		}
		c := make(chan result)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var orig unix.Sigset_t
			if err := unix.PthreadSigmask(unix.SIG_SETMASK, &m, &orig); err != nil {
				c <- result{err: err}
				return
			}
			defer unix.PthreadSigmask(unix.SIG_SETMASK, &orig, nil)
			s, undo, err := blockTTOU()
			var r result
			r.s, r.err = s, err
			if err == nil {
				r.during = get()
				undo()
				r.after = get()
			}
			c <- r
		}()
		r := <-c
		if r.err != nil {
			t.Fatal(r.err)
		}
		want := m
		want.Val[0] |= ttou.Val[0]
		if r.during != want {
			t.Errorf("mask %x: %x while blockTTOU holds; want %x", m.Val[0], r.during.Val[0], want.Val[0])
		}
		if r.after != m {
			t.Errorf("mask %x: %x after undo", m.Val[0], r.after.Val[0])
		}
		var g unix.Sigset_t
		if err := setMaskAndBack(t, r.s, func() { g = get() }); err != nil {
			t.Error(err)
		}
		if g != m {
			t.Errorf("mask %x: blockTTOU says %q, which setMask makes %x", m.Val[0], r.s, g.Val[0])
		}
	}
	for _, bad := range []string{"0", "65x", "1,,x", "-1", "1025", " 1"} {
		if err := setMaskAndBack(t, bad, func() {}); err == nil {
			t.Errorf("setMask(%q) succeeded", bad)
		}
	}
}

// setMaskAndBack calls setMask(mask) and then f on a thread of their own,
// and gives the thread back to the runtime as it found it: its mask, and
// unlocked. setMask locks its thread for good (the guard execs from it), and
// a goroutine that ends with its thread locked ends the thread: the kernel
// then SIGKILLs every child the thread had forked with Pdeathsig set, such
// as the package's shared ZooKeeper server (zktest), which was killed so
// whenever the runtime had run these goroutines on the thread that started
// it. The runtime ends a thread in no other way, so the thread must still be
// there afterwards.
func setMaskAndBack(t *testing.T, mask string, f func()) error {
	t.Helper()
	type result struct {
		tid int
		err error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		r := result{tid: unix.Gettid()}
		var orig unix.Sigset_t
		r.err = unix.PthreadSigmask(unix.SIG_BLOCK, nil, &orig)
		if r.err == nil {
			r.err = setMask(mask)
			f()
			runtime.UnlockOSThread() // setMask's lock; ours stays until the mask is back
			if err := unix.PthreadSigmask(unix.SIG_SETMASK, &orig, nil); err != nil {
				t.Errorf("restore the mask: %v (the thread ends with this goroutine)", err)
				done <- r
				return
			}
		}
		runtime.UnlockOSThread()
		done <- r
	}()
	r := <-done
	if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", r.tid)); err != nil {
		t.Errorf("setMask(%q): its thread %d ended: %v", mask, r.tid, err)
	}
	return r.err
}
