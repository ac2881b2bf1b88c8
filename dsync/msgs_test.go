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
	// A bounded poll: nothing tells that Close waits.
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); !waitsIn(buf, "dsync.(*msgWriter).Close("); time.Sleep(time.Millisecond) {
		select {
		case <-closed:
			t.Fatal("Close, interrupted, returned with a message not yet taken by stderr")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Close neither returned nor waited within 30s")
		}
	}
	stderr.unblock()
	<-closed
	if !strings.Contains(got.String(), "interrupted") {
		t.Errorf("stderr got %q once Close returned; want the message", got.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitsIn reports whether a goroutine is blocked in a select in fn.
func waitsIn(buf []byte, fn string) bool {
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, "[select") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}
