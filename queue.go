package dsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// lockMarker precedes the sequence number in a lock node's name
// (_c_<uuid>-lock-0000000042), as in Curator's InterProcessMutex.
const lockMarker = "lock-"

// The markers of an RWMutex's nodes (_c_<uuid>-__READ__0000000042), as in
// Curator's InterProcessReadWriteLock: both kinds share one path and one
// order, by the digits after whichever marker a name carries.
const (
	readMarker  = "__READ__"
	writeMarker = "__WRIT__"
)

// sequence returns the sequence number of a node name: the digits after the
// last of the markers it carries, read as ZooKeeper writes them (a signed
// 32-bit counter, so a parent that made more than 2^31 children shows
// negative numbers), and that marker.
func sequence(name string, markers ...string) (seq int32, marker string, ok bool) {
	i := -1
	for _, m := range markers {
		if j := strings.LastIndex(name, m); j > i {
			i, marker = j, m
		}
	}
	if i < 0 {
		return 0, "", false
	}
	n, err := strconv.ParseInt(name[i+len(marker):], 10, 32)
	if err != nil {
		return 0, "", false
	}
	return int32(n), marker, true
}

// queued is one child of a lock path, in queue order.
type queued struct {
	name   string
	seq    int32
	hasSeq bool
	reader bool // an RWMutex reader's node
}

// order sorts the children of a lock path into queue order: by sequence
// number read as unsigned, with the children that carry none after them, by
// name. At one sequence number a writer's node sorts before a reader's: a
// downgrade's read node takes its writer's number (see RWMutex), and must
// sort after it.
//
// ZooKeeper writes a parent's cversion as the sequence, a signed 32-bit
// counter: after 2^31 creates under one parent it goes on at -2147483648.
// Read as unsigned, the numbers keep creation order across that wrap (until
// 2^32 creates), which the handoff argument (see queue) needs: a node created
// later never sorts ahead. Signed order, and Curator's order (it compares the
// digits as strings, and "-" sorts before "0"), put a node created after the
// wrap ahead of the holder. A dsync waiter never does; a Curator peer on the
// same path past the wrap can, whatever dsync does (see doc.go).
func order(children []string, markers ...string) []queued {
	q := parse(children, markers...)
	slices.SortFunc(q, compare)
	return q
}

// parse reads the children of a lock path, in the order given.
func parse(children []string, markers ...string) []queued {
	q := make([]queued, len(children))
	for i, c := range children {
		var m string
		q[i].name = c
		q[i].seq, m, q[i].hasSeq = sequence(c, markers...)
		q[i].reader = m == readMarker
	}
	return q
}

