package main

import (
	"bytes"
	"context"
	"io"
	"os"
)

// A msgWriter writes dsync's messages to w from a goroutine of its own, so
// that a write that blocks (a pipe nobody reads just then, a terminal
// paused with Ctrl-S) never holds up what child.run does about CMD: the
// SIGTERM and SIGKILL of a lost lock must not wait for stderr. Messages
// beyond its queue (64) are dropped.
type msgWriter struct {
	q    chan []byte
	done chan struct{}
	tty  bool // w is a terminal (isTerminal)
}

// newMsgWriter starts a msgWriter writing to w.
func newMsgWriter(w io.Writer) *msgWriter {
	m := &msgWriter{q: make(chan []byte, 64), done: make(chan struct{}), tty: isTerminal(w)}
	go func() {
		defer close(m.done)
		for b := range m.q {
			_, _ = w.Write(b)
		}
	}()
	return m
}

// Write queues p, never waiting.
func (m *msgWriter) Write(p []byte) (int, error) {
	select {
	case m.q <- bytes.Clone(p):
	default:
	}
	return len(p), nil
}

// Close ends the writer and waits until what is queued is written, unless
// interrupted (a signal that ends waits came already), and no longer once
// such a signal comes from sigs or ctx is done (run's ctx ends its waits):
// with stderr blocked for good, dsync would otherwise not exit at all, as
// its signals are caught. What is queued then is still written while dsync
// runs. Nothing may be written after.
func (m *msgWriter) Close(ctx context.Context, sigs <-chan os.Signal, interrupted bool) {
	close(m.q)
	for !interrupted {
		select {
		case <-m.done:
			return
		case <-ctx.Done():
			return
		case sig := <-sigs:
			switch kindOf(sig) {
			case sigForward:
				interrupted = true
			case sigStop:
				stopSelf()
			}
		}
	}
}
