package main

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// adoptOrphans makes dsync the parent of the processes CMD leaves behind
// (a child subreaper), so that groupGone can reap them: where PID 1 does
// not reap (some containers), a dead process of CMD's group would stay a
// zombie and keep its group alive.
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// executable returns the file to run the guard from: /proc/self/exe is
// the running binary even if its file was replaced or removed since dsync
// started.
func executable() (string, error) {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self, nil
	}
	return os.Executable()
}

// dieOf kills dsync with sig, by the default action of sig whatever the
// Go runtime installed (a zeroed struct sigaction is SIG_DFL with no flags
// and an empty mask). The signal goes to the calling thread, which takes
// it on its way back from tgkill, before anything else can exit. dieOf
// returns if the default action of sig does not end a process.
func dieOf(sig syscall.Signal) {
	runtime.LockOSThread()
	var act [64]byte      // more than a struct sigaction on every architecture
	setSize := uintptr(8) // the kernel's sigset_t: 64 signals, 128 on mips
	if strings.HasPrefix(runtime.GOARCH, "mips") {
		setSize = 16
	}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, setSize, 0, 0)
	if errno == 0 || sig == syscall.SIGKILL {
		_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	}
}

// blockTTOU blocks SIGTTOU on the calling goroutine's thread, which it
// locks to it until undo. A process started from the thread meanwhile
// execs with SIGTTOU blocked: the Go runtime forks with the thread's mask,
// and the mask survives exec. blocked reports whether it was blocked by
// blockTTOU (not already); undo unblocks it then, and unlocks the thread.
func blockTTOU() (blocked bool, undo func(), err error) {
	runtime.LockOSThread()
	set, old := ttouSet(), unix.Sigset_t{}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		runtime.UnlockOSThread()
		return false, nil, err
	}
	blocked = old.Val[0]&set.Val[0] == 0
	return blocked, func() {
		if !blocked || unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil) == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
	}, nil
}

// unblockTTOU unblocks SIGTTOU on the calling goroutine's thread, which it
// locks to it for good: processes started from it exec with SIGTTOU
// unblocked.
func unblockTTOU() error {
	runtime.LockOSThread()
	set := ttouSet()
	return unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
}

// ttouSet returns the signal set that holds SIGTTOU alone: its bit is in
// the set's first word on every architecture.
func ttouSet() (set unix.Sigset_t) {
	set.Val[0] = 1 << (unix.SIGTTOU - 1)
	return set
}
