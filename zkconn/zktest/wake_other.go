//go:build !linux

package zktest

import (
	"context"
	"errors"
	"time"
)

// timerfd is Linux's; elsewhere wakers use Go's timers.
type timerfd struct{}

func newTimerfd(context.Context) (*timerfd, error) {
	return nil, errors.New("zktest: no timerfd on this system")
}

func (*timerfd) sleep(time.Duration) error { return errors.ErrUnsupported }

func (*timerfd) close() {}
