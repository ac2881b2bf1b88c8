package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestReviewR100CtxDoneThenOneSignal: Close's doc says that once a signal
// came or ctx is done it waits its grace more at most, and a second such
// signal ends it at once. With ctx done first (run's ctx canceled, no
// signal yet), the first signal ended Close at once and dropped the queued
// message: the grace running was taken for a signal come.
func TestReviewR100CtxDoneThenOneSignal(t *testing.T) {
	stderr := &r98Blocked{release: make(chan struct{}), wrote: make(chan struct{})}
	t.Cleanup(stderr.unblock)
	m := newMsgWriter(stderr)
	m.grace = time.Hour
	m.Write([]byte("dsync: canceled: SIGTERM to CMD's process group\n"))
	<-stderr.wrote
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sigs := make(chan os.Signal) // unbuffered: a send returns once Close took it
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.Close(ctx, sigs, false)
	}()
	awaitCloseWaits(t, closed, "with ctx done and no signal, before its grace") // ctx's done taken
	sigs <- syscall.SIGTERM                                                     // the first signal
	awaitCloseWaits(t, closed, "on the first signal, ctx done, before its grace")
	sigs <- syscall.SIGTERM // the second
	<-closed
}
