package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// A row is one node of the listing.
type row struct {
	role string // "holder", "leader", "waiter" or "done"
	node string // relative to PATH
	p    dsync.Participant
}

// runLs runs "dsync ls": it prints the holders and waiters at s.path.
func runLs(ctx context.Context, s *settings, stdout, stderr io.Writer) int {
	ctx, cancel := bounded(ctx, s.timeout)
	defer cancel()
	rows, err := list(ctx, s, stderr)
	if err != nil {
		return failed(ctx, "ls", "listing", s.path, err, stderr)
	}
	if len(rows) == 0 {
		fmt.Fprintf(stdout, "no holders or waiters at %s\n", s.path)
		return 0
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNODE\tSESSION\tAGE\tDATA")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.role, r.node, session(r.p.Session), age(now.Sub(r.p.Created)), data(r.p.Data))
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "dsync: %v\n", err)
		return exitFail
	}
	return 0
}

// list connects and lists the nodes at s.path in order: holders first.
func list(ctx context.Context, s *settings, stderr io.Writer) ([]row, error) {
	sess, err := dialZK(ctx, s, stderr)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	h, err := sess.Current(ctx)
	if err != nil {
		return nil, err
	}
	var kids []string
	err = h.Do(ctx, func(c *zk.Conn) (err error) {
		kids, _, err = c.Children(s.path)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case slices.Contains(kids, "leases") || slices.Contains(kids, "locks"):
		return listSemaphore(ctx, sess, s.path)
	case slices.Contains(kids, "lock") || slices.Contains(kids, "done"):
		return listOnce(ctx, sess, s.path)
	case slices.ContainsFunc(kids, isReadWrite):
		return listReadWrite(ctx, sess, s.path)
	case slices.ContainsFunc(kids, isLatch):
		line, err := dsync.NewElection(sess, s.path).Participants(ctx)
		return queueRows(line, "leader", ""), err
	}
	line, err := dsync.NewMutex(sess, s.path).Participants(ctx)
	return queueRows(line, "holder", ""), err
}

// queueRows returns the rows of the nodes of a queue, line, in order: the
// first one's role is first, the others wait. prefix goes before each node's
// name.
func queueRows(line []dsync.Participant, first, prefix string) []row {
	rows := make([]row, len(line))
	for i, p := range line {
		rows[i] = row{role: "waiter", node: prefix + p.Node, p: p}
	}
	if len(rows) > 0 {
		rows[0].role = first
	}
	return rows
}

// isLatch reports whether a node is an Election's (Curator's LeaderLatch
// layout).
func isLatch(node string) bool { return strings.Contains(node, "latch-") }

// listOnce lists the Once at path (see dsync.Once): the record of the run
// that succeeded, if any, then the nodes queued at PATH/lock.
func listOnce(ctx context.Context, sess *zkconn.Session, path string) ([]row, error) {
	rec, done, err := dsync.NewOnce(sess, path).Record(ctx)
	if err != nil {
		return nil, err
	}
	line, err := dsync.NewMutex(sess, oncePath(path, "lock")).Participants(ctx)
	if err != nil {
		return nil, err
	}
	rows := queueRows(line, "holder", "lock/")
	if done {
		rows = append([]row{{role: "done", node: "done", p: dsync.Participant{Data: rec.Data, Created: rec.Created}}}, rows...)
	}
	return rows, nil
}

// isReadWrite reports whether a node is an RWMutex's (Curator's
// InterProcessReadWriteLock layout).
func isReadWrite(node string) bool {
	return strings.Contains(node, "__READ__") || strings.Contains(node, "__WRIT__")
}

// listReadWrite lists a read/write lock in queue order: the holders (one
// writer, or the readers ahead of every writer), then the waiters.
func listReadWrite(ctx context.Context, sess *zkconn.Session, path string) ([]row, error) {
	line, err := dsync.NewRWMutex(sess, path).Participants(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]row, len(line))
	for i, p := range line {
		rows[i] = row{role: "holder", node: p.Node, p: p}
		if p.Waiting {
			rows[i].role = "waiter"
		}
	}
	return rows, nil
}

// listSemaphore lists a semaphore (Curator's InterProcessSemaphoreV2
// layout): the lease nodes held, then those of the acquirer that holds the
// internal lock while it waits for room (marked Waiting), then the nodes
// queued for the internal lock at PATH/locks.
func listSemaphore(ctx context.Context, sess *zkconn.Session, path string) ([]row, error) {
	leases, err := dsync.NewWeighted(sess, path, 1).Participants(ctx)
	if err != nil {
		return nil, err
	}
	locks, err := dsync.NewMutex(sess, path+"/locks").Participants(ctx)
	if err != nil {
		return nil, err
	}
	var holders, pending, waiters []row
	for _, p := range leases {
		r := row{role: "holder", node: "leases/" + p.Node, p: p}
		if p.Waiting {
			r.role = "waiter"
			pending = append(pending, r)
			continue
		}
		holders = append(holders, r)
	}
	for _, p := range locks {
		waiters = append(waiters, row{role: "waiter", node: "locks/" + p.Node, p: p})
	}
	return slices.Concat(holders, pending, waiters), nil
}

// session formats the ZooKeeper session of a node: "-" for a persistent
// node (a once's record).
func session(id int64) string {
	if id == 0 {
		return "-"
	}
	return fmt.Sprintf("0x%x", uint64(id))
}

// age formats how long ago a node was made, rounded to what matters.
func age(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	return d.String()
}

// data formats node data: as is when it is printable text, quoted when not,
// "-" when empty.
func data(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	s := string(b)
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
