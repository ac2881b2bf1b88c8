package dsync

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// A hold is one acquired node, from acquisition to release or loss. Its
// context is canceled, with a cause, the moment the holder can no longer
// prove it holds: on release (context.Canceled), or on loss (ErrLockLost).
type hold struct {
	h       zkconn.Handle
	node    string       // full path
	fire    []string     // signals to send as node is deleted (entry.fire)
	token   atomic.Int64 // czxid, once known
	ctx     context.Context
	cancel  context.CancelCauseFunc
	count   int           // re-entrancy depth (Mutex only)
	release chan struct{} // closed by end
	done    chan struct{} // closed when watch returns
}

// holdKey marks a hold context with the primitive that made it, so a
// Mutex can recognise its own hold when the context comes back.
type holdKey struct{ owner any }

// newHold starts a hold on e, watching it for loss if track is set (e.own
// is then the watch on its node). parent gives the hold context its values
// (not its deadline or cancellation).
func newHold(parent context.Context, owner any, e entry, policy LossPolicy, track bool) *hold {
	hd := &hold{h: e.h, node: e.node, fire: e.fire, count: 1, release: make(chan struct{}), done: make(chan struct{})}
	hd.token.Store(e.czxid)
	ctx := context.WithValue(context.WithoutCancel(parent), holdKey{owner}, hd)
	hd.ctx, hd.cancel = context.WithCancelCause(ctx)
	if !track {
		close(hd.done)
		return hd
	}
	hd.h = hd.h.Refresh() // a suspension while waiting is over: watch the connection up now
	lost := hd.h.Suspended()
	if policy == LostOnExpiry {
		lost = hd.h.Lost()
	}
	go hd.watch(e.own, lost)
	return hd
}

// watch cancels the hold context when the hold is lost, until end.
func (hd *hold) watch(own <-chan zk.Event, lost <-chan struct{}) {
	defer close(hd.done)
	for {
		select {
		case ev := <-own:
			switch ev.Type {
			case zk.EventNodeDeleted:
				hd.cancel(fmt.Errorf("%w: node %s deleted", ErrLockLost, hd.node))
				return
			case zk.EventNotWatching:
				cause := hd.h.Err()
				if cause == nil {
					cause = ev.Err
				}
				hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cause))
				return
			}
			// Written to (a revocation request, say): watch again.
			var err error
			if _, own, err = watchNode(hd.ctx, hd.h, hd.node); err != nil {
				if !errors.Is(err, context.Canceled) {
					hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, err))
				}
				return
			}
		case <-lost:
			cause := hd.h.Err()
			if cause == nil {
				cause = errors.New("connection to ZooKeeper suspended")
			}
			hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cause))
			return
		case <-hd.release:
			return
		}
	}
}

// fencingToken returns the czxid of the hold's node, asking ZooKeeper
// (within timeout) the first time if the acquisition did not learn it; 0 if
// it cannot.
func (hd *hold) fencingToken(timeout time.Duration) int64 {
	if t := hd.token.Load(); t != 0 {
		return t
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = hd.h.Do(ctx, func(c *zk.Conn) error {
		_, st, err := c.Get(hd.node)
		if err == nil {
			hd.token.Store(st.Czxid)
		}
		return err
	})
	return hd.token.Load()
}

// end stops watching and cancels the hold context (with context.Canceled,
// unless it was lost first), then deletes the node, sending its signals (a
// queue head's handoff): at once if the connection is up, else in the
// background (zkconn.Handle.Delete).
func (hd *hold) end() {
	hd.cancel(context.Canceled)
	close(hd.release)
	<-hd.done
	hd.h.Delete(hd.node, hd.fire...)
}
