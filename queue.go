package dsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// lockMarker precedes the sequence number in a lock node's name
// (_c_<uuid>-lock-0000000042), as in Curator's InterProcessMutex.
const lockMarker = "lock-"

// sequence returns the sequence number of a node name: the digits after the
// last marker, read as ZooKeeper writes them (a signed 32-bit counter, so a
// parent that made more than 2^31 children shows negative numbers).
func sequence(name, marker string) (int32, bool) {
	i := strings.LastIndex(name, marker)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+len(marker):], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// queued is one child of a lock path, in queue order.
type queued struct {
	name   string
	seq    int32
	hasSeq bool
}

// order sorts the children of a lock path into queue order: by sequence
// number, with the children that carry none after them, by name.
func order(children []string, marker string) []queued {
	q := make([]queued, len(children))
	for i, c := range children {
		q[i].name = c
		q[i].seq, q[i].hasSeq = sequence(c, marker)
	}
	sort.Slice(q, func(i, j int) bool {
		a, b := q[i], q[j]
		if a.hasSeq != b.hasSeq {
			return a.hasSeq
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return a.name < b.name
	})
	return q
}

// A queue is the sequential-node waiting line every primitive is built on:
// each contender creates a protected EPHEMERAL_SEQUENTIAL node under path and
// is first in line when no node with a lower sequence number is left. A
// waiter watches only the node just ahead of its own (getData), so one
// departure wakes one waiter.
//
// A waiter whose predecessor was first at its last listing is first when
// that node goes: a node created later sorts after its own, so none can have
// come between. Deeper in line, a departure alone proves nothing (the node
// may have given up, or expired, with nodes still ahead of it), and listing
// again would put a round trip on the path of every handoff. So when the
// predecessor is a node of ours (zkconn.IsNative), the waiter also sets an
// exists watch on the predecessor's handoff signal (handoffPath): the head of
// a queue deletes its node and sends that signal in one transaction, and no
// one else sends it while the waiter waits (see entry.fire). The signal
// proves the waiter first; a departure without it (a giving up, an expiry,
// a Curator node) makes the waiter list again. A contended handoff is then
// one transaction and one notification: a waiter costs a create, a listing,
// the watches and the delete, and one more listing only after a departure
// other than a handoff.
type queue struct {
	sess   *zkconn.Session
	path   string
	marker string
	data   []byte
}

// handoffSuffix makes a node's handoff signal path from its own.
const handoffSuffix = ".handoff"

func handoffPath(node string) string { return node + handoffSuffix }

// entry is a node of ours in a queue, or one that reached its head.
type entry struct {
	h     zkconn.Handle
	node  string // full path
	czxid int64
	own   <-chan zk.Event // watch on node (getData): fires when it is deleted or written
	// fire lists the signals to send as node is deleted (zkconn.Handle.Delete
	// sends them only if node is still there): the handoff signal of a head
	// of the queue, and those of predecessors whose watch (set by us) has not
	// fired, so that no watch is left behind. While our node exists no other
	// waiter can be watching one of the latter: a waiter created before ours
	// sorts ahead of it and would have been our predecessor instead, unless
	// it was gone by then; one created after lists ours and follows ours or
	// one behind it.
	fire []string
}

// remove deletes e's node, sending e.fire (see zkconn.Handle.Delete).
func (e entry) remove() <-chan struct{} { return e.h.Delete(e.node, e.fire...) }

// errNodeGone means our node was deleted while we waited.
var errNodeGone = errors.New("dsync: node deleted while waiting")

// acquire puts a node of ours in the queue and, if wait is set, waits until
// it is first. With track set it also watches the node (for a hold that
// reports loss) and learns its czxid. If the session is lost on the way, it
// starts again on the next one. On failure (ctx.Err(), ErrWouldBlock, or
// another error, which names the path) no node is left behind.
func (q *queue) acquire(ctx context.Context, wait, track bool) (entry, error) {
	for {
		h, err := q.sess.Current(ctx)
		if err != nil {
			return entry{}, err
		}
		e, err := q.join(ctx, h, wait, track)
		if err == nil {
			return e, nil
		}
		if e.node != "" {
			e.remove()
		}
		if ctx.Err() != nil {
			return entry{}, ctx.Err()
		}
		if !errors.Is(err, zkconn.ErrSessionLost) && !errors.Is(err, errNodeGone) {
			return entry{}, withPath(q.path, err)
		}
	}
}

// withPath adds path to an error of an acquisition, unless it is one the
// contracts return as is (ctx.Err(), ErrWouldBlock, bad input).
func withPath(path string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrWouldBlock), errors.Is(err, ErrWeight), errors.Is(err, ErrBadPath):
		return err
	}
	return fmt.Errorf("dsync: %s: %w", path, err)
}

