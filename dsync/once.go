package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// errDone is returned by takeRun when a run at PATH had succeeded already:
// CMD does not run, and dsync exits 0.
var errDone = errors.New("done already")

// A ranError is what the function of a run returns to dsync.Once.Do when
// the run must not be recorded: CMD failed (status is its exit status), or
// the run's lock was lost before CMD's process group was gone (status is
// -exit-lost).
type ranError struct{ status int }

func (e *ranError) Error() string { return fmt.Sprintf("CMD ended with status %d", e.status) }

// oncePath returns the path of the node name (lock, done) of the Once at
// path (see dsync.Once).
func oncePath(path, name string) string { return strings.TrimSuffix(path, "/") + "/" + name }

// takeRun starts dsync.Once.Do at s.path, whose function hands the hold of
// the run's lock over as a grant and waits for its end: CMD runs under it
// as it does under a lock, and the grant's end passes CMD's status back to
// the function, waits for Do to record the run (or not), and returns
// dsync's exit status. takeRun returns errDone if a run had succeeded
// already (or succeeded while this one waited), a *lostBeforeRun if the
// run's lock was lost after Do took it and before it called the function,
// and Do's error if Do failed otherwise before calling the function. ctx
// bounds the wait for the lock only, as it does Do's.
func takeRun(ctx context.Context, sess *zkconn.Session, s *settings, stderr io.Writer) (*grant, error) {
	o := dsync.NewOnce(sess, s.path)
	granted := make(chan *grant, 1)
	did := make(chan error, 1) // Do's result, for takeRun or for the grant's end
	go func() {
		did <- o.Do(ctx, func(held context.Context) error {
			if ctx.Err() != nil {
				return context.Cause(ctx) // the wait was given up meanwhile
			}
			type ending struct {
				status int
				lost   bool
			}
			ended := make(chan ending)
			end := func(status int, lost bool) int {
				ended <- ending{status, lost}
				return runStatus(s, <-did, stderr)
			}
			granted <- &grant{held: held, what: "lock on " + oncePath(s.path, "lock"), end: end, env: cmdEnv(s.path, dsync.Token(held))}
			switch e := <-ended; {
			case e.lost, held.Err() != nil && s.lost == lossTerm:
				// CMD was ended for the loss, or its group was not yet
				// gone when the lock was lost: not a run to record.
				return &ranError{s.exitLost}
			case e.status != 0:
				return &ranError{e.status}
			}
			return nil
		})
	}()
	select {
	case g := <-granted:
		return g, nil
	case err := <-did:
		if err == nil {
			return nil, errDone
		}
		if errors.Is(err, dsync.ErrLockLost) && ctx.Err() == nil {
			// Taken, then lost before CMD could start: as "dsync lock"
			// says and exits when that happens.
			return nil, &lostBeforeRun{what: "lock on " + oncePath(s.path, "lock"), err: err}
		}
		return nil, err
	}
}

// A lostBeforeRun is a run's lock lost after it was taken, before CMD
// started: dsync exits -exit-lost, as child.run does for the same loss.
type lostBeforeRun struct {
	what string
	err  error
}

func (e *lostBeforeRun) Error() string { return e.err.Error() }
func (e *lostBeforeRun) Unwrap() error { return e.err }

// runStatus returns the exit status of a run whose CMD ran, given what Do
// returned, and says on stderr why a run that CMD did not fail is not
// recorded.
func runStatus(s *settings, err error, stderr io.Writer) int {
	var ran *ranError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ran):
		return ran.status // child.run has said why, if CMD did not
	case errors.Is(err, dsync.ErrLockLost) && errors.Is(err, dsync.ErrOutcomeUnknown):
		fmt.Fprintf(stderr, "dsync: %s: the run's lock was lost while its success was being recorded: "+
			"the record may or may not be written (-status tells): %v\n", s.path, err)
		return s.exitLost
	case errors.Is(err, dsync.ErrLockLost):
		fmt.Fprintf(stderr, "dsync: %s: the run's lock was lost before its success was recorded: not recorded: %v\n", s.path, err)
		return s.exitLost
	}
	fmt.Fprintf(stderr, "dsync: %s: CMD succeeded but its success was not recorded: %v\n", s.path, err)
	return exitFail
}

// runOnceAdmin runs "dsync once -status" (printing "done RECORD" or "not
// done") or "dsync once -reset", and returns the exit status.
func runOnceAdmin(ctx context.Context, s *settings, stdout, stderr io.Writer) int {
	doing := "reading"
	if s.reset {
		doing = "resetting"
	}
	ctx, cancel := bounded(ctx, s.timeout)
	defer cancel()
	sess, err := dialZK(ctx, s, stderr)
	if err != nil {
		return failed(ctx, "once", doing, s.path, err, stderr)
	}
	defer sess.Close()
	if s.reset {
		if err := dsync.NewOnce(sess, s.path).Reset(ctx); err != nil {
			code := failed(ctx, "once", doing, s.path, err, stderr)
			if errors.Is(err, dsync.ErrOutcomeUnknown) {
				fmt.Fprintf(stderr, "dsync: the delete of %s was sent and its reply not read: the record may or may not have been deleted (-status tells)\n", oncePath(s.path, "done"))
			}
			return code
		}
		return 0
	}
	rec, done, err := dsync.NewOnce(sess, s.path).Record(ctx)
	switch {
	case err != nil:
		return failed(ctx, "once", doing, s.path, err, stderr)
	case !done:
		fmt.Fprintln(stdout, "not done")
	default:
		fmt.Fprintf(stdout, "done %s\n", data(rec.Data))
	}
	return 0
}
