package main

import (
	"bytes"
	"context"
	"runtime"
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
	stderr := &r98Blocked{release: make(chan struct{}), wrote: make(chan struct{})}
	t.Cleanup(stderr.unblock)
	var got bytes.Buffer
	m := newMsgWriter(writerFunc(func(p []byte) (int, error) {
		n, err := stderr.Write(p)
		got.Write(p) // after stderr.Write returns: the message taken
		return n, err
	}))
	m.grace = time.Hour // a stderr slower than any pause of this test
	m.Write([]byte("dsync: interrupted waiting for /p\n"))
	<-stderr.wrote
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.Close(context.Background(), nil, true)
	}()
	awaitCloseWaits(t, closed, "interrupted, with a message not yet taken by stderr")
	stderr.unblock()
	<-closed
	if !strings.Contains(got.String(), "interrupted") {
		t.Errorf("stderr got %q once Close returned; want the message", got.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// awaitCloseWaits waits until msgWriter.Close, run by a goroutine of the
// test (closed closes when it returns), is blocked in its select. It fails
// the test if Close returns first. A bounded poll: nothing tells that
// Close waits.
func awaitCloseWaits(t *testing.T, closed <-chan struct{}, what string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); !closeWaits(t, buf); time.Sleep(time.Millisecond) {
		select {
		case <-closed:
			t.Fatalf("Close returned %s", what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Close neither returned nor waited within 30s")
		}
	}
}

// closeWaits reports whether a goroutine of the test t is blocked in the
// select of msgWriter.Close.
func closeWaits(t *testing.T, buf []byte) bool {
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, "dsync.(*msgWriter).Close(") && strings.Contains(g, "dsync."+t.Name()+".") {
			return true
		}
	}
	return false
}
