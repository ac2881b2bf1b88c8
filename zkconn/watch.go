package zkconn

import (
	"context"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
)

// A Watch is a watch on one node: a getData watch set by Handle.GetW, a
// getChildren watch set by Handle.ChildrenW, or an exists watch on a path
// with no node set by Handle.CreatedW. It fires once: when the node is
// deleted, written to (a getData watch) or made (an exists watch), or its
// children change (a getChildren watch), or when the connection stops
// watching (the session ended: zk.EventNotWatching).
//
// Its event goes to C, or, once Notify is called, to a function instead,
// which runs on the goroutine that reads the session's events: a Watch
// waited on that way costs no goroutine.
//
// A Watch is registered before its request goes out, so no event for it
// can pass unseen; ZooKeeper sends a session's events in order, and a
// Watch's event reaches C before any later event of the session reaches
// go-zookeeper's watch channels. It may fire on the event of an earlier
// watch of its kind the session set on the node: a change all the same.
type Watch struct {
	set *watchSet
	key watchKey
	c   chan zk.Event // capacity 1: the event, until received

	mu     sync.Mutex
	notify func(zk.Event)
	done   bool // fired or stopped
}

// C returns the channel that receives w's event, unless Notify takes it.
// A nil Watch's channel is nil.
func (w *Watch) C() <-chan zk.Event {
	if w == nil {
		return nil
	}
	return w.c
}

// Notify hands w's event to f rather than to C: at once, on the caller's
// goroutine, if w fired and its event was not received; else when w fires,
// on the goroutine that reads the session's events, which f must not block
// (nor call w.Stop). After Stop it does nothing. Call it once at most.
func (w *Watch) Notify(f func(zk.Event)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case ev := <-w.c:
		f(ev)
	default:
		if !w.done {
			w.notify = f
		}
	}
}

// Stop stops w: once it returns, w's event goes nowhere (C has none, if it
// had one), and a function given to Notify is not running and will not be
// called. It may be called more than once; on a nil Watch it does nothing.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.set.remove(w)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.notify = nil
	select {
	case <-w.c: // fired, not received: it goes nowhere now
	default:
	}
}

func (w *Watch) fire(ev zk.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case w.notify != nil:
		w.notify(ev)
	default:
		w.c <- ev
	}
	w.done = true
}

// A watchSet is the Watches of one *zk.Conn, by node and kind.
type watchSet struct {
	mu sync.Mutex
	m  map[watchKey][]*Watch
}

func (s *watchSet) add(k watchKey) *Watch {
	w := &Watch{set: s, key: k, c: make(chan zk.Event, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[watchKey][]*Watch)
	}
	s.m[k] = append(s.m[k], w)
	return w
}

func (s *watchSet) remove(w *Watch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := slices.DeleteFunc(s.m[w.key], func(x *Watch) bool { return x == w })
	if len(ws) == 0 {
		delete(s.m, w.key)
	} else {
		s.m[w.key] = ws
	}
}

// fire fires the Watches that ev fires (see firedBy). It runs on
// go-zookeeper's goroutine, before go-zookeeper hands ev to its own watch
// channels.
func (s *watchSet) fire(ev zk.Event) {
	var ws []*Watch
	s.mu.Lock()
	for _, k := range firedBy(ev.Path, ev.Type) {
		ws = append(ws, s.m[k]...)
		delete(s.m, k)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.fire(ev)
	}
}

