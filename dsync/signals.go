package main

import (
	"os"
	"os/signal"
	"slices"
)

// What dsync does with a signal it catches.
type sigKind int

const (
	// sigForward (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2): ends a
	// wait for the lock; while CMD runs, goes to CMD's process group.
	sigForward sigKind = iota
	// sigStop (SIGTSTP, SIGTTIN, SIGTTOU): SIGSTOP to CMD's process group,
	// then dsync stops itself.
	sigStop
	// sigCont (SIGCONT): goes to CMD's process group, unless dsync was
	// stopped so long that the lock may be lost (child.run).
	sigCont
	// sigIgnore (SIGPIPE): caught, not ignored, so that CMD starts with the
	// default action, and so that a closed stderr cannot kill dsync before
	// it has dealt with CMD; writes to it just fail.
	sigIgnore
)

func kindOf(sig os.Signal) sigKind {
	switch {
	case slices.Contains(stopSignals, sig):
		return sigStop
	case sig == contSignal:
		return sigCont
	case sig == pipeSignal:
		return sigIgnore
	}
	return sigForward
}

// notifySignals relays the signals dsync handles to the returned channel
// until stop is called. A signal ignored when dsync started (nohup) stays
// ignored, for dsync and for CMD, which inherits that.
func notifySignals() (sigs <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 16)
	for _, sig := range slices.Concat(forwardSignals, stopSignals, []os.Signal{contSignal, pipeSignal}) {
		if sig != nil && !signal.Ignored(sig) {
			signal.Notify(c, sig)
		}
	}
	return c, func() { signal.Stop(c) }
}
