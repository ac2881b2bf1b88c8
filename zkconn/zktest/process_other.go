//go:build unix && !linux

package zktest

import (
	"syscall"
	"time"
)

// sysProcAttr puts the JVM in its own process group, so that a Ctrl-C at the
// terminal reaches only the Go program, which then stops the server itself.
// Unlike Linux, these systems cannot kill the JVM when the Go program dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped cannot see thread states here; the stop may lag a little
// behind SIGSTOP.
func waitStopped(pid int, timeout time.Duration) error { return nil }
