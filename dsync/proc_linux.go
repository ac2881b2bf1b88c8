package main

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"
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
