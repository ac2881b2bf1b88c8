//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// The signals dsync handles: an interrupt only (signals.go).
var (
	forwardSignals = []os.Signal{os.Interrupt}
	stopSignals    []os.Signal
	stopSignal     os.Signal
	contSignal     os.Signal
	pipeSignal     os.Signal
)

// newProcessGroup does nothing where there are no process groups.
func newProcessGroup(*exec.Cmd) {}

// signalGroup signals p alone (killing it for os.Kill).
func signalGroup(p *os.Process, sig os.Signal) error {
	if sig == os.Kill {
		return p.Kill()
	}
	return p.Signal(sig)
}

// groupGone reports true: without process groups, CMD is its only process.
func groupGone(*os.Process) bool { return true }

func adoptOrphans() {}

// There is no guard (guard.go) without process groups: CMD starts as is.
func isGuard([]string) bool { return false }

func guard([]string) int { return exitUsage }

func startGuarded(cmd *exec.Cmd) (*os.File, error) { return nil, cmd.Start() }

func stopSelf() {}

func signalNumber(os.Signal) int { return 0 }

func killedBy(*os.ProcessState) (os.Signal, bool) { return nil, false }
