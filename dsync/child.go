package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// Polling for the end of CMD's process group, once CMD has exited: every
// groupPoll, for as long as it takes. A process stuck in the kernel, or one
// dsync may not signal (another user's), can outlive the SIGKILL; then dsync
// warns groupWait after it and keeps the lock (and waits) until the group
// is gone.
const (
	groupPoll = 10 * time.Millisecond
	groupWait = 5 * time.Second
)

// A child is CMD, run while the lock (or leadership) is held.
type child struct {
	cmd      *exec.Cmd
	path     string          // the lock path, for messages
	what     string          // what is held, for messages (grant.what)
	lost     lossAction      // -lost
	exitLost int             // -exit-lost
	grace    time.Duration   // between SIGTERM and SIGKILL
	timeout  time.Duration   // the granted session timeout
	revoked  <-chan struct{} // closed when a revocation is requested (-revocable)
	stderr   io.Writer       // dsync's messages

	// Until the guard has started CMD: ready, closed then (start), and the
	// signals for the group held back till then (signal).
	ready   <-chan struct{}
	pending []os.Signal
}

// newChild prepares argv to run with dsync's stdio (stdout and stderr as
// given, stdin os.Stdin) and environment plus g's, in a process group of
// its own. A DSYNC_TOKEN dsync inherited (from an outer dsync) is not
// passed on: it fences another lock than g's.
func newChild(s *settings, g *grant, stdout, stderr, msgs io.Writer) *child {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	inherited := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DSYNC_TOKEN=") })
	cmd.Env = append(inherited, g.env...)
	// When stdout or stderr is not a file, Wait copies CMD's output through
	// a pipe that CMD's own children may keep open; do not wait for them
	// once CMD has exited.
	cmd.WaitDelay = time.Second
	newProcessGroup(cmd)
	return &child{cmd: cmd, path: s.path, what: g.what, lost: s.lost, exitLost: s.exitLost,
		grace: g.grace, timeout: g.timeout, revoked: g.revoked, stderr: msgs}
}

