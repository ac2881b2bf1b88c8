package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// errTimedOut is the cause of a wait given up after -timeout.
var errTimedOut = errors.New("timed out")

// errInterrupted is the cause of a wait given up because dsync got a signal.
type errInterrupted struct{ sig os.Signal }

func (e errInterrupted) Error() string { return "interrupted by " + e.sig.String() }

// A grant is what "lock", "sem", "elect" or "once" acquired: a hold to run
// CMD under.
type grant struct {
	held    context.Context // canceled, with a cause, when the hold is lost
	what    string          // what is held, for messages: "lock on PATH", "leadership of PATH"
	revoked <-chan struct{} // closed when a revocation is requested (-revocable), else nil
	// end releases the hold (after a loss too), once CMD has ended with
	// status (or did not run, status saying why; lost if CMD was ended, or
	// not started, for the hold's loss), and returns dsync's exit status.
	end     func(status int, lost bool) int
	env     []string      // for CMD
	timeout time.Duration // the session timeout the server granted
	grace   time.Duration // between SIGTERM and SIGKILL (graceFor)
}

// releasing returns the end of a grant that release releases: CMD's status
// is dsync's.
func releasing(release func()) func(status int, lost bool) int {
	return func(status int, _ bool) int {
		release()
		return status
	}
}

// cmdEnv returns what CMD's environment gains: DSYNC_PATH, and DSYNC_TOKEN
// if token is not 0 (else CMD gets no DSYNC_TOKEN, even when dsync has one:
// see newChild).
func cmdEnv(path string, token int64) []string {
	env := []string{"DSYNC_PATH=" + path}
	if token != 0 {
		env = append(env, "DSYNC_TOKEN="+strconv.FormatInt(token, 10))
	}
	return env
}

// runHeld runs "dsync lock" (name "lock"), "dsync sem", "dsync elect" or
// "dsync once": it acquires, runs CMD, releases (and for once records the
// run), and returns the exit status.
func runHeld(ctx context.Context, name string, s *settings, stdout, stderr io.Writer) int {
	// A CMD that cannot be run is found out before anything is dialed, not
	// once the lock is held.
	if _, err := exec.LookPath(s.argv[0]); err != nil {
		return startFailed(stderr, err)
	}
	sigs, stop := notifySignals()
	defer stop()

	var notice time.Duration
	if isTerminal(stderr) {
		notice = waitNoticeAfter
	}
	// dsync's own messages never wait for stderr (see msgWriter); CMD
	// writes to it directly.
	msgs := newMsgWriter(stderr)
	sess, g, code, interrupted := acquire(ctx, name, s, notice, sigs, msgs)
	if g != nil {
		states := sess.Subscribe()
		code = g.end(newChild(s, g, stdout, stderr, msgs).run(ctx, g.held, states.C(), sigs))
		states.Stop()
		interrupted = shutdown(ctx, sess, g.timeout, sigs)
	}
	msgs.Close(ctx, sigs, interrupted) // after the release: stderr may block
	return code
}

// shutdown closes sess once the release has reached the server (see
// zkconn.Session.Shutdown): a release whose delete was cut with its
// connection goes out again on the next one, rather than stay for the
// server to expire with the session while others wait behind it. It waits
// at most timeout, the session's (the server has let the session go by
// then), and no longer once ctx is done or a signal that ends waits comes;
// then Close takes a second at most. It reports whether such a signal came.
func shutdown(ctx context.Context, sess *zkconn.Session, timeout time.Duration, sigs <-chan os.Signal) (interrupted bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sess.Shutdown(ctx)
	}()
	for {
		select {
		case <-done:
			return interrupted
		case sig := <-sigs:
			switch kindOf(sig) {
			case sigForward:
				interrupted = true
				cancel()
			case sigStop:
				stopSelf()
			}
		}
	}
}

