package zkconn

import "context"

// A latch is a channel that closes once, on which functions can wait
// without a goroutine each (after).
type latch struct {
	ctx   context.Context
	close context.CancelFunc // idempotent
}

func newLatch() latch {
	ctx, cancel := context.WithCancel(context.Background())
	return latch{ctx, cancel}
}

// closedLatch is closed already.
var closedLatch = func() latch {
	l := newLatch()
	l.close()
	return l
}()

// done returns the channel that closes with l.
func (l latch) done() <-chan struct{} { return l.ctx.Done() }

// after runs f on a goroutine of its own once l closes (at once if it has),
// unless stop is called first; stop reports whether it stopped f.
func (l latch) after(f func()) (stop func() bool) { return context.AfterFunc(l.ctx, f) }
