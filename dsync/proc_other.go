//go:build !unix

package main

import (
	"os"
	"os/exec"
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

func signalNumber(os.Signal) int { return 0 }

func killedBy(*os.ProcessState) (os.Signal, bool) { return nil, false }
