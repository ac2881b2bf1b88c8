package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/dsync-go/dsync"
)

// A child is CMD, run while the lock is held.
type child struct {
	cmd    *exec.Cmd
	path   string        // the lock path, for messages
	lost   lossAction    // -lost
	grace  time.Duration // -grace
	stderr io.Writer     // dsync's messages
}

// newChild prepares argv to run with dsync's stdio (stdout and stderr as
// given, stdin os.Stdin) and environment plus env, in a process group of
// its own.
func newChild(s *settings, env []string, stdout, stderr io.Writer) *child {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(), env...)
	// When stdout or stderr is not a file, Wait copies CMD's output through
	// a pipe that CMD's own children may keep open; do not wait for them
	// once CMD has exited.
	cmd.WaitDelay = time.Second
	newProcessGroup(cmd)
	return &child{cmd: cmd, path: s.path, lost: s.lost, grace: s.grace, stderr: stderr}
}

// run starts CMD and waits for it, while:
//   - signals from sigs are forwarded to CMD's process group;
//   - when held is done (the lock is lost), CMD's group gets SIGTERM and,
//     after the grace period, SIGKILL (with -lost ignore: a warning only);
//   - when ctx is done, the same happens without counting as a loss.
//
// It returns the exit status: CMD's (128+N for a death by signal N), exitLost
// if the loss terminated CMD, or 126/127 if CMD could not be started.
func (c *child) run(ctx, held context.Context, sigs <-chan os.Signal) int {
	if err := c.cmd.Start(); err != nil {
		fmt.Fprintf(c.stderr, "dsync: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitNoExec
	}
	waited := make(chan error, 1)
	go func() { waited <- c.cmd.Wait() }()

	var (
		lostc  = held.Done()
		donec  = ctx.Done()
		killc  <-chan time.Time
		killer *time.Timer
		lost   bool
	)
	defer func() {
		if killer != nil {
			killer.Stop()
		}
	}()
	terminate := func() {
		c.signal(syscall.SIGTERM)
		if killer == nil {
			killer = time.NewTimer(c.grace)
			killc = killer.C
		}
	}
	for {
		select {
		case err := <-waited:
			if lost {
				return exitLost
			}
			return exitStatus(err, c.stderr)
		case sig := <-sigs:
			c.signal(sig)
		case <-donec:
			donec = nil
			terminate()
		case <-lostc:
			lostc = nil
			cause := lossCause(held)
			if c.lost == lossIgnore {
				fmt.Fprintf(c.stderr, "dsync: warning: lock on %s lost: %s; CMD keeps running (-lost ignore)\n", c.path, cause)
				continue
			}
			fmt.Fprintf(c.stderr, "dsync: lock on %s lost: %s\n", c.path, cause)
			lost = true
			terminate()
		case <-killc:
			killc = nil
			c.signal(os.Kill)
		}
	}
}

// signal sends sig to CMD's process group. It fails only when CMD has
// exited, which the caller learns from Wait.
func (c *child) signal(sig os.Signal) {
	_ = signalGroup(c.cmd.Process, sig)
}

// lossCause describes why held was canceled, without repeating "lock lost".
func lossCause(held context.Context) string {
	cause := context.Cause(held)
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
