//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// adoptOrphans does nothing: orphans go to PID 1, which reaps them.
func adoptOrphans() {}

// executable returns the file to run the guard from.
func executable() (string, error) { return os.Executable() }

// dieOf kills dsync with sig if it is SIGKILL, and else returns: the Go
// runtime keeps its own action for other signals here, and the guard exits
// 128+N instead, which dsync reads as a death by signal N.
func dieOf(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(os.Getpid(), sig)
	}
}

// blockTTOU does nothing: without a way to set a thread's signal mask
// here, the guard starts with dsync's (guard.go says what that risks).
func blockTTOU() (mask string, undo func(), err error) { return "", func() {}, nil }

// setMask does nothing, as blockTTOU.
func setMask(string) error { return nil }
