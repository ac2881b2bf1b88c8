package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r127GuardKilledBeforeCMD: dsync p's guard is stopped before it has
// forked CMD (cat, reading a pipe the test holds open), and the lock was
// just lost. Once dsync has said msg, it stops dsync, so that no later
// signal of dsync's can mend what it has done so far, and lets the guard
// go on: the guard must be dead already (SIGKILL acts on a stopped
// process), not start CMD, which would then run without the lock. Then it
// continues dsync and checks that it exits exitLost.
func r127GuardKilledBeforeCMD(t *testing.T, p *proc, guard int, msg string) {
	t.Helper()
	if !p.stderr.Await(msg, 30*time.Second) {
		t.Fatalf("dsync did not say %q within 30s; stderr:\n%s", msg, &p.stderr)
	}
	// dsync may have exited already: then it has reaped the guard.
	frozen := r126Freeze(t, p.cmd.Process.Pid)
	if err := syscall.Kill(guard, syscall.SIGCONT); err != nil && err != syscall.ESRCH {
		t.Fatal(err)
	}
	if !awaitExit(t, guard, 10*time.Second) {
		t.Errorf("the guard still lives 10s after the loss, continued (CMD %d started without the lock); stderr:\n%s", r126ChildOf(guard), &p.stderr)
	}
	if frozen {
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT) // if gone, its status says how
	}
	if code := p.wait(t, 30*time.Second); code != exitLost {
		t.Errorf("dsync exited %d (%v); want %d; stderr:\n%s", code, p.cmd.ProcessState, exitLost, &p.stderr)
	}
}

// TestReviewR127LossBeforeCMDStarted: a loss that is not final yet (the
// connection dropped) after the guard's start and before its fork of CMD
// kills the guard, and CMD never starts. Its SIGTERM used to be held back
// until CMD started: CMD then ran, without the lock, until the SIGTERM
// reached it.
func TestReviewR127LossBeforeCMDStarted(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	p, guard := r126CatchGuardAfterNotify(t, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s", lockPath(t), "--", "cat")
	proxy.BlackHole()
	r127GuardKilledBeforeCMD(t, p, guard, " lost: ")
}

// TestReviewR127NodeDeletedBeforeCMDStarted: the lock (or election) node
// deleted in the same window is a final loss: the guard dies of SIGKILL at
// once, for dsync lock and dsync elect alike.
func TestReviewR127NodeDeletedBeforeCMDStarted(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"lock", "elect"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obs := observer(t)
			path := lockPath(t)
			p, guard := r126CatchGuardAfterNotify(t, name, "-zk", shared.Addr(), path, "--", "cat")
			kids := awaitChildren(t, obs, path, 1)
			if err := obs.Delete(path+"/"+kids[0], -1); err != nil {
				t.Fatal(err)
			}
			r127GuardKilledBeforeCMD(t, p, guard, "SIGKILL")
		})
	}
}
