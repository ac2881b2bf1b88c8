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
//
// A tracked hold has no goroutine of its own: the session's event goroutine
// tells it of a write to or deletion of its node (zkconn.Watch.Notify), and
// the connection's drop or the session's loss runs a function
// (zkconn.Handle.AfterSuspended, AfterLost). Only a write to the node starts
// one, to watch the node again (see changed).
type hold struct {
	h       zkconn.Handle
	node    string                // full path
	fire    []string              // signals to send as node is deleted (entry.fire)
	watches []*zkconn.ExistsWatch // (entry.watches)
	token   atomic.Int64          // czxid, once known
	ctx     context.Context
	cancel  context.CancelCauseFunc
	count   int            // re-entrancy depth (Mutex only)
	unlost  func() bool    // stops lose from running; nil unless tracked
	rewatch sync.WaitGroup // the watch being set again after a write, if it is
	// revoked is closed when the hold sees a revocation request in its
	// node (see Revoked); nil unless the hold is revocable. newHold, then
	// the rewatch that follows each write, are the only ones to close it:
	// one at a time.
	revoked chan struct{}

	mu    sync.Mutex
	ended bool          // set by end: no rewatch starts after it
	own   *zkconn.Watch // the watch on node, while tracked
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
//
// Invariant: from its start until end, a tracked hold's context is canceled
// when the connection drops (under LostOnSuspension) or the session is lost,
// the moment the Session sees it; and a getData watch of its own is set on
// the node, or being set again with a read of its data, at every moment.
func newHold(parent context.Context, owner any, e entry, cfg holdConfig) *hold {
	hd := &hold{h: e.h, node: e.node, fire: e.fire, watches: e.watches, count: 1}
	hd.token.Store(e.czxid)
	ctx := context.WithValue(context.WithoutCancel(parent), holdKey{owner}, hd)
	ctx = context.WithValue(ctx, anyHoldKey{}, hd)
	hd.ctx, hd.cancel = context.WithCancelCause(ctx)
	if !cfg.track && !cfg.revocable {
		e.own.Stop() // set if it waited: not needed any more
		return hd
	}
	if e.own == nil {
		panic("dsync: internal error: tracked hold without a watch on its node")
	}
	hd.h = hd.h.Refresh() // a suspension while waiting is over: watch the connection up now
	lost, after := hd.h.Suspended(), hd.h.AfterSuspended
	if cfg.policy == LostOnExpiry {
		lost, after = hd.h.Lost(), hd.h.AfterLost
	}
	hd.unlost = after(hd.lose)
	if cfg.revocable {
		hd.revoked = make(chan struct{})
		// e.own was set before this read goes out: a request written
		// before the read is in its data, one written after fires e.own
		// (see changed). A request written while the node waited in line
		// is thus seen before the hold is handed out.
		data, _, err := readNode(parent, hd.h, hd.node)
		if err != nil {
			hd.cancel(hd.lostBy(err))
		}
		hd.saw(data)
	}
	select {
	case <-lost: // already: the hold is born lost, and says so at once
		hd.lose()
	default:
	}
	hd.follow(e.own)
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
		*undoing = append(*undoing, hd.abandon())
	}
}

// lose cancels the hold context because the connection dropped or the
// session was lost.
func (hd *hold) lose() {
	hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cmp.Or(hd.h.Err(), errSuspended)))
}

// follow makes w the hold's watch on its node, unless the hold has ended.
func (hd *hold) follow(w *zkconn.Watch) {
	hd.mu.Lock()
	if hd.ended {
		hd.mu.Unlock()
		w.Stop()
		return
	}
	hd.own = w
	hd.mu.Unlock()
	w.Notify(hd.changed) // after end's Stop, it does nothing
}