// run starts CMD and returns once no process of its group is left, while:
//   - when CMD exits, the processes it left in its group get SIGTERM;
//   - signals from sigs are forwarded to CMD's group, stop it, or
//     continue it (signals.go);
//   - when held is done (the lock is lost), CMD's group gets SIGTERM (with
//     -lost ignore: a warning only), or SIGKILL at once if the loss is final
//     already: the session lost (held's cause, or StateLost from states,
//     the Session's transitions), or the node deleted. A session lost while
//     the grace period of a loss runs ends it with SIGKILL at once;
//   - when a revocation is requested (-revocable), CMD's group gets
//     SIGTERM, once and with no SIGKILL after it: CMD decides when to exit;
//     a request made before CMD started keeps it from starting;
//   - when ctx is done, the same happens without counting as a loss;
//   - a loss before dsync learns that the guard has started CMD SIGKILLs
//     the group at once (a SIGTERM would wait for CMD, below): CMD does not
//     start, or dies as it starts;
//   - SIGKILL follows every SIGTERM of the group after the grace period,
//     whatever the first process did meanwhile;
//   - the signals but SIGKILL, SIGSTOP and SIGCONT wait until the guard
//     has started CMD (signal).
//
// It returns the exit status: CMD's (128+N for a death by signal N),
// -exit-lost if the loss terminated CMD, 126/127 if CMD could not be
// started, or 1 if a revocation was requested before it started; and
// whether CMD was ended, or not started, for a loss (whatever -exit-lost
// says, which may equal a status of CMD's).
func (c *child) run(ctx, held context.Context, states <-chan zkconn.Event, sigs <-chan os.Signal) (status int, lost bool) {
	if held.Err() != nil && c.lost != lossIgnore {
		sayLostBeforeStart(c.stderr, c.what, context.Cause(held))
		return c.exitLost, true
	}
	select {
	case <-c.revoked:
		fmt.Fprintf(c.stderr, "dsync: revocation of the lock on %s requested before CMD started: CMD not run\n", c.path)
		return exitFail, false
	default:
	}
	adoptOrphans()
	waited, err := c.start()
	if err != nil {
		return startFailed(c.stderr, err), false
	}
	var (
		lostc       = held.Done()
		donec       = ctx.Done()
		revokedc    = c.revoked
		killc       <-chan time.Time // the grace period is over
		pollc       <-chan time.Time // CMD has exited: is its group gone?
		warnc       <-chan time.Time // groupWait after the SIGKILL
		terminating bool
		gone        bool      // the hold's session is lost
		stopped     time.Time // when dsync stopped itself, if it did
		continued   time.Time // when dsync was last continued after a stop
	)
	// terminate says why dsync ends CMD's group, and the first time sends
	// it SIGTERM and sets the SIGKILL going.
	terminate := func(why string) {
		if terminating {
			fmt.Fprintf(c.stderr, "dsync: %s\n", why)
			return
		}
		terminating = true
		fmt.Fprintf(c.stderr, "dsync: %s: SIGTERM to CMD's process group, SIGKILL after %v\n", why, c.grace)
		c.signal(syscall.SIGTERM)
		killc = time.After(c.grace)
	}
	// kill sends CMD's group SIGKILL, and then says why: whoever reads the
	// message knows the group has it.
	kill := func(why string) {
		terminating, killc = true, nil
		c.signal(os.Kill)
		warnc = time.After(groupWait)
		fmt.Fprintf(c.stderr, "dsync: %s\n", why)
	}
	// lose records the loss of the lock; it reports whether CMD must end.
	lose := func(why string) bool {
		lostc = nil
		if c.lost == lossIgnore {
			fmt.Fprintf(c.stderr, "dsync: warning: %s; CMD keeps running (-lost ignore)\n", why)
			return false
		}
		lost = true
		return true
	}
	end := func() (int, bool) {
		if lost {
			return c.exitLost, true
		}
		return status, false
	}
	for {
		select {
		case <-c.ready:
			c.started()
		case err := <-waited:
			waited = nil
			if c.ready != nil {
				c.started() // closed before waited receives
			}
			status = exitStatus(err, c.stderr)
			if groupGone(c.cmd.Process) {
				return end()
			}
			if !terminating {
				terminate(fmt.Sprintf("CMD exited, leaving processes in its process group %d", c.cmd.Process.Pid))
			}
			ticker := time.NewTicker(groupPoll)
			defer ticker.Stop()
			pollc = ticker.C
		case <-pollc:
			if groupGone(c.cmd.Process) {
				return end()
			}
		case <-warnc:
			warnc = nil
			fmt.Fprintf(c.stderr, "dsync: warning: process group %d still has processes %v after SIGKILL; the %s stays held until they are gone\n", c.cmd.Process.Pid, groupWait, c.what)
		case <-killc:
			kill(fmt.Sprintf("process group %d still runs after %v: SIGKILL", c.cmd.Process.Pid, c.grace))
		case sig := <-sigs:
			switch kindOf(sig) {
			case sigForward:
				fmt.Fprintf(c.stderr, "dsync: got %v: forwarded to CMD's process group\n", sig)
				c.signal(sig)
			case sigStop:
				c.signal(stopSignal)
				stopped = time.Now()
				stopSelf()
			case sigCont:
				d, wasStopped := time.Since(stopped), !stopped.IsZero()
				stopped = time.Time{}
				if wasStopped {
					continued = time.Now()
				}
				why := c.what + " lost"
				if wasStopped && lostc != nil && stoppedTooLong(d, c.timeout) {
					why = fmt.Sprintf("%s may be lost: dsync was stopped for %v, more than a quarter of the session timeout (%v)",
						c.what, d.Round(time.Millisecond), c.timeout)
					lose(why)
				}
				if !wasStopped || !lost {
					c.signal(contSignal)
					break
				}
				// Continued, CMD's group would run without the lock; stopped,
				// it cannot act on SIGTERM.
				kill(fmt.Sprintf("%s: SIGKILL to CMD's stopped process group", why))
			}
		case ev, ok := <-states:
			if !ok {
				states = nil // the Session closed: not while CMD runs
				break
			}
			if ev.State != zkconn.StateLost {
				break
			}
			// The hold's session: the one the Session was on when the hold
			// began, or a later one, which a loss of it precedes.
			states, gone = nil, true
			if lost && killc != nil {
				kill("session lost; the next in line may hold already: SIGKILL to CMD's process group")
			}
		case <-donec:
			donec = nil
			terminate("canceled")
		case <-revokedc:
			revokedc = nil
			if terminating {
				break // CMD's group is being ended anyway
			}
			// Not terminate: no SIGKILL follows (revocation is
			// cooperative), and a loss later still sends its own.
			fmt.Fprintf(c.stderr, "dsync: revocation of the lock on %s requested: SIGTERM to CMD's process group\n", c.path)
			c.signal(syscall.SIGTERM)
		case <-lostc:
			cause := context.Cause(held)
			why := fmt.Sprintf("%s lost: %s", c.what, causeText(cause))
			if !lose(why) {
				break
			}
			if gone || errors.Is(cause, zkconn.ErrSessionLost) || errors.Is(cause, dsync.ErrNodeDeleted) {
				// The grace period ends before the session can expire
				// after a drop; here the session or the node is gone
				// already, and the next in line may hold.
				kill(fmt.Sprintf("%s; the next in line may hold already: SIGKILL to CMD's process group", why))
				break
			}
			if c.ready != nil {
				// A SIGTERM would wait for CMD to start (signal), and CMD
				// would then run without the lock; SIGKILL ends the guard
				// before it starts CMD, or CMD with it if the guard started
				// it after dsync last looked.
				kill(fmt.Sprintf("%s before CMD started: SIGKILL to its guard", why))
				break
			}
			if !continued.IsZero() && time.Since(continued) < c.timeout {
				// A stop delayed the news of the loss by up to its length:
				// the grace period may already be spent.
				kill(fmt.Sprintf("%s; dsync was stopped within the session timeout: SIGKILL to CMD's process group", why))
				break
			}
			terminate(why)
		}
	}
}

