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
	// revoked is closed when the hold sees a revocation request in its
	// node (see Revoked); nil unless the hold is revocable. newHold,
	// then watch, are the only ones to close it.
	revoked chan struct{}
}

// A holdConfig says how a hold watches its node.
type holdConfig struct {
	policy LossPolicy
	// track: watch the node (e.own) and the connection for loss.
	track bool
	// revocable: watch for revocation requests too (see Revocable). The
	// hold is then tracked, so e.own must be set.
	revocable bool
}

var errSuspended = errors.New("connection to ZooKeeper suspended")

// holdKey marks a hold context with the primitive that made it, so a
// Mutex can recognise its own hold when the context comes back.
type holdKey struct{ owner any }

// anyHoldKey marks a hold context with its hold, whatever made it: in a
// context derived from several hold contexts, the innermost (see Revoked).
type anyHoldKey struct{}

// newHold starts a hold on e as cfg says. parent gives the hold context
// its values (not its deadline or cancellation), and bounds the one read of
// the node a revocable hold makes as it starts.
//
// A hold that cannot prove it holds as it starts (its session is lost, or
// under LostOnSuspension its connection drops, or a revocable hold's read
// fails, parent done included) is born lost: its context is canceled
// already, and the caller gives it back.
func newHold(parent context.Context, owner any, e entry, cfg holdConfig) *hold {
	hd := &hold{h: e.h, node: e.node, fire: e.fire, count: 1, release: make(chan struct{}), done: make(chan struct{})}
	hd.token.Store(e.czxid)
	ctx := context.WithValue(context.WithoutCancel(parent), holdKey{owner}, hd)
	ctx = context.WithValue(ctx, anyHoldKey{}, hd)
	hd.ctx, hd.cancel = context.WithCancelCause(ctx)
	if !cfg.track && !cfg.revocable {
		close(hd.done)
		return hd
	}
	hd.h = hd.h.Refresh() // a suspension while waiting is over: watch the connection up now
	lost := hd.h.Suspended()
	if cfg.policy == LostOnExpiry {
		lost = hd.h.Lost()
	}
	if cfg.revocable {
		if e.own == nil {
			panic("dsync: internal error: revocable hold without a watch on its node")
		}
		hd.revoked = make(chan struct{})
		// e.own was set before this read goes out: a request written
		// before the read is in its data, one written after fires e.own
		// (see watch). A request written while the node waited in line
		// is thus seen before the hold is handed out.
		data, _, _, err := readNode(parent, hd.h, hd.node, false)
		if err != nil {
			hd.cancel(hd.lostBy(err))
		}
		hd.saw(data)
	}
	select {
	case <-lost: // already: the hold is born lost, and says so at once
		hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cmp.Or(hd.h.Err(), errSuspended)))
	default:
	}
	go hd.watch(e.own, lost)
	return hd
}

// take puts a node of ours in q (waiting for its turn if wait is set, see
// queue.acquire) and starts a hold on it for owner, as cfg says. A hold born
// lost (see newHold) is given back, and the place taken again. On failure
// no node is left behind; the deletes of the nodes given up on the way, on
// success too, are added to *undoing (see queue.acquire).
func (q *queue) take(ctx context.Context, owner any, wait bool, cfg holdConfig, undoing *[]<-chan struct{}) (*hold, error) {
	for {
		e, err := q.acquire(ctx, wait, cfg.track || cfg.revocable, undoing)
		if err != nil {
			return nil, err
		}
		hd := newHold(ctx, owner, e, cfg)
		if hd.ctx.Err() == nil {
			return hd, nil
		}
		_, settled := hd.end()
		*undoing = append(*undoing, settled)
	}
}

// watch cancels the hold context when the hold is lost, until end, and
// closes hd.revoked when a revocation request is written into the node.
//
// Invariant: while it runs, it waits on lost (and release) at every moment,
// and a getData watch of its own is set on the node, or being set again
// with a read of the node's data (the re-arm), at every moment. The re-arm,
// after a write to the node fired the watch, is a request; it goes out on a
// goroutine of its own, so that a connection dropping meanwhile still
// cancels the hold at once. It reads the data in the request that sets the
// watch again, so a write is either in that data or fires the new watch: no
// revocation request is missed between the fire and the re-arm.
func (hd *hold) watch(own <-chan zk.Event, lost <-chan struct{}) {
	defer close(hd.done)
	type armed struct {
		data  []byte
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
			// Written to: read it, watching it again.
			own = nil
			rearm = make(chan armed, 1)
			wg.Go(func() {
				data, _, w, err := readNode(hd.ctx, hd.h, hd.node, true)
				rearm <- armed{data, w, err}
			})
		case a := <-rearm:
			rearm = nil
			if a.err != nil {
				if !errors.Is(a.err, context.Canceled) {
					hd.cancel(hd.lostBy(a.err))
				}
				return
			}
			hd.saw(a.data)
			own = a.watch
		case <-lost:
			hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cmp.Or(hd.h.Err(), errSuspended)))
			return
		case <-hd.release:
			return
		}
	}
}

// lostBy returns the cause of a hold lost because a read of its node failed
// with err.
func (hd *hold) lostBy(err error) error {
	if errors.Is(err, errNodeGone) {
		return fmt.Errorf("%w: node %s deleted", ErrLockLost, hd.node)
	}
	return fmt.Errorf("%w: %w", ErrLockLost, err)
}

// saw closes hd.revoked if the hold is revocable and data, read from its
// node, is a revocation request. Only newHold, then watch, call it.
func (hd *hold) saw(data []byte) {
	if hd.revoked == nil || string(data) != revokeRequest {
		return
	}
	select {
	case <-hd.revoked:
	default:
		close(hd.revoked)
	}
}

// getNode reads node's data and stat, setting a getData watch on it if
// watch is set.
func getNode(ctx context.Context, h zkconn.Handle, node string, watch bool) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	var (
		data []byte
		st   *zk.Stat
		w    <-chan zk.Event
	)
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		if watch {
			data, st, w, err = c.GetW(node)
		} else {
			data, st, err = c.Get(node)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err // the request may still be out: leave its results alone
	}
	return data, st, w, nil
}

// readNode is getNode, returning errNodeGone if the node does not exist.
func readNode(ctx context.Context, h zkconn.Handle, node string, watch bool) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	data, st, w, err := getNode(ctx, h, node, watch)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil, nil, errNodeGone
	case err != nil:
		return nil, nil, nil, err
	}
	return data, st, w, nil
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

// Token returns the fencing token of the hold whose context is held, or of
// the innermost hold in a context derived from several (see Mutex.Token):
// a Once's function, given a hold context, passes it on this way. It returns
// 0 for a context that is not a hold context and for a MultiLock's hold
// context (ask its members). A hold taken without watching asks ZooKeeper
// the first time (bounded by the session timeout; 0 if it cannot).
func Token(held context.Context) int64 {
	hd, _ := held.Value(anyHoldKey{}).(*hold)
	if hd == nil {
		return 0
	}
	return hd.fencingToken(hd.h.Session().SessionTimeout())
}

// end stops watching and cancels the hold context (with context.Canceled,
// unless it was lost first), then deletes the node, sending its signals (a
// queue head's handoff), without waiting for the network
// (zkconn.Handle.Release: it returns once the delete has gone out, as a
// rule). The returned channels close when the delete has gone out, and when
// it is settled.
func (hd *hold) end() (sent, settled <-chan struct{}) {
	hd.cancel(context.Canceled)
	close(hd.release)
	<-hd.done
	return hd.h.Release(hd.node, hd.fire...)
}