// join creates a node of ours in h's session and waits until it is first
// (see queue); with track set it watches the node. It returns the entry
// made so far with any error, for the caller to remove.
func (q *queue) join(ctx context.Context, h zkconn.Handle, wait, track bool) (entry, error) {
	e := entry{h: h}
	ahead, err := q.create(ctx, &e)
	if err == nil && track {
		e.czxid, e.own, err = watchNode(ctx, h, e.node)
	}
	if err != nil {
		return e, err
	}
	if err := q.await(ctx, &e, ahead, wait); err != nil {
		return e, err
	}
	// A node first in line when it was created was first in every listing
	// since, so no waiter watches its handoff signal; one that waited sends
	// it when it leaves.
	if len(ahead) > 0 {
		e.fire = append(e.fire, handoffPath(e.node))
	}
	return e, nil
}

// create creates e's node while listing the queue, and returns the nodes
// ahead of it. The listing is sent from another goroutine while the create
// is, so that both take one round trip; ZooKeeper answers a session's
// requests in order, so a listing sent after the create includes the node.
// One that went out first lacks it, and then create lists again.
func (q *queue) create(ctx context.Context, e *entry) ([]queued, error) {
	listed := make(chan error, 1)
	var children []string
	go func() {
		listed <- e.h.Do(ctx, func(c *zk.Conn) (err error) {
			children, _, err = c.Children(q.path)
			return err
		})
	}()
	var err error
	e.node, err = e.h.CreateProtected(ctx, q.path, q.marker, q.data)
	lerr := <-listed
	if err != nil {
		return nil, err
	}
	name := e.node[len(q.path)+1:]
	if lerr == nil {
		line := order(children, q.marker)
		if i := indexOf(line, name); i >= 0 {
			return line[:i], nil
		}
	}
	return q.ahead(ctx, e.h, name)
}

// await waits until e's node is first in line, given the nodes ahead of it
// at the last listing (see queue).
func (q *queue) await(ctx context.Context, e *entry, ahead []queued, wait bool) error {
	if len(ahead) > 0 && !wait {
		return ErrWouldBlock
	}
	name := e.node[len(q.path)+1:]
	for len(ahead) > 0 {
		prev := ahead[len(ahead)-1].name
		first, err := q.follow(ctx, e, prev, len(ahead) == 1)
		if err != nil || first {
			return err
		}
		if ahead, err = q.ahead(ctx, e.h, name); err != nil {
			return err
		}
	}
	return nil
}