// compare compares two nodes of a lock path in queue order (see order).
func compare(a, b queued) int {
	switch {
	case a.hasSeq != b.hasSeq:
		if a.hasSeq {
			return -1
		}
		return 1
	case a.seq != b.seq:
		return cmp.Compare(uint32(a.seq), uint32(b.seq))
	case a.reader != b.reader:
		if b.reader {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
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
// exists watch on the predecessor's handoff signal (handoffPath): the head
// of a queue deletes its node and sends that signal in one transaction, and
// no one else sends it while the waiter waits (see entry.fire). The signal
// proves the waiter first (the signal's path is dsync's: a node someone else
// made there would read as the signal, as the README says); a departure
// without it (a giving up, an expiry, a Curator node) makes the waiter list
// again, and take back its watch on the signal that was not sent
// (entry.takeBack). A contended handoff is then one transaction and one
// notification: a waiter costs a create, a listing, the watches and the
// delete, and one more listing (with the transaction that takes the watch
// back, beside it) only after a departure other than a handoff.
//
// An RWMutex's readers and writers share one queue (rw set). A writer waits
// as above; readers send no handoff signal, as a reader that leaves proves
// nothing about the nodes ahead of it. A reader is first when no writer is
// ahead of it: it follows the nearest writer ahead, and that writer's
// departure makes it first when it was the only writer ahead at the last
// listing; otherwise the reader lists again. It sets no exists watch on the
// writer's handoff signal: several readers may follow one writer, so none of
// them could send the signal to take its own watch back when it gives up (as
// a writer does, see entry.fire), and the watch would stay set for as long as
// the session lives if that writer then left without the signal.
//
// Invariant: a node created after a listing sorts after every node in it,
// except a downgrade's read node, which takes its writer's place (see
// RWMutex.downgrade); dsync's downgrade writes to the writer's node in the
// same transaction, and a waiter that sees the writer's node written, or
// gone before its watch was set, lists again instead of claiming; so does a
// writer behind a writer that learns of that node's departure after the
// connection its watches were set on dropped (a reconnect reports the
// deletion, not the write before it). A writer behind another client's
// writer node lists again when it goes, whatever its place (Curator's
// downgrade writes nothing to it).
//
// A checked queue's waiters set no watch on their own node, and claim
// without one: its head acts on its place only through writes that check,
// in the same transaction, that its node still exists (a Weighted's internal
// lock: its holder's only writes are its lease creates, see
// zkconn.Handle.CreateProtectedWhile). A waiter whose node was deleted while
// it waited may then believe itself first alongside the rightful head, but
// its first write fails, and it queues again.
type queue struct {
	sess    *zkconn.Session
	path    string
	marker  string
	data    []byte
	rw      bool // an RWMutex's queue: nodes sort by either marker
	checked bool // see above
}

// line sorts the children of q's path into queue order.
func (q *queue) line(children []string) []queued { return order(children, q.markers()...) }

// markers returns the markers q's nodes sort by.
func (q *queue) markers() []string {
	if q.rw {
		return []string{readMarker, writeMarker}
	}
	return []string{q.marker}
}

// before returns the nodes among children that sort ahead of name, in no
// particular order (one pass, no sort: a queue of n nodes costs each join
// O(n)), and whether name is among children.
func (q *queue) before(children []string, name string) ([]queued, bool) {
	line := parse(children, q.markers()...)
	i := slices.IndexFunc(line, func(n queued) bool { return n.name == name })
	if i < 0 {
		return nil, false
	}
	own := line[i]
	return slices.DeleteFunc(line, func(n queued) bool { return compare(n, own) >= 0 }), true
}

// head returns the first of children (not empty) in queue order.
func (q *queue) head(children []string) queued {
	return slices.MinFunc(parse(children, q.markers()...), compare)
}

// nearest returns the node of ns (not empty) that sorts last: the one just
// ahead of a node behind them all.
func nearest(ns []queued) queued { return slices.MaxFunc(ns, compare) }

// reader reports whether q's nodes are an RWMutex's readers.
func (q *queue) reader() bool { return q.marker == readMarker }

// blocking returns the nodes among ahead that keep a node of q's from
// holding: all of them, or for a reader the writers.
func (q *queue) blocking(ahead []queued) []queued {
	if !q.reader() {
		return ahead
	}
	var ws []queued
	for _, n := range ahead {
		if !n.reader {
			ws = append(ws, n)
		}
	}
	return ws
}

// handoffSuffix makes a node's handoff signal path from its own.
const handoffSuffix = ".handoff"

func handoffPath(node string) string { return node + handoffSuffix }

// entry is a node of ours in a queue, or one that reached its head.
type entry struct {
	h     zkconn.Handle
	node  string // full path
	czxid int64
	// own is the watch on node, which fires when it is deleted or written:
	// set while waiting, and while held if the hold is tracked.
	own *zkconn.Watch
	// ownLink is the connection up when own was set (zkconn.Handle.Suspended
	// of a Refresh): once it closes, events may come in another order.
	ownLink <-chan struct{}
	// watches are the exists watches set on signals in fire (see
	// watchSignal), wanted until they fire or e leaves, and kept until then
	// or until their requests have gone out (see unwatch and remove).
	watches []*zkconn.ExistsWatch
	// fire lists the signals to send as node is deleted (zkconn.Handle.Delete
	// sends them only if node is still there): the handoff signal of a head
	// of the queue, and those of predecessors whose watch (set by us) has not
	// fired, so that no watch is left behind. While our node exists no other
	// waiter can be watching one of the latter: a waiter created before ours
	// sorts ahead of it and would have been our predecessor instead, unless
	// it was gone by then; one created after lists ours and follows ours or
	// one behind it. A predecessor seen gone without its signal, or written
	// to, has it sent at once, under the same condition (takeBack).
	//
	// A signal can be sent only while our node exists. If someone else
	// deletes it (an operator), those still listed cannot be: their watches
	// stay set on the connection up (go-zookeeper cannot remove a watch),
	// though not on the next one (zkconn.Handle.Unwatch), unless their nodes
	// send them. That is at most one watch per deletion, on a predecessor
	// still there then that later leaves without its signal.
	fire []string
}

// remove deletes e's node, sending e.fire (see zkconn.Handle.Delete), once
// the requests setting watches on those signals have gone out: ZooKeeper
// must set a watch before the signal that is to fire it, and a request left
// out when its caller gave up may not even have been queued on the
// connection yet.
func (e entry) remove() (sent, settled <-chan struct{}) {
	unwatchAll(e.watches)
	ws := e.watches
	return e.h.DeleteAfter(func() {
		for _, x := range ws {
			<-x.Out
		}
	}, e.node, e.fire...)
}

// unwatch says that e's watches on the signal at path are no longer wanted
// (zkconn.ExistsWatch.Unwatch): they fired, or their signal is about to be
// sent, and one that go-zookeeper set again on a new connection after that
// would stay set. Those whose requests have gone out leave e.watches, as
// remove has nothing to wait for on them: a waiter follows the node ahead
// again after each write to it (a revocation request), and would otherwise
// keep one for each write while it waits.
func (e *entry) unwatch(path string) {
	e.watches = slices.DeleteFunc(e.watches, func(x *zkconn.ExistsWatch) bool {
		if x.Path != path {
			return false
		}
		x.Unwatch()
		return isClosed(x.Out)
	})
}

// unwatchAll says that none of the watches in ws is wanted any more (see
// entry.unwatch): the node that set them leaves.
func unwatchAll(ws []*zkconn.ExistsWatch) {
	for _, x := range ws {
		x.Unwatch()
	}
}

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
			return entry{}, withPath(q.path, err)
		}
		e, err := q.join(ctx, h, wait, track)
		if err == nil {
			return e, nil
		}
		if e.node != "" {
			_, settled := e.remove()
			*undoing = append(*undoing, settled)
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
	var deleting zkconn.Deletes
	if !wait {
		deleting = h.Deleting(q.path) // before the listing, which may still show them
	}
	ahead, err := q.create(ctx, &e)
	waited := false
	if err == nil && !wait {
		ahead, waited, err = q.past(ctx, &e, ahead, deleting)
	}
	switch {
	case err != nil:
		return e, err
	case len(q.blocking(ahead)) == 0:
		if waited && !q.reader() {
			e.fire = append(e.fire, handoffPath(e.node)) // not first at creation: see below
		}
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
	// it when it leaves, unless it is a reader (see queue).
	if !q.reader() {
		e.fire = append(e.fire, handoffPath(e.node))
	}
	return e, nil
}

// past returns the nodes ahead of e's, once those that are only this
// session's own released nodes have gone: their deletes were under way
// (zkconn.Handle.Deleting) before the listing or are now (a create can come
// before a delete sent again after a reconnect). The caller, which does not
// wait, would fail on them. waited reports whether there were any. A node
// still listed once its delete has settled (refused, say) is not waited for
// again: only deletes under way now count after the first round.
func (q *queue) past(ctx context.Context, e *entry, ahead []queued, deleting zkconn.Deletes) (_ []queued, waited bool, _ error) {
	for {
		b := q.blocking(ahead)
		now := e.h.Deleting(q.path)
		var own []<-chan struct{}
		for _, n := range b {
			p := q.path + "/" + n.name
			if ch := cmp.Or(now.Of(p), deleting.Of(p)); ch != nil {
				own = append(own, ch)
			}
		}
		if len(own) == 0 || len(own) < len(b) {
			return ahead, waited, nil
		}
		for _, ch := range own {
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, waited, ctx.Err()
			}
		}
		waited, deleting = true, nil
		var err error
		if ahead, err = q.ahead(ctx, e.h, e.node[len(q.path)+1:]); err != nil {
			return nil, waited, err
		}
	}
}

// create creates e's node while listing the queue, in one round trip (see
// zkconn.Handle.CreateProtectedListing), and returns the nodes ahead of it.
// Without that listing (it failed, or did not show the node), it lists
// again.
func (q *queue) create(ctx context.Context, e *entry) ([]queued, error) {
	var (
		children []string
		err      error
	)
	e.node, children, err = e.h.CreateProtectedListing(ctx, q.path, q.marker, q.data)
	if err != nil {
		return nil, err
	}
	name := e.node[len(q.path)+1:]
	if ahead, ok := q.before(children, name); ok {
		return ahead, nil
	}
	return q.ahead(ctx, e.h, name)
}

// await waits until e's node is first in line, given the nodes ahead of it
// at the last listing (see queue).
func (q *queue) await(ctx context.Context, e *entry, ahead []queued) error {
	name := e.node[len(q.path)+1:]
	var seen written
	for {
		b := q.blocking(ahead)
		if len(b) == 0 {
			return nil
		}
		first, left, err := q.follow(ctx, e, nearest(b), len(b) == 1, &seen)
		if err != nil || first {
			return err
		}
		// List again, and meanwhile take back the watch on the signal of
		// a node that left without sending it, or was written to.
		var wg sync.WaitGroup
		if left.watch != nil {
			wg.Go(func() { e.takeBack(ctx, left) })
		}
		ahead, err = q.ahead(ctx, e.h, name)
		wg.Wait()
		if err != nil {
			return err
		}
	}
}

// written is the last write to a followed node that made its waiter list
// again: a write is acted on once, so that a node written to (a revocation
// request, say) is followed after the one listing it calls for.
type written struct {
	node    string
	version int32
}

// follow waits until prev, the node e's waits for, is gone, and reports
// whether e's node is then first: prev was the only node blocking it at the
// last listing, or sent its handoff signal; and e's node still exists (see
// claim). It reports false, for the caller to list again, when prev was
// written to since it was created (a downgrade, a revocation request: once
// per write, recorded in *seen), and in an RWMutex's queue when prev is gone
// before its watch is set, or, for a writer behind a writer, is gone or sent
// its signal after the connection its watches were set on dropped (see
// queue). When it reports false with prev's signal not sent (prev gone, or
// written to), left is that signal if its watch is still set, for the
// caller to take back (see entry.takeBack): a signal left in e.fire would
// keep its watch set while e waits, one for each node e followed, and
// outgrow e's delete (the signals go with it).
//
// The first time, it also sets the watch on e's own node, unless q is
// checked. The watches are sent together: one round trip, before any
// handoff.
func (q *queue) follow(ctx context.Context, e *entry, prev queued, first bool, seen *written) (_ bool, left signal, _ error) {
	h := e.h
	path := q.path + "/" + prev.name
	if q.rw && !q.reader() && !prev.reader && !zkconn.IsNative(prev.name) {
		// A writer of another client (Curator 5.5 on) downgrades with
		// a read node at its place and no write to its own node: a
		// writer behind it lists again when it goes.
		first = false
	}
	var (
		wg             sync.WaitGroup
		handoff        signal
		sigWatch       *zkconn.ExistsWatch
		sigErr, ownErr error
		own            *zkconn.Watch
		czxid          int64
		needSig        = !first && zkconn.IsNative(prev.name) && !prev.reader && !q.reader()
		needOwn        = e.own == nil && !q.checked
	)
	// The connection up before any of the watches below is set: while it
	// stays up, their events come in the order ZooKeeper sent them.
	link := h.Refresh().Suspended()
	if needSig {
		// In e.fire from the moment it may be set: a request abandoned
		// with ctx may still set it, and e's delete then waits for it
		// (see remove).
		e.fire = append(e.fire, handoffPath(path))
		wg.Go(func() { handoff, sigWatch, sigErr = watchSignal(ctx, h, handoffPath(path)) })
	}
	if needOwn {
		wg.Go(func() { czxid, own, ownErr = watchNode(ctx, h, e.node) })
	}
	// The Watch is the server's on h's connection, set with the read or
	// before it (GetW shares only such a watch): its events come in order
	// with the connection's others, as link's rule below counts on.
	_, st, prevWatch, err := h.GetW(ctx, path)
	defer prevWatch.Stop()
	watch := prevWatch.C()
	wg.Wait()
	if needSig {
		e.watches = append(e.watches, sigWatch)
	}
	if needSig && handoff.watch == nil && sigErr == nil {
		// A node is at the signal's path: it is no signal.
		e.fire = slices.DeleteFunc(e.fire, func(p string) bool { return p == handoffPath(path) })
		e.unwatch(handoffPath(path))
	}
	if needOwn && ownErr == nil {
		e.czxid, e.own, e.ownLink = czxid, own, link
	}
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		err = cmp.Or(ownErr, sigErr, err)
	}
	switch {
	case errors.Is(err, zk.ErrNoNode) && q.rw:
		handoff.fired(e) // if it was sent, its watch is no longer set
		return false, handoff, nil
	case errors.Is(err, zk.ErrNoNode):
		return e.gone(ctx, first, &handoff)
	case err != nil:
		return false, signal{}, err
	case st.Version != 0 && *seen != (written{path, st.Version}):
		*seen = written{path, st.Version}
		handoff.fired(e) // if it was sent, its watch is no longer set
		return false, handoff, nil
	}
	// A writer of ours may downgrade: a write to prev, then its deletion.
	// Across a reconnect go-zookeeper sets prev's watch again, and ZooKeeper
	// reports only what is there now: a deletion, never the write before
	// it. Once link has dropped, a writer behind a writer lists again (a
	// listing shows the downgrade's read node), as when prev is gone before
	// its watch is set.
	downgradable := q.rw && !q.reader() && !prev.reader
	for {
		select {
		case ev := <-watch:
			if ev.Type == zk.EventNodeDeleted {
				if downgradable && isClosed(link) {
					handoff.fired(e) // if it was sent, its watch is no longer set
					return false, handoff, nil
				}
				return e.gone(ctx, first, &handoff)
			}
			handoff.fired(e) // written to: list again
			return false, handoff, nil
		case ev := <-handoff.watch:
			if !handoff.took(e, ev) {
				continue
			}
			if downgradable && isClosed(link) {
				return false, signal{}, nil // a write to prev may be lost: see above
			}
			// A write to prev before it left is in watch by now (one
			// connection keeps the order): it may be a downgrade, whose
			// read node is still there.
			select {
			case ev := <-watch:
				if ev.Type != zk.EventNodeDeleted {
					return false, signal{}, nil
				}
			default:
			}
			first, err := e.claim(ctx, true)
			return first, signal{}, err
		case ev := <-e.own.C():
			if ev.Type == zk.EventNodeDeleted {
				return false, signal{}, errNodeGone
			}
			// A notification already in (of prev, or of its signal)
			// may have come on a connection gone since e.own was set:
			// a watch set on the connection up now proves nothing about
			// it, so claim must read again (after a sync).
			link := h.Refresh().Suspended()
			if isClosed(e.ownLink) {
				link = e.ownLink
			}
			e.ownLink = link
			if e.czxid, e.own, err = watchNode(ctx, h, e.node); err != nil {
				return false, signal{}, err
			}
		case <-ctx.Done():
			return false, signal{}, ctx.Err()
		case <-h.Lost():
			return false, signal{}, h.Err()
		}
	}
}

// isClosed reports, without waiting, whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// gone is follow's answer once the node e waits for is gone: e's node is
// first if that node was the only one ahead (first) or sent its signal
// (handoff), and still exists (see claim). Otherwise the signal, not sent,
// is returned as follow's left.
func (e *entry) gone(ctx context.Context, first bool, handoff *signal) (bool, signal, error) {
	if !first && !handoff.fired(e) {
		return false, *handoff, nil
	}
	first, err := e.claim(ctx, true)
	return first, signal{}, err
}

// takeBack sends s, the signal of a node e followed that left without
// sending it or was written to, so that our watch on it fires rather than
// stay set for as long as the session lives: in one transaction with a
// check that e's node still exists, because only while it does is no other
// waiter watching s (see entry.fire). Sent, s leaves e.fire; otherwise (e's
// node is gone, or ctx ended) it stays there.
func (e *entry) takeBack(ctx context.Context, s signal) {
	e.unwatch(s.path) // first: a reconnect may come before the signal
	if e.h.Signal(ctx, e.node, s.path) == nil {
		e.fire = slices.DeleteFunc(e.fire, func(p string) bool { return p == s.path })
	}
}

// claim returns first, after checking that e's node still exists when
// first is set: an operator may have deleted it while it waited, and then a
// later node may believe it is first too. e.own is set, and on one
// connection ZooKeeper sends a session's events in order, which
// go-zookeeper hands to their channels in order: a deletion of e's node that
// came before what made e first is already in e.own. Across a reconnect
// that order is lost (the watches are set again in one request, and fire in
// its order), so after one the node is read again, after a sync
// (zkconn.CatchUp): two round trips only then, or when the node was written
// to meanwhile (its watch must be set again). What made e first was a
// notification, which a reconnect does not ask the next server to have
// seen: a server that lags behind it would show e's node even if it was
// deleted before it, and a node behind e's would hold too.
//
// Invariant: a waiter never reports first unless its node existed at the
// zxid of the event that made it first; in a checked queue (e.own not set),
// a waiter whose node is gone may, and its head's writes fail instead (see
// queue).
func (e *entry) claim(ctx context.Context, first bool) (bool, error) {
	if !first || e.own == nil {
		return first, nil
	}
	reread := false
	select {
	case ev := <-e.own.C():
		if ev.Type == zk.EventNodeDeleted {
			return false, errNodeGone
		}
		reread = true
	case <-e.ownLink:
		reread = true
	default:
	}
	if reread {
		e.own.Stop() // if it has not fired
		link := e.h.Refresh().Suspended()
		err := e.h.Do(ctx, func(c *zk.Conn) error { return zkconn.CatchUp(c, e.node) })
		if err != nil {
			return false, err
		}
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
	e.unwatch(s.path)
	e.fire = slices.DeleteFunc(e.fire, func(p string) bool { return p == s.path })
	return ev.Type == zk.EventNodeCreated
}

// watchSignal sets an exists watch on path. If a node is at path, it is no
// signal: it returns one with no watch (the watch set stays with that node).
// The caller adds a signal with a watch to e.fire until the watch fires, and
// the ExistsWatch, which comes with any error (the request may still be out
// when ctx ends), to e.watches.
func watchSignal(ctx context.Context, h zkconn.Handle, path string) (signal, *zkconn.ExistsWatch, error) {
	there, x, err := h.ExistsW(ctx, path)
	if err != nil || there {
		return signal{}, x, err
	}
	return signal{path: path, watch: x.C}, x, nil
}

// ahead lists the queue and returns the nodes ahead of name (see before). It
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
	ahead, ok := q.before(children, name)
	if !ok {
		return nil, errNodeGone
	}
	return ahead, nil
}

// watchNode sets a watch on node, a node of ours, and returns it with the
// node's czxid. It returns errNodeGone if the node does not exist.
func watchNode(ctx context.Context, h zkconn.Handle, node string) (int64, *zkconn.Watch, error) {
	_, st, watch, err := ownNode(ctx, h, node)
	if err != nil {
		return 0, nil, err
	}
	return st.Czxid, watch, nil
}

// maxPath is the longest lock path, in bytes, dsync takes: a release's
// request carries its node's path several times (its delete, and a create
// and a delete per signal), and must stay well inside what ZooKeeper takes
// in one (zkconn.ErrTooLarge): the signals go out with the delete or not at
// all. maxName is the most a node's path adds to its lock's: a parent of the
// lock's own (/leases/, the longest), _c_<UUID>-, a marker (__WRIT__, the
// longest) and a sequence number of up to 11 characters.
const (
	maxPath = 4096
	maxName = len("/leases/") + len("_c_-") + 36 + len("__WRIT__") + 11
)

// validate checks what every primitive is given, before anything is sent.
func validate(sess *zkconn.Session, path string) error { return validateUpTo(sess, path, maxPath) }

// validateUpTo is validate for a path of up to limit bytes.
func validateUpTo(sess *zkconn.Session, path string, limit int) error {
	if sess == nil {
		return ErrNilSession
	}
	if err := zkconn.ValidatePath(path); err != nil {
		return fmt.Errorf("dsync: %w", err)
	}
	if len(path) > limit {
		return fmt.Errorf("dsync: %w: %.64s…: %d bytes, longer than %d", ErrBadPath, path, len(path), limit)
	}
	return nil
}
