package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
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
// and the mask survives exec. mask is the thread's mask before, in the form
// setMask takes; undo sets it back, and unlocks the thread.
func blockTTOU() (mask string, undo func(), err error) {
	runtime.LockOSThread()
	var set, old unix.Sigset_t
	addSignal(&set, int(unix.SIGTTOU))
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		runtime.UnlockOSThread()
		return "", nil, fmt.Errorf("block SIGTTOU: %w", err)
	}
	var blocked []string
	for sig := 1; sig <= len(old.Val)*wordBits; sig++ {
		if old.Val[(sig-1)/wordBits]&(1<<((sig-1)%wordBits)) != 0 {
			blocked = append(blocked, strconv.Itoa(sig))
		}
	}
	return strings.Join(blocked, ","), func() {
		if unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
	}, nil
}

// setMask sets the signal mask of the calling goroutine's thread, which it
// locks to it for good, to mask, from blockTTOU: processes started from the
// thread exec with that mask.
func setMask(mask string) error {
	runtime.LockOSThread()
	var set unix.Sigset_t
	for f := range strings.SplitSeq(mask, ",") {
		if f == "" {
			continue // no signal blocked
		}
		sig, err := strconv.Atoi(f)
		if err != nil || sig < 1 || sig > len(set.Val)*wordBits {
			return fmt.Errorf("bad signal mask %q", mask)
		}
		addSignal(&set, sig)
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &set, nil); err != nil {
		return fmt.Errorf("set signal mask %q: %w", mask, err)
	}
	return nil
}

// wordBits is the number of signals each word of a unix.Sigset_t holds.
const wordBits = int(unsafe.Sizeof(unix.Sigset_t{}.Val[0])) * 8

// addSignal adds signal number sig to set.
func addSignal(set *unix.Sigset_t, sig int) { set.Val[(sig-1)/wordBits] |= 1 << ((sig - 1) % wordBits) }