// follow waits until prev, the node ahead of e's, is gone, and reports
// whether e's node is then first: prev was first at the last listing, or
// sent its handoff signal.
func (q *queue) follow(ctx context.Context, e *entry, prev string, first bool) (bool, error) {
	h := e.h
	path := q.path + "/" + prev
	var handoff signal
	if !first && zkconn.IsNative(prev) {
		var err error
		if handoff, err = watchSignal(ctx, e, handoffPath(path)); err != nil {
			return false, err
		}
	}
	// arm sets the watch on prev: again only after it fired without
	// prev going (a write to it, a revocation request say).
	arm := func() (watch <-chan zk.Event, err error) {
		err = h.Do(ctx, func(c *zk.Conn) (err error) {
			_, _, watch, err = c.GetW(path)
			return err
		})
		return watch, err
	}
	watch, err := arm()
	for {
		if errors.Is(err, zk.ErrNoNode) {
			return first || handoff.fired(e), nil
		}
		if err != nil {
			return false, err
		}
		select {
		case ev := <-watch:
			if ev.Type == zk.EventNodeDeleted {
				return first || handoff.fired(e), nil
			}
			watch, err = arm() // after a session ended, this fails
		case ev := <-handoff.watch:
			if handoff.took(e, ev) {
				return true, nil
			}
		case ev := <-e.own:
			if ev.Type == zk.EventNodeDeleted {
				return false, errNodeGone
			}
			if _, e.own, err = watchNode(ctx, h, e.node); err != nil {
				return false, err
			}
		case <-ctx.Done():
			return false, ctx.Err()
		case <-h.Lost():
			return false, h.Err()
		}
	}
}

// A signal is an exists watch on a path no node is at, set by one of our
// waiters (see queue). Its watch is nil when none was set.
type signal struct {
	path  string
	watch <-chan zk.Event
}

// fired reports, without waiting, whether s was sent (see took).
func (s *signal) fired(e *entry) bool {
	select {
	case ev := <-s.watch:
		return s.took(e, ev)
	default:
		return false
	}
}

// took handles ev, the event of s's watch, which is then no longer set (so
// s.path leaves e.fire), and reports whether s was sent.
func (s *signal) took(e *entry, ev zk.Event) bool {
	s.watch = nil
	e.fire = slices.DeleteFunc(e.fire, func(p string) bool { return p == s.path })
	return ev.Type == zk.EventNodeCreated
}

// watchSignal sets an exists watch on path and adds path to e.fire until
// the watch fires. If a node is at path, it is no signal: it returns one
// with no watch (the watch set stays with that node).
func watchSignal(ctx context.Context, e *entry, path string) (signal, error) {
	s := signal{path: path}
	var there bool
	err := e.h.Do(ctx, func(c *zk.Conn) (err error) {
		there, _, s.watch, err = c.ExistsW(path)
		return err
	})
	if err != nil || there {
		return signal{}, err
	}
	e.fire = append(e.fire, path)
	return s, nil
}

// ahead lists the queue and returns the nodes ahead of name, in order. It
// returns errNodeGone if name is not in the queue.
func (q *queue) ahead(ctx context.Context, h zkconn.Handle, name string) ([]queued, error) {
	var children []string
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		children, _, err = c.Children(q.path)
		return err
	})
	if err != nil {
		return nil, err
	}
	line := order(children, q.marker)
	i := indexOf(line, name)
	if i < 0 {
		return nil, errNodeGone
	}
	return line[:i], nil
}

func indexOf(line []queued, name string) int {
	for i, n := range line {
		if n.name == name {
			return i
		}
	}
	return -1
}

// watchNode sets a getData watch on node and returns it with the node's
// czxid. It returns errNodeGone if the node does not exist.
func watchNode(ctx context.Context, h zkconn.Handle, node string) (czxid int64, watch <-chan zk.Event, err error) {
	err = h.Do(ctx, func(c *zk.Conn) error {
		_, st, w, err := c.GetW(node)
		if err == nil {
			czxid, watch = st.Czxid, w
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, errNodeGone
	}
	return czxid, watch, err
}

// validate checks what every primitive is given, before anything is sent.
func validate(sess *zkconn.Session, path string) error {
	if sess == nil {
		return ErrNilSession
	}
	if err := zkconn.ValidatePath(path); err != nil {
		return fmt.Errorf("dsync: %w", err)
	}
	return nil
}
