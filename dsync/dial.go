package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/dsync-go/dsync/zkconn"
)

// defaultDialTimeout is the default of -dial-timeout: Curator's default
// connection timeout (CuratorFrameworkFactory, 15s). It is not derived from
// -session-timeout, which says how long a session outlives a dropped
// connection, not how long to wait for a first one. 15s lets go-zookeeper go
// round a three-server ensemble several times (1s per server that drops
// packets, 1s between rounds) and outlasts a leader election, during which
// servers turn clients away.
const defaultDialTimeout = 15 * time.Second

// errDialTimeout is the cause of a dial given up after -dial-timeout.
var errDialTimeout = errors.New("dial timed out")

// A dialError is a dial given up before any ZooKeeper server answered.
type dialError struct {
	servers []string      // -zk, split
	within  time.Duration // -dial-timeout when it ended the dial, else 0
	cause   error         // errDialTimeout, or why the caller's ctx ended (errTimedOut…)
}

func (e *dialError) Error() string {
	var within string
	if e.within > 0 {
		within = " within " + e.within.String()
	}
	return fmt.Sprintf("no ZooKeeper server answered%s: %s", within, strings.Join(e.servers, ", "))
}

func (e *dialError) Unwrap() error { return e.cause }

// dialZK connects to the servers of -zk, giving up after -dial-timeout, or when
// ctx is done. Its error is a *dialError when no server answered in time,
// wrapping errDialTimeout or ctx's cause.
func dialZK(ctx context.Context, s *settings, stderr io.Writer) (*zkconn.Session, error) {
	dctx, cancel := context.WithTimeoutCause(ctx, s.dialTimeout, errDialTimeout)
	defer cancel()
	sess, err := zkconn.Dial(dctx, s.servers, append([]zkconn.Option{
		zkconn.WithSessionTimeout(s.sessionTimeout),
		zkconn.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))),
	}, s.tls.options()...)...)
	switch {
	case err == nil:
		return sess, nil
	case ctx.Err() != nil:
		return nil, &dialError{servers: s.servers, cause: context.Cause(ctx)}
	case dctx.Err() != nil:
		return nil, &dialError{servers: s.servers, within: s.dialTimeout, cause: errDialTimeout}
	}
	return nil, err
}

// dialTimedOut reports whether err is a dial ended by -dial-timeout, and if
// so returns it.
func dialTimedOut(err error) (*dialError, bool) {
	var de *dialError
	if errors.As(err, &de) && errors.Is(de.cause, errDialTimeout) {
		return de, true
	}
	return nil, false
}

// dialNote returns, for the end of a message about a wait cut short by
// -timeout, " (no ZooKeeper server answered: …)" if err says the wait was
// still dialing; otherwise "".
func dialNote(err error) string {
	var de *dialError
	if errors.As(err, &de) {
		return " (" + de.Error() + ")"
	}
	return ""
}

// bounded returns ctx ended after -timeout d (cause errTimedOut), or never
// if d is 0.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeoutCause(ctx, d, errTimedOut)
	}
	return context.WithCancel(ctx)
}

// failed reports on stderr why the subcommand name, doing something at
// path ("listing"), failed with err, and returns exit status 1: no server
// answered within -dial-timeout, -timeout passed (the cause of ctx), or
// err.
func failed(ctx context.Context, name, doing, path string, err error, stderr io.Writer) int {
	if de, ok := dialTimedOut(err); ok {
		fmt.Fprintf(stderr, "dsync: %v\n", de)
		return exitFail
	}
	note := dialNote(err)
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if errors.Is(err, errTimedOut) {
		fmt.Fprintf(stderr, "dsync: timed out %s %s%s\n", doing, path, note)
	} else {
		fmt.Fprintf(stderr, "dsync: %s %s: %v\n", name, path, err)
	}
	return exitFail
}
