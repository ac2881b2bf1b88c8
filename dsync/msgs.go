package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"time"
)

// A msgWriter writes dsync's messages to w from a goroutine of its own, so
// that a write that blocks (a pipe nobody reads just then, a terminal
// paused with Ctrl-S) never holds up what child.run does about CMD: the
// SIGTERM and SIGKILL of a lost lock must not wait for stderr. Messages
// beyond its queue (64) are dropped.
type msgWriter struct {
	q     chan []byte
	done  chan struct{}
	tty   bool          // w is a terminal (isTerminal)
	grace time.Duration // Close's, once a signal came: msgGrace, but in tests
	// waiting, if not nil, is called each time Close is about to wait
	// (tests).
	waiting func()
}

// newMsgWriter starts a msgWriter writing to w.
func newMsgWriter(w io.Writer) *msgWriter {
	m := &msgWriter{q: make(chan []byte, 64), done: make(chan struct{}), tty: isTerminal(w), grace: msgGrace}
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

// Close ends the writer and waits until what is queued is written. Once a
// signal that ends waits has come (interrupted: before Close; or from
// sigs) or ctx is done (run's ctx ends its waits), it waits m.grace more
// at most, and a second such signal ends it at once: with stderr blocked
// for good, dsync would otherwise not exit at all, as its signals are
// caught. The grace is wall-clock time: it runs on while dsync is stopped
// (SIGTSTP). What is queued then is still written while dsync runs.
// Nothing may be written after.
func (m *msgWriter) Close(ctx context.Context, sigs <-chan os.Signal, interrupted bool) {
	close(m.q)
	var grace <-chan time.Time // once a signal came or ctx is done
	begin := func() {
		if grace == nil {
			grace = time.After(m.grace)
		}
	}
	if interrupted {
		begin()
	}
	done := ctx.Done()
	for {
		if m.waiting != nil {
			m.waiting()
		}
		select {
		case <-m.done:
			return
		case <-grace:
			return
		case <-done:
			done = nil
			begin()
		case sig := <-sigs:
			switch kindOf(sig) {
			case sigForward:
				if interrupted {
					return
				}
				interrupted = true
				begin()
			case sigStop:
				stopSelf()
			}
		}
	}
}

// msgGrace is how long Close waits for stderr to take dsync's last
// messages (one saying why it stopped, say) once a signal came or run's ctx
// is done: a terminal or pipe that takes them at all does so well within
// it.
const msgGrace = time.Second
