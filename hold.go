package dsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
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

var errSuspended = errors.New("connection to ZooKeeper suspended")

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
	select {
	case <-lost: // already: the hold is born lost, and says so at once
		hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cmp.Or(hd.h.Err(), errSuspended)))
	default:
	}
	go hd.watch(e.own, lost)
	return hd
}

// watch cancels the hold context when the hold is lost, until end.
//
// Invariant: while it runs, it waits on lost (and release) at every moment.
// Setting the watch on the node again after a write to it (a revocation
// request, say) is a request; it goes out on a goroutine of its own, so that
// a connection dropping meanwhile still cancels the hold at once.
func (hd *hold) watch(own <-chan zk.Event, lost <-chan struct{}) {
	defer close(hd.done)
	type armed struct {
		watch <-chan zk.Event
		err   error
	}
	var (
		rearm chan armed // set while a request to set the watch is out
		wg    sync.WaitGroup
	)
	// Every return cancels hd.ctx first (end does before release), which
	// ends a request still out.
	defer wg.Wait()
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
			// Written to: watch again.
			own = nil
			rearm = make(chan armed, 1)
			wg.Go(func() {
				_, w, err := watchNode(hd.ctx, hd.h, hd.node)
				rearm <- armed{w, err}
			})
		case a := <-rearm:
			rearm = nil
			if a.err != nil {
				if !errors.Is(a.err, context.Canceled) {
					hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, a.err))
				}
				return
			}
			own = a.watch
		case <-lost:
			hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cmp.Or(hd.h.Err(), errSuspended)))
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
// queue head's handoff), without waiting for the network
// (zkconn.Handle.Delete). The returned channel closes when the delete is
// settled.
func (hd *hold) end() <-chan struct{} {
	hd.cancel(context.Canceled)
	close(hd.release)
	<-hd.done
	return hd.h.Delete(hd.node, hd.fire...)
}