// start starts CMD, under its guard (guard.go), and returns a channel that
// receives the result of the guard's Wait, which is CMD's. c.ready closes
// once the guard has started CMD, or is gone, before that result comes.
func (c *child) start() (<-chan error, error) {
	link, err := startGuarded(c.cmd)
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	c.ready = ready
	waited := make(chan error, 1)
	go func() {
		if link != nil {
			_, _ = link.Read(make([]byte, 1)) // end of file: CMD started, or the guard is gone
		}
		close(ready)
		err := c.cmd.Wait()
		if link != nil {
			link.Close() // the guard is gone: nothing reads the other end
		}
		waited <- err
	}()
	return waited, nil
}

// startFailed says on w that CMD could not be started (err), and returns
// the exit status: 127 if it was not found, else 126.
func startFailed(w io.Writer, err error) int {
	fmt.Fprintf(w, "dsync: %v\n", err)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitNoExec
}

// signal sends sig to CMD's process group. Until the guard has started
// CMD (c.ready), it holds back the signals that the guard would take alone,
// and started sends them; SIGKILL, SIGSTOP and SIGCONT go at once: they act
// on the guard as they would on CMD. Sending fails only when the group is
// gone, which the caller learns from groupGone.
func (c *child) signal(sig os.Signal) {
	if c.ready != nil && sig != os.Kill && sig != stopSignal && sig != contSignal {
		c.pending = append(c.pending, sig)
		return
	}
	_ = signalGroup(c.cmd.Process, sig)
}

// started sends the signals held back until the guard started CMD (or was
// gone), in order; call it once c.ready is closed.
func (c *child) started() {
	c.ready = nil
	for _, sig := range c.pending {
		c.signal(sig)
	}
	c.pending = nil
}

// sayLostBeforeStart says on w that what (the lock, leadership) was lost
// after it was acquired and before CMD started, and why.
func sayLostBeforeStart(w io.Writer, what string, cause error) {
	fmt.Fprintf(w, "dsync: %s lost before CMD started: %s\n", what, causeText(cause))
}

// causeText describes the cause of a loss, without repeating "lock lost".
func causeText(cause error) string {
	if cause == nil {
		return "unknown cause"
	}
	msg := cause.Error()
	if errors.Is(cause, dsync.ErrLockLost) {
		msg = strings.TrimPrefix(msg, dsync.ErrLockLost.Error()+": ")
	}
	return msg
}

// exitStatus turns the outcome of Wait into an exit status, as a shell
// does: the exit code, or 128+N after a death by signal N.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return 0 // ErrWaitDelay: CMD exited 0, a child of it kept its output open
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		fmt.Fprintf(stderr, "dsync: %v\n", err)
		return exitFail
	}
	if sig, ok := killedBy(ee.ProcessState); ok {
		return 128 + signalNumber(sig)
	}
	return ee.ExitCode()
}
