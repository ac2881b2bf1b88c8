package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// newElection returns the Election at s.path, in the layout -selector says.
func newElection(sess *zkconn.Session, s *settings) *dsync.Election {
	var opts []dsync.Option
	if s.selector {
		opts = append(opts, dsync.SelectorLayout())
	}
	return dsync.NewElection(sess, s.path, opts...)
}

// takeLeadership campaigns at s.path as -id and returns the leadership.
// Its end resigns without waiting for the reply, as "dsync lock" unlocks:
// the Session's Close, which follows, ends the session and the node with it
// anyway, and does not wait out a partition.
func takeLeadership(ctx context.Context, sess *zkconn.Session, s *settings) (*grant, error) {
	e := newElection(sess, s)
	id := s.id
	if id == "" {
		id = defaultID()
	}
	held, err := e.Campaign(ctx, id)
	if err != nil {
		return nil, err
	}
	resign := func() {
		now, cancel := context.WithCancel(context.Background())
		cancel() // Resign sends the delete whatever its ctx says; it waits for nothing
		_ = e.Resign(now)
	}
	return &grant{held: held, what: "leadership of " + s.path, end: releasing(resign), env: cmdEnv(s.path, e.Token())}, nil
}

// runListen runs "dsync elect -listen": it prints the leader at s.path,
// "ID<TAB>NODE", as it starts and at every change, until SIGINT or SIGTERM
// (or ctx is done; exit 0), or until it cannot go on (exit 1).
func runListen(ctx context.Context, s *settings, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	sess, err := dialZK(ctx, s, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintf(stderr, "dsync: %v\n", err)
		return exitFail
	}
	defer sess.Close()
	for p, err := range newElection(sess, s).Observe(ctx) {
		if err != nil {
			// Observe goes on after an error unless it cannot: then the
			// loop ends, and ctx is not done.
			fmt.Fprintf(stderr, "dsync: elect -listen %s: %v\n", s.path, err)
			continue
		}
		fmt.Fprintf(stdout, "%s\t%s\n", data(p.Data), p.Node)
	}
	if ctx.Err() != nil {
		return 0
	}
	return exitFail
}
