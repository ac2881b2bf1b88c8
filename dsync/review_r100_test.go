package main

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// TestReviewR100CtxDoneThenOneSignal: Close's doc says that once a signal
// came or ctx is done it waits its grace more at most, and a second such
// signal ends it at once. With ctx done first (run's ctx canceled, no
// signal yet), the first signal ended Close at once and dropped the queued
// message: the grace running was taken for a signal come.
func TestReviewR100CtxDoneThenOneSignal(t *testing.T) {
	m, _, _ := blockedMsgs(t, "dsync: canceled: SIGTERM to CMD's process group\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sigs := make(chan os.Signal) // unbuffered: a send returns once Close took it
	waits, closed := closeAsync(m, ctx, sigs, false)
	awaitCloseWaits(t, waits, closed, "with ctx done, before it first waited")
	// Nothing but ctx's end is ready: Close takes it, and waits again.
	awaitCloseWaits(t, waits, closed, "with ctx done and no signal, before its grace")
	sigs <- syscall.SIGTERM // the first signal
	awaitCloseWaits(t, waits, closed, "on the first signal, ctx done, before its grace")
	sigs <- syscall.SIGTERM // the second
	<-closed
}
