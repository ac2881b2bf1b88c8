package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// r132BlockedThreads returns the threads of process pid that have SIGTTOU
// blocked.
func r132BlockedThreads(pid int) map[string]bool {
	out := map[string]bool{}
	for _, tid := range r126Tasks(pid) {
		if n, _ := strconv.Atoi(tid); r126Mask(n, "SigBlk")&r126Bit(syscall.SIGTTOU) != 0 {
			out[tid] = true
		}
	}
	return out
}

// TestReviewR132NoThreadLeftBlocked: what startGuarded blocks it unblocks.
// In a dsync started plainly, once CMD runs, no thread has SIGTTOU blocked
// (the thread that started the guard has its mask back once cmd.Start has
// returned, on dsync's schedule: /proc is polled); in this process,
// startGuarded failing to start the guard (chdir fails in the child), from
// 32 goroutines at once, leaves no thread with SIGTTOU blocked.
func TestReviewR132NoThreadLeftBlocked(t *testing.T) {
	t.Run("dsync", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		p := startWith(t, func(p *proc) { p.cmd.Stdin = r }, "lock", "-zk", shared.Addr(), lockPath(t), "--", "cat")
		r.Close()
		pid := p.cmd.Process.Pid
		awaitProc(t, func() bool { g := r126ChildOf(pid); return g != 0 && r126ChildOf(g) != 0 },
			func() string { return fmt.Sprintf("CMD not started; stderr:\n%s", &p.stderr) })
		awaitProc(t, func() bool { return len(r132BlockedThreads(pid)) == 0 },
			func() string {
				return fmt.Sprintf("dsync's threads %v have SIGTTOU blocked while CMD runs", r132BlockedThreads(pid))
			})
		w.Close()
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Errorf("dsync exited %d; stderr:\n%s", code, &p.stderr)
		}
	})
	t.Run("in-process-error", func(t *testing.T) {
		before := r132BlockedThreads(os.Getpid())
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				cmd := exec.Command("/bin/true")
				cmd.Dir = "/nonexistent-r132"
				newProcessGroup(cmd)
				if link, err := startGuarded(cmd); err == nil {
					link.Close()
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					t.Error("the guard started in a directory that does not exist")
				}
			})
		}
		wg.Wait()
		for tid := range r132BlockedThreads(os.Getpid()) {
			if !before[tid] {
				t.Errorf("thread %s of this process has SIGTTOU blocked after startGuarded failed", tid)
			}
		}
	})
}
