package dsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

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
// number read as unsigned, with the children that carry none after them, by
// name.
//
// ZooKeeper writes a parent's cversion as the sequence, a signed 32-bit
// counter: after 2^31 creates under one parent it goes on at -2147483648.
// Read as unsigned, the numbers keep creation order across that wrap (until
// 2^32 creates), which the handoff argument (see queue) needs: a node created
// later never sorts ahead. Signed order, and Curator's order (it compares the
// digits as strings, and "-" sorts before "0"), put a node created after the
// wrap ahead of the holder. A dsync waiter never does; a Curator peer on the
// same path past the wrap can, whatever dsync does (see doc.go).
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
			return uint32(a.seq) < uint32(b.seq)
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
	// own is the watch on node (getData), which fires when it is deleted or
	// written: set while waiting, and while held if the hold is tracked.
	own <-chan zk.Event
	// ownLink is the connection up when own was set (zkconn.Handle.Suspended
	// of a Refresh): once it closes, events may come in another order.
	ownLink <-chan struct{}
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
//
// The deletes of nodes it gave up are added to *undoing, so that the caller
// can hand them on through its gate.
func (q *queue) acquire(ctx context.Context, wait, track bool, undoing *[]<-chan struct{}) (entry, error) {
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
			*undoing = append(*undoing, e.remove())
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

// join creates a node of ours in h's session and, if wait is set, waits
// until it is first (see queue). A node first at creation is held at once;
// with track set it is then watched too (a waiter watches its node anyway).
// It returns the entry made so far with any error, for the caller to remove.
func (q *queue) join(ctx context.Context, h zkconn.Handle, wait, track bool) (entry, error) {
	e := entry{h: h}
	ahead, err := q.create(ctx, &e)
	switch {
	case err != nil:
		return e, err
	case len(ahead) == 0:
		if track {
			e.czxid, e.own, err = watchNode(ctx, h, e.node)
		}
		return e, err
	case !wait:
		return e, ErrWouldBlock
	}
	if err := q.await(ctx, &e, ahead); err != nil {
		return e, err
	}
	// A node first in line when it was created was first in every listing
	// since, so no waiter watches its handoff signal; one that waited sends
	// it when it leaves.
	e.fire = append(e.fire, handoffPath(e.node))
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
func (q *queue) await(ctx context.Context, e *entry, ahead []queued) error {
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
// sent its handoff signal; and e's node still exists (see claim).
//
// The first time, it also sets the watch on e's own node. The watches are
// sent together: one round trip, before any handoff.
func (q *queue) follow(ctx context.Context, e *entry, prev string, first bool) (bool, error) {
	h := e.h
	path := q.path + "/" + prev
	// arm sets the watch on prev: again only after it fired without
	// prev going (a write to it, a revocation request say).
	arm := func() (<-chan zk.Event, error) {
		var watch <-chan zk.Event
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			_, _, watch, err = c.GetW(path)
			return err
		})
		if err != nil {
			return nil, err
		}
		return watch, nil
	}
	var (
		wg               sync.WaitGroup
		handoff          signal
		sigErr, ownErr   error
		own              <-chan zk.Event
		czxid            int64
		needSig, needOwn = !first && zkconn.IsNative(prev), e.own == nil
	)
	if needSig {
		// In e.fire from the moment it may be set: a request abandoned
		// with ctx may still set it.
		e.fire = append(e.fire, handoffPath(path))
		wg.Go(func() { handoff, sigErr = watchSignal(ctx, h, handoffPath(path)) })
	}
	link := h.Refresh().Suspended()
	if needOwn {
		wg.Go(func() { czxid, own, ownErr = watchNode(ctx, h, e.node) })
	}
	watch, err := arm()
	wg.Wait()
	if needSig && handoff.watch == nil && sigErr == nil {
		// A node is at the signal's path: no watch of ours is there.
		e.fire = slices.DeleteFunc(e.fire, func(p string) bool { return p == handoffPath(path) })
	}
	if needOwn && ownErr == nil {
		e.czxid, e.own, e.ownLink = czxid, own, link
	}
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		err = cmp.Or(ownErr, sigErr, err)
	}
	for {
		if errors.Is(err, zk.ErrNoNode) {
			return e.claim(ctx, first || handoff.fired(e))
		}
		if err != nil {
			return false, err
		}
		select {
		case ev := <-watch:
			if ev.Type == zk.EventNodeDeleted {
				return e.claim(ctx, first || handoff.fired(e))
			}
			watch, err = arm() // after a session ended, this fails
		case ev := <-handoff.watch:
			if handoff.took(e, ev) {
				return e.claim(ctx, true)
			}
		case ev := <-e.own:
			if ev.Type == zk.EventNodeDeleted {
				return false, errNodeGone
			}
			e.ownLink = h.Refresh().Suspended()
			if e.czxid, e.own, err = watchNode(ctx, h, e.node); err != nil {
				return false, err
			}
		case <-ctx.Done():
			return false, ctx.Err()
		case <-h.Lost():
			return false, h.Err()
		}
	}
}

// claim returns first, after checking that e's node still exists when
// first is set: an operator may have deleted it while it waited, and then a
// later node may believe it is first too. e.own is set, and on one
// connection ZooKeeper sends a session's events in order, which
// go-zookeeper hands to their channels in order: a deletion of e's node that
// came before what made e first is already in e.own. Across a reconnect
// that order is lost (the watches are set again in one request, and fire in
// its order), so after one the node is read again: a round trip only then,
// or when the node was written to meanwhile (its watch must be set again).
//
// Invariant: a waiter never reports first unless its node existed at the
// zxid of the event that made it first.
func (e *entry) claim(ctx context.Context, first bool) (bool, error) {
	if !first {
		return false, nil
	}
	reread := false
	select {
	case ev := <-e.own:
		if ev.Type == zk.EventNodeDeleted {
			return false, errNodeGone
		}
		reread = true
	case <-e.ownLink:
		reread = true
	default:
	}
	if reread {
		link := e.h.Refresh().Suspended()
		var err error
		if e.czxid, e.own, err = watchNode(ctx, e.h, e.node); err != nil {
			return false, err
		}
		e.ownLink = link
	}
	return true, nil
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

// watchSignal sets an exists watch on path. If a node is at path, it is no
// signal: it returns one with no watch (the watch set stays with that node).
// The caller adds a signal with a watch to e.fire until the watch fires.
func watchSignal(ctx context.Context, h zkconn.Handle, path string) (signal, error) {
	var there bool
	var watch <-chan zk.Event
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		there, _, watch, err = c.ExistsW(path)
		return err
	})
	if err != nil || there {
		return signal{}, err
	}
	return signal{path: path, watch: watch}, nil
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
func watchNode(ctx context.Context, h zkconn.Handle, node string) (int64, <-chan zk.Event, error) {
	var st *zk.Stat
	var watch <-chan zk.Event
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		_, st, watch, err = c.GetW(node)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, nil, errNodeGone
	case err != nil:
		return 0, nil, err
	}
	return st.Czxid, watch, nil
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
