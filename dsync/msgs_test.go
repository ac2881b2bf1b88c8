package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMsgWriterCloseInterruptedFlushes: dsync interrupted while it waited
// for a lock queues why it stopped, then closes its msgWriter, told that a
// signal came. Close returned at once, and dsync exited before the message
// reached a stderr slower than that (TestLockInterruptedWhileWaiting saw
// an empty stderr once in CI). Close waits for it, up to its grace.
func TestMsgWriterCloseInterruptedFlushes(t *testing.T) {
	m, stderr, got := blockedMsgs(t, "dsync: interrupted waiting for /p\n")
	waits, closed := closeAsync(m, context.Background(), nil, true)
	awaitCloseWaits(t, waits, closed, "interrupted, with a message not yet taken by stderr")
	stderr.unblock()
	<-closed
	if !strings.Contains(got.String(), "interrupted") {
		t.Errorf("stderr got %q once Close returned; want the message", got.String())
	}
}

// blockedMsgs returns a msgWriter whose grace outlasts any pause of the
// test, writing to a stderr that takes nothing until unblocked, with msg
// queued and its write begun; got has what stderr took, once Close
// returned.
func blockedMsgs(t *testing.T, msg string) (m *msgWriter, stderr *r98Blocked, got *bytes.Buffer) {
	t.Helper()
	stderr = &r98Blocked{release: make(chan struct{}), wrote: make(chan struct{})}
	t.Cleanup(stderr.unblock)
	got = new(bytes.Buffer)
	m = newMsgWriter(writerFunc(func(p []byte) (int, error) {
		n, err := stderr.Write(p)
		got.Write(p) // after stderr.Write returns: the message taken
		return n, err
	}))
	m.grace = time.Hour
	m.Write([]byte(msg))
	<-stderr.wrote
	return m, stderr, got
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// closeAsync runs m.Close(ctx, sigs, interrupted) on a goroutine. waits
// tells each time Close is about to wait; closed closes when it returns.
func closeAsync(m *msgWriter, ctx context.Context, sigs <-chan os.Signal, interrupted bool) (waits, closed <-chan struct{}) {
	w, c := make(chan struct{}, 8), make(chan struct{})
	m.waiting = func() { w <- struct{}{} }
	go func() {
		defer close(c)
		m.Close(ctx, sigs, interrupted)
	}()
	return w, c
}

// awaitCloseWaits waits until Close (see closeAsync) is about to wait. It
// fails the test if Close returns first.
func awaitCloseWaits(t *testing.T, waits, closed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-waits:
	case <-closed:
		t.Fatalf("Close returned %s", what)
	}
}
