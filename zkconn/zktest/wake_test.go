package zktest

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestWaker: a waker returns no sooner than the time it was given, at once
// for a time not in the future, and early once its context ends, on Linux's
// timerfd and on Go's timers alike; it opens a timerfd only once it sleeps.
func TestWaker(t *testing.T) {
	for _, fine := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		w := newWaker(ctx)
		if !fine {
			w.useTimer() // as where there is no timerfd
		}
		for _, d := range []time.Duration{0, -time.Millisecond, 3 * time.Millisecond, 20 * time.Millisecond} {
			if d == 3*time.Millisecond && w.fine != nil {
				t.Fatal("a waker that never slept holds a timerfd")
			}
			at := time.Now().Add(d)
			w.until(at)
			if now := time.Now(); now.Before(at) {
				t.Errorf("fine %v: until(now + %v) returned %v early", fine, d, at.Sub(now))
			}
		}
		if fine && runtime.GOOS == "linux" && w.fine == nil {
			t.Error("a waker on Linux slept without a timerfd")
		}
		var zero time.Time
		w.until(zero) // no delay: returns at once

		done := make(chan struct{})
		go func() {
			defer close(done)
			w.until(time.Now().Add(time.Hour))
		}()
		cancel()
		<-done                             // returns once ctx ends, not in an hour
		w.until(time.Now().Add(time.Hour)) // ctx is done: at once
		w.close()
	}
}