// changed takes the event of the hold's watch on its node, on the session's
// event goroutine (so it must not block): a deletion, or the end of the
// session's watches, loses the hold; a write sets the watch again, reading
// the data in the same request, on a goroutine of its own, so that a write
// is either in that data or fires the new watch (no revocation request is
// missed between the two). Meanwhile a drop of the connection still cancels
// the hold at once, and ends that request.
func (hd *hold) changed(ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDeleted:
		// Closing the Session deletes its nodes: then that is the cause.
		hd.cancel(hd.lostBy(cmp.Or(hd.h.Err(), errNodeGone)))
		return
	case zk.EventNotWatching:
		hd.cancel(fmt.Errorf("%w: %w", ErrLockLost, cmp.Or(hd.h.Err(), ev.Err)))
		return
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.ended {
		return
	}
	hd.rewatch.Go(func() {
		data, _, w, err := ownNode(hd.ctx, hd.h, hd.node)
		if err != nil {
			if !errors.Is(err, context.Canceled) { // else canceled with its cause already
				hd.cancel(hd.lostBy(err))
			}
			return
		}
		hd.saw(data)
		hd.follow(w)
	})
}

// lostBy returns the cause of a hold lost because a read of its node failed
// with err.
func (hd *hold) lostBy(err error) error {
	if errors.Is(err, errNodeGone) {
		return fmt.Errorf("%w: %w", ErrLockLost, nodeDeleted(hd.node))
	}
	return fmt.Errorf("%w: %w", ErrLockLost, err)
}

// nodeDeleted is the loss of a hold whose node, named so, someone else
// deleted: it is ErrNodeDeleted.
type nodeDeleted string

func (n nodeDeleted) Error() string      { return "node " + string(n) + " deleted" }
func (nodeDeleted) Is(target error) bool { return target == ErrNodeDeleted }

// saw closes hd.revoked if the hold is revocable and data, read from its
// node, is a revocation request. Only newHold, then each rewatch (one at a
// time), call it.
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

// readNode reads node's data and stat, returning errNodeGone if the node
// does not exist.
func readNode(ctx context.Context, h zkconn.Handle, node string) ([]byte, *zk.Stat, error) {
	data, st, _, err := getNode(ctx, h, node, false)
	return data, st, gone(err)
}

// ownNode is readNode, setting a zkconn.Watch on node.
func ownNode(ctx context.Context, h zkconn.Handle, node string) ([]byte, *zk.Stat, *zkconn.Watch, error) {
	data, st, w, err := h.GetW(ctx, node)
	return data, st, w, gone(err)
}

// gone maps the error of a read of a node of ours: errNodeGone if it does
// not exist.
func gone(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return errNodeGone
	}
	return err
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

// gone reports whether hd is known to hold nothing any more: its session is
// lost, or (tracked) its loss was seen. Where holds are interchangeable (a
// Weighted's leases, an RWMutex's read holds in a process), Release and
// RUnlock end gone ones first: a live hold ended in a gone one's place would
// leave the goroutine that took it working under no node at all.
func (hd *hold) gone() bool { return hd.h.Err() != nil || hd.ctx.Err() != nil }

// end stops watching and cancels the hold context (with context.Canceled,
// unless it was lost first), then deletes the node, sending its signals (a
// queue head's handoff), without waiting for the network
// (zkconn.Handle.AwaitSent: it returns once the delete has gone out, as a
// rule). The returned channels close when the delete has gone out, and when
// it is settled.
func (hd *hold) end() (sent, settled <-chan struct{}) {
	sent, settled = hd.release()
	hd.h.AwaitSent(sent)
	return sent, settled
}

// release is end without the wait: the caller waits for sent, with
// zkconn.Handle.AwaitSent, once it has released every hold it releases.
func (hd *hold) release() (sent, settled <-chan struct{}) {
	hd.stop()
	unwatchAll(hd.watches)
	return hd.h.Delete(hd.node, hd.fire...)
}

// abandon is end for a hold never handed out: nothing has to come after its
// delete, so it does not wait for it to go out (zkconn.Handle.Delete). The
// returned channel closes when the delete is settled.
func (hd *hold) abandon() (settled <-chan struct{}) {
	hd.stop()
	unwatchAll(hd.watches)
	_, settled = hd.h.Delete(hd.node, hd.fire...)
	return settled
}

// stop cancels the hold context (with context.Canceled, unless it was lost
// first) and stops watching the node.
func (hd *hold) stop() {
	hd.cancel(context.Canceled)
	hd.mu.Lock()
	hd.ended = true
	own := hd.own
	hd.mu.Unlock()
	if hd.unlost != nil {
		hd.unlost()
	}
	if own != nil {
		own.Stop()
	}
	hd.rewatch.Wait()
}
