package main

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"
)

// r98Blocked is a stderr that blocks every write until unblocked (a pipe
// nobody reads, a terminal paused with Ctrl-S).
type r98Blocked struct {
	once    sync.Once
	release chan struct{}
	wrote   chan struct{} // closed at the first write attempt
	wOnce   sync.Once
}

func (b *r98Blocked) Write(p []byte) (int, error) {
	b.wOnce.Do(func() { close(b.wrote) })
	<-b.release
	return len(p), nil
}

func (b *r98Blocked) unblock() { b.once.Do(func() { close(b.release) }) }

// TestReviewR98CanceledWaitStderrBlocked: run's contract (main.go) is that
// canceling ctx ends a wait for a lock. dsync lock waits behind another
// holder with its stderr blocked; ctx is canceled: acquire gives up and
// queues "dsync: PATH: context canceled", and run then waits in
// msgWriter.Close for stderr, which only a signal ends, not ctx. run does
// not return although its ctx ended long ago.
func TestReviewR98CanceledWaitStderrBlocked(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t)
	holdMutex(t, path)

	stderr := &r98Blocked{release: make(chan struct{}), wrote: make(chan struct{})}
	t.Cleanup(stderr.unblock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"lock", "-zk", shared.Addr(), path, "--", "true"}, &stdout, stderr) }()
	awaitChildren(t, obs, path, 2) // dsync waits in line
	cancel()
	select {
	case code := <-done:
		t.Logf("run returned %d after its ctx was canceled", code)
	case <-time.After(15 * time.Second):
		select {
		case <-stderr.wrote:
			t.Errorf("run, its ctx canceled while it waited for the lock, did not return within 15s: blocked on stderr (msgWriter.Close ignores ctx)")
		default:
			t.Errorf("run, its ctx canceled while it waited for the lock, did not return within 15s (nothing written to stderr)")
		}
		stderr.unblock()
		<-done
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

// TestReviewR98SignalWhileWaitingStderrBlocked: dsync lock waits behind
// another holder with its stderr a full pipe. One SIGTERM: acquire gives
// up, queues "interrupted waiting for PATH", and runHeld's msgWriter.Close
// is told no signal came (interrupted false), so dsync waits for stderr
// until a second signal, although a signal that ends waits came already
// (Close's doc; the grant path's shutdown passes it on).
func TestReviewR98SignalWhileWaitingStderrBlocked(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t)
	holdMutex(t, path)
	_, w := r92FullPipe(t)
	p := startWith(t, func(p *proc) { p.cmd.Stderr = w }, "lock", "-zk", shared.Addr(), path, "--", "true")
	awaitChildren(t, obs, path, 2) // dsync waits in line
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 1) // it gave up its place
	select {
	case <-p.done:
		t.Logf("dsync exited: %v", p.err)
	case <-time.After(10 * time.Second):
		t.Errorf("dsync, interrupted by SIGTERM while it waited for the lock, did not exit within 10s (stderr blocked): only a second signal ends msgWriter.Close")
	}
}
