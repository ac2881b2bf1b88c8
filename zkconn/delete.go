package zkconn

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Delete removes the node at path (any version) in h's session: a guaranteed
// delete. It never waits for the network: the request goes out from a
// goroutine the Session owns, which carries on across dropped connections
// until the node is deleted, is found gone, or h's session is lost or the
// Session closed (either removes h's ephemeral nodes anyway).
//
// Each path in fire is a signal sent with the delete: in the same
// transaction, and only if the node at path still exists, a node is created
// there and deleted again. Nothing ever sees it, but exists watches set on
// it fire (zk.EventNodeCreated). If a signal cannot be sent (a node is
// already there, say) the node at path is deleted without signals.
//
// The returned channel is closed when the delete is settled; reading it is
// optional. Close ends the session (so the server deletes its ephemeral
// nodes) and waits for these goroutines. Errors other than a lost connection
// (no permission, say) are logged, not retried.
func (h Handle) Delete(path string, fire ...string) <-chan struct{} {
	return h.guarantee("delete "+path, func(c *zk.Conn) error {
		if len(fire) > 0 {
			ops := make([]any, 0, 2*len(fire)+1)
			for _, p := range fire {
				ops = append(ops, &zk.CreateRequest{Path: p, Acl: h.s.cfg.acl}, &zk.DeleteRequest{Path: p, Version: -1})
			}
			_, err := c.Multi(append(ops, &zk.DeleteRequest{Path: path, Version: -1})...)
			if err == nil || transient(err) || ended(err) {
				return err
			}
			// The node is gone, or a signal could not be sent: delete alone.
		}
		if err := c.Delete(path, -1); !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	})
}

// forgetProtected deletes, with Delete's guarantee, every child of parent
// whose name starts with prefix: the node a create whose reply was lost may
// have made.
func (h Handle) forgetProtected(parent, prefix string) {
	h.guarantee("forget "+parent+"/"+prefix, func(c *zk.Conn) error {
		children, _, err := c.Children(parent)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		}
		for _, child := range children {
			if !strings.HasPrefix(child, prefix) {
				continue
			}
			if err := c.Delete(parent+"/"+child, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		return nil
	})
}

// guarantee runs op until it settles (see Delete) on a goroutine the
// Session owns.
func (h Handle) guarantee(what string, op func(*zk.Conn) error) <-chan struct{} {
	done := make(chan struct{})
	s := h.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(done)
		return done
	}
	s.bg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bg.Done()
		defer close(done)
		h.report(what, h.Do(context.Background(), op))
	}()
	return done
}

// report logs a guaranteed operation that failed for a reason other than the
// end of its session.
func (h Handle) report(what string, err error) {
	if err = h.sessionError(err); err == nil || errors.Is(err, ErrSessionLost) || errors.Is(err, ErrClosed) {
		return
	}
	h.s.cfg.logger.Error("zkconn: "+what+" failed", "err", err)
}

// Settle waits for done (a channel from Delete) for as long as the servers
// answer as fast as they have lately: at most four recent round trips (and
// at least 10ms), and not past a drop of h's connection. A release that
// settles meanwhile is visible to everyone once Settle returns, as a
// sync.Mutex's is; one that does not goes on in the background, so that
// Settle never waits on a slow or silent network.
func (h Handle) Settle(done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	bound := max(4*h.gen.c.wire.RoundTrip(), 10*time.Millisecond)
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-h.Refresh().link: // the connection up now, not when h was made
	case <-h.gen.lost:
	}
}
