//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// The signals dsync handles (signals.go says what it does with each kind).
var (
	forwardSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT,
		syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2}
	stopSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}
	stopSignal  = os.Signal(syscall.SIGSTOP) // what stops CMD's group
	contSignal  = os.Signal(syscall.SIGCONT)
	pipeSignal  = os.Signal(syscall.SIGPIPE)
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

// groupGone reaps the processes of the group of p that are dsync's
// children (every orphan of the group, where adoptOrphans works), and
// reports whether no process of the group is left. Call it only after
// p.Wait: it could reap p itself.
func groupGone(p *os.Process) bool {
	for {
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(-p.Pid, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			break
		}
	}
	return syscall.Kill(-p.Pid, 0) == syscall.ESRCH
}

// stopSelf stops dsync as the default action of SIGTSTP would; it returns
// once dsync is continued.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

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
