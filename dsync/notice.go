package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"golang.org/x/term"
)

// waitNoticeAfter is how long "lock", "sem", "elect" and "once" wait in
// line before they say who holds the lock (or leads), when stderr is a
// terminal (lockUsage and electUsage say so too).
const waitNoticeAfter = 3 * time.Second

// isTerminal reports whether w is a terminal. dsync says who holds the lock
// it waits for only to a person watching: in a log, the wait shows anyway.
func isTerminal(w io.Writer) bool {
	if m, ok := w.(*msgWriter); ok {
		return m.tty
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn() // not f.Fd(), which would make f blocking
	if err != nil {
		return false
	}
	tty := false
	rc.Control(func(fd uintptr) { tty = term.IsTerminal(int(fd)) })
	return tty
}

// noticeWaiting starts saying on w, once, who holds the lock of the
// subcommand name at s.path, after waiting after in line (after <= 0:
// never). It returns a function that stops it and returns once it has
// ended: no line is written after that. ctx bounds it too.
func noticeWaiting(ctx context.Context, sess *zkconn.Session, name string, s *settings, after time.Duration, w io.Writer) (stop func()) {
	if after <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, err := holders(ctx, sess, name, s)
		if err != nil || held == "" || ctx.Err() != nil {
			return // the wait is over, or ZooKeeper failed: the acquisition reports that
		}
		fmt.Fprintf(w, "dsync: waiting for %s (%s)\n", s.path, held)
	}()
	return func() {
		cancel()
		<-done
	}
}

// holders describes who holds the lock at s.path: "held by DATA, session
// 0x…" for a mutex (a once's at PATH/lock), "led by ID, session 0x…" for an
// election, "K of N leases held, W wanted; first holder DATA, session 0x…"
// for a semaphore. It returns "" when nobody else holds it.
func holders(ctx context.Context, sess *zkconn.Session, name string, s *settings) (string, error) {
	if name == "sem" {
		leases, err := dsync.NewWeighted(sess, s.path, s.max).Participants(ctx)
		if err != nil {
			return "", err
		}
		var held []dsync.Participant
		for _, p := range leases {
			if !p.Waiting {
				held = append(held, p)
			}
		}
		if len(held) == 0 {
			return "", nil
		}
		return fmt.Sprintf("%d of %d leases held, %d wanted; first holder %s", len(held), s.max, s.n, holder(held[0])), nil
	}
	h, err := sess.Current(ctx)
	if err != nil {
		return "", err
	}
	var (
		line []dsync.Participant
		by   = "held by "
	)
	switch name {
	case "elect":
		line, err = newElection(sess, s).Participants(ctx)
		by = "led by "
	case "once":
		line, err = dsync.NewMutex(sess, oncePath(s.path, "lock")).Participants(ctx)
	default:
		line, err = dsync.NewMutex(sess, s.path).Participants(ctx)
	}
	if err != nil {
		return "", err
	}
	if len(line) == 0 || line[0].Session == h.ID() {
		return "", nil // dsync holds it now
	}
	return by + holder(line[0]), nil
}

// holder describes the node of a holder: its data (host and pid for dsync,
// an IP address for Curator; a revocable node has none) and its session.
func holder(p dsync.Participant) string {
	if len(p.Data) == 0 {
		return fmt.Sprintf("session 0x%x", uint64(p.Session))
	}
	return fmt.Sprintf("%s, session 0x%x", data(p.Data), uint64(p.Session))
}
