//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// newProcessGroup makes cmd start in a process group of its own, so that
// a signal reaches every process CMD starts (a shell's children too), and a
// terminal's Ctrl-C reaches dsync only, which forwards it once.
func newProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group of p, started by
// newProcessGroup.
func signalGroup(p *os.Process, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.Signal(sig)
	}
	return syscall.Kill(-p.Pid, s)
}

// signalNumber returns the number of sig, for the exit status 128+N.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// killedBy returns the signal that killed the process of ps, if one did.
func killedBy(ps *os.ProcessState) (os.Signal, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return nil, false
	}
	return ws.Signal(), true
}
