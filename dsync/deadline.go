package main

import "time"

// killDeadline returns the longest -grace that still has CMD's process
// group dead before the server can expire a session of timeout t, so
// before anyone else can take the lock: t/4.
//
// go-zookeeper pings every t/3 and gives a connection up 2t/3 after its
// last reply, when dsync learns that the lock is lost (SIGTERM); the server
// may expire the session t after it last heard from dsync. That leaves
// about t/3 for the grace period and SIGKILL; t/4 keeps t/12 of it (833ms
// of 10s) for the reply's way back, a busy machine, and processes to die.
func killDeadline(t time.Duration) time.Duration { return t / 4 }

// graceFor returns the grace period for a session of timeout t granted by
// the server: -grace if given, else killDeadline(t). A -grace longer than
// killDeadline(t) is a usage error (exit 2), before the lock is taken.
func graceFor(s *settings, t time.Duration) (time.Duration, error) {
	limit := killDeadline(t)
	switch {
	case !s.graceSet:
		return limit, nil
	case s.grace > limit:
		return 0, usageError("-grace %v is too long for a session timeout of %v: CMD must be dead before the session can expire; -grace must be at most %v (a quarter of the session timeout)", s.grace, t, limit)
	}
	return s.grace, nil
}

// stoppedTooLong reports whether a dsync process stopped for d may have
// lost its session of timeout t: d exceeds killDeadline(t).
func stoppedTooLong(d, t time.Duration) bool { return d > killDeadline(t) }
