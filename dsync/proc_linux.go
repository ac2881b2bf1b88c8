package main

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// deathsig has the kernel SIGKILL CMD (its first process, not the rest of
// its group) when dsync dies without ending it, SIGKILL included. The
// kernel sends it when the thread that forked CMD exits, not the process:
// child.start forks from a goroutine locked to its thread until CMD exits.
func deathsig(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// adoptOrphans makes dsync the parent of the processes CMD leaves behind
// (a child subreaper), so that groupGone can reap them: where PID 1 does
// not reap (some containers), a dead process of CMD's group would stay a
// zombie and keep its group alive.
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
