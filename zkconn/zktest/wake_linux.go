package zktest

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A timerfd is a Linux timer that the runtime's poller waits on, so that a
// goroutine sleeping on it wakes within tens of microseconds of its time.
type timerfd struct {
	fd   int
	f    *os.File    // fd, read through the poller
	stop func() bool // of the AfterFunc that ends the waits
}

// newTimerfd returns a timerfd whose waits end early once ctx is done, or
// an error if the system offers none (a seccomp filter, say).
func newTimerfd(ctx context.Context) (*timerfd, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t := &timerfd{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}
	t.stop = context.AfterFunc(ctx, func() { t.f.SetReadDeadline(time.Unix(1, 0)) })
	return t, nil
}

// sleep returns after d, or once the context is done. An error means the
// timer could not be used, and sleep may have returned early.
func (t *timerfd) sleep(d time.Duration) error {
	// Setting the timer also clears an expiry not read.
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(t.fd, 0, &spec, nil); err != nil {
		return err
	}
	var expiries [8]byte
	_, err := t.f.Read(expiries[:]) // returns once it expired, or at the deadline ctx's end sets
	return err
}

func (t *timerfd) close() {
	t.stop()
	t.f.Close()
}
