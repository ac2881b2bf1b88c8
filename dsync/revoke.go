package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// runRevoke runs "dsync revoke": it asks the holders of the lock at s.path,
// or the one node at s.path, to release, and prints each node it asked.
func runRevoke(ctx context.Context, s *settings, stdout, stderr io.Writer) int {
	ctx, cancel := bounded(ctx, s.timeout)
	defer cancel()
	sess, err := dialZK(ctx, s, stderr)
	if err != nil {
		return revokeFailed(ctx, s.path, err, stderr)
	}
	defer sess.Close()

	if _, _, ok := zkconn.ParseProtected(path.Base(s.path)); ok {
		if err := dsync.Revoke(ctx, sess, s.path); err != nil {
			return revokeFailed(ctx, s.path, err, stderr)
		}
		fmt.Fprintf(stdout, "asked %s\n", s.path)
		return 0
	}
	asked, err := dsync.RevokeHolders(ctx, sess, s.path)
	for _, p := range asked {
		fmt.Fprintf(stdout, "asked %s (session 0x%x)\n", p.Path, uint64(p.Session))
	}
	switch {
	case err != nil:
		return revokeFailed(ctx, s.path, err, stderr)
	case len(asked) == 0:
		fmt.Fprintf(stderr, "dsync: nobody holds %s\n", s.path)
		return exitFail
	}
	return 0
}

// revokeFailed reports on stderr why dsync revoke failed, and returns its
// exit status.
func revokeFailed(ctx context.Context, p string, err error, stderr io.Writer) int {
	if de, ok := dialTimedOut(err); ok {
		fmt.Fprintf(stderr, "dsync: %v\n", de)
		return exitFail
	}
	unknown := errors.Is(err, dsync.ErrOutcomeUnknown)
	note := dialNote(err)
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	switch {
	case errors.Is(err, errTimedOut) && unknown:
		fmt.Fprintf(stderr, "dsync: timed out asking %s; the last request may or may not have been written\n", p)
	case errors.Is(err, errTimedOut):
		fmt.Fprintf(stderr, "dsync: timed out asking %s%s\n", p, note)
	case errors.Is(err, dsync.ErrNoNode):
		fmt.Fprintf(stderr, "dsync: no such node: %s\n", p)
	case errors.Is(err, dsync.ErrNotRevocable):
		// One line per holder not asked (errors.Join).
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, line)
		}
		fmt.Fprintln(stderr, "dsync: a holder that is not revocable is not asked (only \"dsync lock -revocable\" and Curator's makeRevocable are)")
	default:
		fmt.Fprintf(stderr, "dsync: revoke %s: %v\n", p, err)
	}
	return exitFail
}