// GetW reads path's data and stat as Do does, setting a Watch on it (a
// getData watch). On error it returns no Watch (a request still in flight
// may set a watch on the server: its event then goes nowhere).
//
// Watches at one path share a watch: while go-zookeeper holds one there,
// whose event has not come, and the server holds it on the current
// connection, GetW reads without setting another on that connection (the
// server's event for it fires them all). go-zookeeper keeps every watch
// until its event, so a Watch stopped before (a waiter that gave up, say)
// would otherwise leave one behind each time, for as long as the node is
// not written to. The Watch is added before the check, and the record is
// cleared before the Watches fire (on the goroutine that reads the
// session's events): a Watch either fires
// on that event, or finds no watch held and sets one.
func (h Handle) GetW(ctx context.Context, path string) ([]byte, *zk.Stat, *Watch, error) {
	var (
		data []byte
		st   *zk.Stat
	)
	w, err := h.readW(ctx, watchKey{path: path}, func(c *zk.Conn, watch bool) (err error) {
		if watch {
			data, st, _, err = c.GetW(path)
		} else {
			data, st, err = c.Get(path)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err // the request may still be out: leave its results alone
	}
	return data, st, w, nil
}

// ChildrenW lists path's children as Do does, setting a Watch on them (a
// getChildren watch), and returns the node's stat. On error it returns no
// Watch. Watches on one node's children share a watch, as GetW's do: a
// caller that stops waiting (a canceled acquisition, an Observe loop that
// ends) leaves at most one behind at the node, or one per read if several
// went out at once while none was held (a read shares a watch only once
// the request that set it has been answered).
func (h Handle) ChildrenW(ctx context.Context, path string) ([]string, *zk.Stat, *Watch, error) {
	var (
		children []string
		st       *zk.Stat
	)
	w, err := h.readW(ctx, watchKey{path: path, kind: childWatch}, func(c *zk.Conn, watch bool) (err error) {
		if watch {
			children, st, _, err = c.ChildrenW(path)
		} else {
			children, st, err = c.Children(path)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err // as in GetW
	}
	return children, st, w, nil
}

// CreatedW reports whether a node is at path, as Do does. If there is
// none, it returns a Watch that fires when one is made (an exists watch);
// else no Watch. It reads without a watch first: an exists watch on a node
// that is there is a getData watch, which go-zookeeper would keep until
// the node is written to or deleted (one made between that read and the
// next, which sets the watch, is all the same). Watches at one path share
// the exists watch, as GetW's share a getData watch: callers that stop
// waiting leave at most one behind, until the node is made. ZooKeeper sets
// an exists watch again on a new connection without regard to what came
// before it: a node made and deleted while the connection was down is
// never told.
func (h Handle) CreatedW(ctx context.Context, path string) (bool, *Watch, error) {
	var there bool
	wire := h.gen.c.wire
	w, err := h.readW(ctx, watchKey{path: path, kind: existWatch}, func(c *zk.Conn, watch bool) (err error) {
		if there, _, err = c.Exists(path); err != nil || there || !watch {
			return err
		}
		for {
			// The watch is wanted until it fires (see wire.keep).
			n := wire.connection()
			if there, _, _, err = c.ExistsW(path); err != nil || there || wire.keep(path, n) {
				return err
			}
		}
	})
	switch {
	case err != nil:
		return false, nil, err // as in GetW
	case there:
		w.Stop()
		return true, nil, nil
	}
	return false, w, nil
}

// readW runs read through Do with a Watch of k added first, asking read to
// set go-zookeeper's watch k (watch true) unless the server holds it on the
// current connection: then a read without one, written on that connection,
// sees every change after it through that watch, in order with the
// connection's other events. If the connection is another when the reply
// comes, the read may have gone out on a later one, which does not hold
// the watch yet: read again, with it. On error it returns no Watch; the
// request may still be out then, and read still running: the caller must
// leave alone what read writes.
func (h Handle) readW(ctx context.Context, k watchKey, read func(c *zk.Conn, watch bool) error) (*Watch, error) {
	w := h.gen.c.watches.add(k)
	wire := h.gen.c.wire
	err := h.Do(ctx, func(c *zk.Conn) error {
		if n, ok := wire.share(k); ok {
			if err := read(c, false); err != nil || wire.connection() == n {
				return err
			}
		}
		return read(c, true)
	})
	if err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// An ExistsWatch is the exists watch ExistsW set on Path, or tried to.
type ExistsWatch struct {
	Path string
	// C is go-zookeeper's watch channel; nil if ExistsW failed.
	C <-chan zk.Event
	// Out closes once the request can no longer reach the server after a
	// request sent later: it has been written to a connection (ZooKeeper
	// applies a session's requests in the order they come), or it never
	// will be.
	Out <-chan struct{}

	w       *wire
	counted bool // the wire counts this caller (see wire.exists)
	once    sync.Once
}

// ExistsW reports whether a node is at path, as Do does, and sets an exists
// watch on it. When ctx ends while the request is out, ExistsW returns at
// once, and the watch's Out may close later; a request not yet under way
// then is not sent. After a dropped connection Do sends the request again,
// and Out follows the last one sent. The ExistsWatch is returned with any
// error.
//
// go-zookeeper sets every watch whose event has not come again on each new
// connection, and cannot forget one: a caller that no longer wants its
// watch says so with Unwatch. A later exists request at the same path,
// answered on the new connection that no node is there, sets the watch for
// every caller there, and go-zookeeper's copy is left out: it could come
// after the watch's event, and set one nobody holds.
func (h Handle) ExistsW(ctx context.Context, path string) (bool, *ExistsWatch, error) {
	x := &ExistsWatch{Path: path, w: h.gen.c.wire}
	var (
		mu      sync.Mutex
		left    bool // ExistsW has returned
		there   bool
		ch      <-chan zk.Event
		written <-chan struct{} // the last request's (see wire.awaitWrite)
	)
	err := h.Do(ctx, func(c *zk.Conn) error {
		mu.Lock()
		if left {
			mu.Unlock()
			return context.Canceled
		}
		var done func()
		written, done = x.w.awaitWrite(path, opExists)
		if !x.counted {
			x.counted = true
			x.w.join(path)
		}
		x.w.sending(path)
		mu.Unlock()
		defer done() // written, or never to be
		defer x.w.sent(path)
		t, _, watch, err := c.ExistsW(path) // the tap arms the record
		mu.Lock()
		defer mu.Unlock()
		if !left {
			there, ch = t, watch
		}
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	left = true
	if x.Out = written; x.Out == nil {
		x.Out = closedLatch.done()
	}
	if err != nil {
		return false, x, err
	}
	x.C = ch
	return there, x, nil
}

// Unwatch says that the caller no longer wants the watch. Once no caller of
// ExistsW at its path does, a watch go-zookeeper holds there is not set
// again on a new connection; one set on the connection up stays until it
// fires. Calls after the first do nothing.
func (x *ExistsWatch) Unwatch() {
	x.once.Do(func() {
		if x.counted {
			x.w.leave(x.Path)
		}
	})
}
