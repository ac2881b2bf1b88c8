//go:build unix && !linux

package main

import "syscall"

// deathsig does nothing: only Linux has Pdeathsig.
func deathsig(*syscall.SysProcAttr) {}

// adoptOrphans does nothing: orphans go to PID 1, which reaps them.
func adoptOrphans() {}