// acquire connects and takes the lock (or leadership, or the run's lock),
// giving up after -timeout, after -dial-timeout if no server answers, at
// once under -try if others are ahead, on a signal from sigs, or when ctx
// is done. After waiting notice in line (0: never), it says on stderr who
// holds the lock. On failure, or when there is nothing to run (a once done
// already), it reports why on stderr and returns a nil grant and the exit
// status, having closed the Session; interrupted reports that a signal that
// ends waits came.
func acquire(ctx context.Context, name string, s *settings, notice time.Duration, sigs <-chan os.Signal, stderr io.Writer) (_ *zkconn.Session, _ *grant, _ int, interrupted bool) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wctx, stop := bounded(wctx, s.timeout)
	defer stop()

	type result struct {
		sess *zkconn.Session
		g    *grant
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sess, g, err := take(wctx, name, s, notice, stderr)
		done <- result{sess, g, err}
	}()
	var sig os.Signal
	for {
		select {
		case got := <-sigs:
			switch kindOf(got) {
			case sigForward:
				sig = got
				cancel(errInterrupted{sig})
			case sigStop:
				stopSelf() // no CMD yet
			}
			continue
		case r := <-done:
			if sig != nil {
				// The signal may have come too late to stop the acquisition.
				if r.g != nil {
					r.g.end(128+signalNumber(sig), false)
					shutdown(ctx, r.sess, r.g.timeout, sigs)
				}
				fmt.Fprintf(stderr, "dsync: interrupted waiting for %s\n", s.path)
				return nil, nil, 128 + signalNumber(sig), true
			}
			if r.err == nil {
				return r.sess, r.g, 0, false
			}
			if errors.Is(r.err, errDone) {
				if isTerminal(stderr) {
					fmt.Fprintf(stderr, "dsync: %s: done already; CMD not run\n", s.path)
				}
				return nil, nil, 0, false
			}
			var usage *badUsage
			var lostEarly *lostBeforeRun
			_, unanswered := dialTimedOut(r.err)
			switch {
			case errors.As(r.err, &lostEarly):
				sayLostBeforeStart(stderr, lostEarly.what, lostEarly.err)
				return nil, nil, s.exitLost, false
			case errors.As(r.err, &usage):
				fmt.Fprintf(stderr, "dsync %s: %v\n", name, r.err)
				return nil, nil, exitUsage, false
			case unanswered:
				fmt.Fprintf(stderr, "dsync: %v\n", r.err)
			case errors.Is(r.err, dsync.ErrWouldBlock):
				fmt.Fprintf(stderr, "dsync: %s is held\n", s.path)
			case errors.Is(r.err, errTimedOut):
				fmt.Fprintf(stderr, "dsync: timed out waiting for %s%s\n", s.path, dialNote(r.err))
			default:
				fmt.Fprintf(stderr, "dsync: %s: %v\n", s.path, r.err)
			}
			return nil, nil, exitFail, false
		}
	}
}

// take dials ZooKeeper and acquires the mutex, the leases, leadership or
// the run's lock, as the subcommand name does, saying on stderr who holds
// them once it has waited notice in line (0: never). On failure it closes
// the Session and returns a *dialError if no server answered (see dialZK),
// the cause of ctx (errTimedOut…) when ctx ended the wait,
// dsync.ErrWouldBlock under -try, or errDone for a once done already.
func take(ctx context.Context, name string, s *settings, notice time.Duration, stderr io.Writer) (*zkconn.Session, *grant, error) {
	sess, err := dialZK(ctx, s, stderr)
	if err != nil {
		return nil, nil, err
	}
	timeout := sess.SessionTimeout()
	grace, err := graceFor(s, timeout)
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	if s.try {
		// -try waits for nobody, but its requests take a moment: bound
		// them as TryLock does, by the session timeout the server granted
		// (-dial-timeout bounded the dial).
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, timeout, errTimedOut)
		defer stop()
	}
	stopNotice := noticeWaiting(ctx, sess, name, s, notice, stderr)
	var g *grant
	switch name {
	case "sem":
		g, err = takeLeases(ctx, sess, s)
	case "elect":
		g, err = takeLeadership(ctx, sess, s)
	case "once":
		g, err = takeRun(ctx, sess, s, stderr)
	default:
		g, err = takeMutex(ctx, sess, s)
	}
	stopNotice()
	if err != nil {
		sess.Close()
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, nil, err
	}
	g.timeout, g.grace = timeout, grace
	return sess, g, nil
}

func takeMutex(ctx context.Context, sess *zkconn.Session, s *settings) (*grant, error) {
	var opts []dsync.Option
	if s.revocable {
		opts = append(opts, dsync.Revocable())
	}
	m := dsync.NewMutex(sess, s.path, opts...)
	lock := m.LockContext
	if s.try {
		lock = m.TryLockContext
	}
	held, err := lock(ctx)
	if err != nil {
		return nil, err
	}
	return &grant{
		held:    held,
		what:    "lock on " + s.path,
		revoked: dsync.Revoked(held),
		end:     releasing(m.Unlock),
		env:     cmdEnv(s.path, m.Token()),
	}, nil
}

// takeLeases acquires -n leases; the grant's hold context ends when any of
// them is lost.
func takeLeases(ctx context.Context, sess *zkconn.Session, s *settings) (*grant, error) {
	w := dsync.NewWeighted(sess, s.path, s.max)
	acquire := w.AcquireLeases
	if s.try {
		acquire = w.TryAcquireLeases
	}
	leases, err := acquire(ctx, s.n)
	if err != nil {
		return nil, err
	}
	held, cancel := context.WithCancelCause(context.Background())
	stops := make([]func() bool, len(leases))
	for i, l := range leases {
		stops[i] = context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	}
	release := func() {
		for _, stop := range stops {
			stop()
		}
		cancel(context.Canceled)
		for _, l := range leases {
			l.Release()
		}
	}
	return &grant{held: held, what: "lock on " + s.path, end: releasing(release), env: cmdEnv(s.path, 0)}, nil
}
