package main

import (
	"context"
	"errors"
	"slices"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// errHeld is the cause of a -try acquisition given up because another
// process is ahead.
var errHeld = errors.New("held by another process")

// watchQueue supports -try. The acquisition runs as usual (so that it
// yields the hold context that reports loss), while watchQueue watches the
// queue and cancels it, with cause errHeld, as soon as this process's node
// is found behind another one:
//   - mutex: our node in PATH is not the first;
//   - semaphore: our node in PATH/locks is not the first, or it is and the
//     leases of others leave no room for -n more.
//
// This process has one Session and acquires once, so the nodes owned by its
// ZooKeeper session are its own. If the acquisition succeeds first, nothing
// is canceled. Errors end the watching only: the acquisition is bounded
// anyway. The returned function stops watching and waits until it has.
func watchQueue(ctx context.Context, sess *zkconn.Session, sem bool, s *settings, cancel context.CancelCauseFunc) (stop func()) {
	wctx, stopWatching := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		dirs := []string{s.path}
		if sem {
			dirs = []string{s.path + "/locks", s.path + "/leases"}
		}
		for {
			h, err := sess.Current(wctx)
			if err != nil {
				return
			}
			// Watch first, then look: a change after the look fires a watch.
			watches := make([]<-chan zk.Event, 2)
			for i, dir := range dirs {
				if watches[i], err = watchChildren(wctx, h, dir); err != nil {
					return
				}
			}
			var blocked bool
			if sem {
				blocked, err = semBlocked(wctx, sess, s, h.ID())
			} else {
				blocked, err = mutexBlocked(wctx, sess, s.path, h.ID())
			}
			if err != nil {
				return
			}
			if blocked {
				cancel(errHeld)
				return
			}
			select {
			case <-watches[0]:
			case <-watches[1]:
			case <-h.Lost():
			case <-wctx.Done():
				return
			}
		}
	}()
	return func() {
		stopWatching()
		<-done
	}
}

// watchChildren sets a watch on the children of dir, or on its creation if
// it does not exist.
func watchChildren(ctx context.Context, h zkconn.Handle, dir string) (<-chan zk.Event, error) {
	var w <-chan zk.Event
	err := h.Do(ctx, func(c *zk.Conn) error {
		for {
			_, _, cw, err := c.ChildrenW(dir)
			if !errors.Is(err, zk.ErrNoNode) {
				w = cw
				return err
			}
			ok, _, ew, err := c.ExistsW(dir)
			if err != nil || !ok {
				w = ew
				return err
			}
		}
	})
	return w, err
}

// mutexBlocked reports whether session id has a node at path behind
// another one.
func mutexBlocked(ctx context.Context, sess *zkconn.Session, path string, id int64) (bool, error) {
	line, err := dsync.NewMutex(sess, path).Participants(ctx)
	return owns(line, id) > 0, err
}

// semBlocked reports whether session id waits for the internal lock of the
// semaphore behind another acquirer, or holds it while the leases of others
// leave no room for s.n more.
func semBlocked(ctx context.Context, sess *zkconn.Session, s *settings, id int64) (bool, error) {
	locks, err := dsync.NewMutex(sess, s.path+"/locks").Participants(ctx)
	if err != nil {
		return false, err
	}
	switch owns(locks, id) {
	case -1:
		return false, nil
	case 0:
	default:
		return true, nil
	}
	leases, err := dsync.NewWeighted(sess, s.path, s.max).Participants(ctx)
	if err != nil {
		return false, err
	}
	others := 0
	for _, p := range leases {
		if p.Session != id {
			others++
		}
	}
	return int64(others)+s.n > s.max, nil
}

// owns returns the index of the first node of line owned by session id, or
// -1.
func owns(line []dsync.Participant, id int64) int {
	return slices.IndexFunc(line, func(p dsync.Participant) bool { return p.Session == id })
}
