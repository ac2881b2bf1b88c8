package dsync

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// Semaphore is a weighted semaphore. golang.org/x/sync/semaphore's
// *Weighted satisfies it, and so does *Weighted here: code written against a
// local semaphore takes a distributed one. Three differences: here n <= 0
// is an error (ErrWeight) and TryAcquire of it reports false, where x/sync
// grants 0 and panics on a negative n; TryAcquire asks ZooKeeper; and a
// hold can be lost (see Weighted).
type Semaphore interface {
	// Acquire acquires n, blocking until available or ctx is done. On
	// success it returns nil; on failure ctx.Err() (or the cause), leaving
	// the semaphore unchanged.
	Acquire(ctx context.Context, n int64) error
	// TryAcquire acquires n without waiting for other holders and reports
	// whether it did. (*Weighted asks ZooKeeper, within the session
	// timeout; x/sync's never blocks.)
	TryAcquire(n int64) bool
	// Release releases n.
	Release(n int64)
}

var _ Semaphore = (*Weighted)(nil)

// leaseMarker precedes the sequence number of a lease node
// (PATH/leases/_c_<uuid>-lease-0000000042).
const leaseMarker = "lease-"

// A Weighted is a semaphore of max leases shared by every process that uses
// the same ZooKeeper path: Curator's InterProcessSemaphoreV2, in Go. Java
// processes using InterProcessSemaphoreV2 (or InterProcessSemaphoreMutex, for
// a maximum of 1) on the same path and maximum share it.
//
// Layout (Curator's): an internal Mutex at PATH/locks, and one ephemeral node
// per lease under PATH/leases. An acquirer takes the internal Mutex, creates
// its lease nodes, waits until PATH/leases has no more than max children, and
// releases the internal Mutex; only that one acquirer watches the leases. A
// lease is released by deleting its node.
//
// Unlike Curator's acquire(qty), which takes leases one by one and lets two
// partial holders deadlock, Acquire(ctx, n) is all or nothing: it creates all
// n nodes while it holds the internal Mutex.
//
// Within a process, goroutines acquiring through one Weighted go one at a
// time, in order, as x/sync's waiters do: each acquisition takes at least
// two round trips, and one waiting for room holds up those behind it.
// TryAcquire and TryAcquireLeases fail while another goroutine of this
// process is acquiring through the same Weighted, even if there is room.
//
// A lease can be lost like a Mutex hold (see LossPolicy): AcquireLeases
// returns leases whose Context tells. A Weighted must be made with NewWeighted
// or NewWeightedCount and must not be copied after first use.
type Weighted struct {
	lock   queue
	leases queue
	policy LossPolicy
	// revocable: its leases are revocable holds (a SemaphoreMutex's; see
	// Revocable, which a Weighted itself ignores).
	revocable bool
	max       int64              // fixed maximum, or 0 with count
	count     *Count             // shared maximum, or nil
	seen      watchedRead[int32] // count as last read, with its watch
	err       error
	gate      gate // one acquirer of this process at a time
	// undoing holds the deletes of an acquisition's internal lock node and
	// of the lease nodes it gave up; the gate's holder owns it and hands it
	// on (see gate).
	undoing []<-chan struct{}

	mu   sync.Mutex
	held []*Lease // taken by Acquire and TryAcquire, for Release
}

// NewWeighted returns a semaphore of max leases at path. Nothing is sent to
// ZooKeeper until it is used. A nil sess, a bad path or max <= 0 is reported
// by every call.
func NewWeighted(sess *zkconn.Session, path string, max int64, opts ...Option) *Weighted {
	w := newWeighted(sess, path, opts)
	w.max = max
	if w.err == nil && max <= 0 {
		w.err = fmt.Errorf("%w: maximum %d", ErrWeight, max)
	}
	return w
}

// NewWeightedCount returns a semaphore at path whose maximum is the value of
// count, followed live (Curator's SharedCountReader mode): raising the count
// wakes waiters, lowering it applies to acquisitions from then on (leases
// held are not taken back). It keeps one watch on the count per ZooKeeper
// session, set again only after it fires.
func NewWeightedCount(sess *zkconn.Session, path string, count *Count, opts ...Option) *Weighted {
	w := newWeighted(sess, path, opts)
	w.count = count
	switch {
	case w.err != nil:
	case count == nil:
		w.err = errors.New("dsync: nil count")
	case count.err != nil:
		w.err = count.err
	}
	return w
}

func newWeighted(sess *zkconn.Session, path string, opts []Option) *Weighted {
	o := newOptions(opts)
	return &Weighted{
		lock:   queue{sess: sess, path: path + "/locks", marker: lockMarker, data: o.data, checked: true},
		leases: queue{sess: sess, path: path + "/leases", marker: leaseMarker, data: o.data},
		policy: o.policy,
		err:    validate(sess, path),
		gate:   newGate(),
	}
}

// Acquire acquires n leases, blocking until they are available or ctx is
// done. On success, returns nil. On failure, returns ctx.Err() (or the error
// that stopped it) and leaves the semaphore unchanged: no lease node and no
// internal lock node is left behind. n <= 0, or n above a fixed maximum, is
// an error at once (wrapping ErrWeight), where x/sync's grants 0, panics on
// a negative n, and waits for ctx on an n above its size; with
// NewWeightedCount, n above the count waits until the count allows it
// or ctx is done, as in Curator (TryAcquire, TryAcquireLeases: ErrWouldBlock).
// While it waits, a lost session, or a node of its deleted by someone else,
// puts it back in line, last, on the next session, within the same ctx:
// neither is an error.
func (w *Weighted) Acquire(ctx context.Context, n int64) error {
	ls, err := w.acquire(ctx, n, true, false)
	if err != nil {
		return err
	}
	w.keep(ls)
	return nil
}

// TryAcquire acquires n leases without waiting for other holders, and
// reports whether it did. It does talk to ZooKeeper (bounded by the session
// timeout), and reports false if that fails. Leases this Session released
// whose deletes have not landed yet (sent again after a reconnect, say) are
// waited for, within that bound, rather than counted.
func (w *Weighted) TryAcquire(n int64) bool {
	if w.err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.lock.sess.SessionTimeout())
	defer cancel()
	ls, err := w.acquire(ctx, n, false, false)
	if err != nil {
		return false
	}
	w.keep(ls)
	return true
}

// TryAcquireLeases acquires n leases like AcquireLeases, but without waiting
// for other acquirers or holders: if they are not free now it returns
// ErrWouldBlock. ctx bounds the requests to ZooKeeper.
func (w *Weighted) TryAcquireLeases(ctx context.Context, n int64) ([]*Lease, error) {
	return w.acquire(ctx, n, false, true)
}

func (w *Weighted) keep(ls []*Lease) {
	w.mu.Lock()
	w.held = append(w.held, ls...)
	w.mu.Unlock()
}

// Release releases n leases taken by Acquire or TryAcquire: those lost with
// their session first (they hold nothing), then the newest, as live leases
// are interchangeable. Releasing more than are held panics, as in x/sync.
// Like Mutex.Unlock it never waits for the network: a later acquisition
// through the same Session is applied after its deletes, and a TryAcquire
// waits for those still under way (sent again after a reconnect) rather
// than fail on them.
func (w *Weighted) Release(n int64) {
	w.mu.Lock()
	if n < 0 || n > int64(len(w.held)) {
		w.mu.Unlock()
		panic("dsync: released more than held")
	}
	// Gone leases move to the end, where Release takes from (see
	// hold.gone); each is judged once, as a session may be lost meanwhile.
	live, gone := w.held[:0], []*Lease(nil)
	for _, l := range w.held {
		if l.hd.gone() {
			gone = append(gone, l)
		} else {
			live = append(live, l)
		}
	}
	w.held = append(live, gone...)
	// ls is a copy: keep appends to w.held in place, over the slots given
	// up here, once w.mu is let go. Those slots let go of their leases.
	k := len(w.held) - int(n)
	ls := slices.Clone(w.held[k:])
	clear(w.held[k:])
	w.held = w.held[:k]
	w.mu.Unlock()
	if n == 0 {
		return
	}
	// Every delete goes out before Release waits for any: it waits once,
	// not once per lease, on a live lease's session if there is one (the
	// one any later acquisition uses; the others are lost, and their
	// deletes settled).
	sent := make([]<-chan struct{}, 0, n)
	h := ls[0].hd.h
	for _, l := range ls {
		l.released()
		s, _ := l.hd.release()
		sent = append(sent, s)
		if l.hd.h.Err() == nil {
			h = l.hd.h
		}
	}
	h.AwaitSent(sent...)
}

// AcquireLeases acquires n leases like Acquire, and returns them to be
// released one by one; Release does not see them.
func (w *Weighted) AcquireLeases(ctx context.Context, n int64) ([]*Lease, error) {
	return w.acquire(ctx, n, true, true)
}

// Participants returns the lease nodes at w's path in the order they were
// created, with each one's owner and data (Curator's leases included). Lease
// nodes that are not held yet, because their acquirer still waits for room,
// are there too, marked Waiting: they count against the maximum.
//
// Waiting follows from the protocol, dsync's and Curator's alike: only the
// holder of the internal lock (the head of PATH/locks) creates lease nodes,
// and it holds the lock from before it creates them until they fit under
// the maximum. So the leases still waiting are those the holder made.
//
//   - A dsync holder names them: each of its lease nodes is kin of its lock
//     node (zkconn.Kin), and all of them wait while it holds the lock
//     (Acquire is all or nothing). They are marked, whatever the maximum.
//   - A Curator holder takes one lease per round of the lock, and its nodes
//     carry no such mark: if the leases number more than the maximum, the
//     newest lease is marked when it is in the holder's session and newer
//     than its lock node. A held lease of another thread of the same Curator
//     client, made after the holder queued, is taken for the waiting one when
//     the holder has not yet made its own. With NewWeightedCount the maximum
//     is the count's value (Get).
//
// It reads the leases, then the head of the internal lock: two reads, not one
// snapshot, so under churn a lease still waiting at the first read shows as
// held if its acquirer got room before the second, and leases just granted
// show as waiting until their acquirer's release of the lock (its next
// request) is done.
func (w *Weighted) Participants(ctx context.Context) ([]Participant, error) {
	if w.err != nil {
		return nil, w.err
	}
	ps, err := w.leases.participants(ctx)
	if err != nil {
		return nil, err
	}
	head, err := w.lock.first(ctx, 1)
	if err != nil || len(head) == 0 {
		return ps, err
	}
	if zkconn.IsNative(head[0].Node) {
		for i := range ps {
			ps[i].Waiting = ps[i].Session == head[0].Session && zkconn.Kin(ps[i].Node, head[0].Node)
		}
		return ps, nil
	}
	max := w.max
	if w.count != nil {
		v, err := w.count.Get(ctx)
		if err != nil {
			return nil, err
		}
		max = int64(v.Value)
	}
	if n := len(ps) - 1; n >= 0 && int64(len(ps)) > max &&
		ps[n].Session == head[0].Session && ps[n].Token > head[0].Token {
		ps[n].Waiting = true
	}
	return ps, nil
}

// acquire takes the internal lock, creates n leases and, if wait is set,
// waits until they fit under the maximum; with track set, the leases are
// watched for loss. If the session is lost on the way it starts again on the
// next one.
func (w *Weighted) acquire(ctx context.Context, n int64, wait, track bool) ([]*Lease, error) {
	if w.err != nil {
		return nil, w.err
	}
	if n <= 0 || w.count == nil && n > w.max {
		return nil, fmt.Errorf("%w: %d leases of a semaphore of %d", ErrWeight, n, w.max)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := w.gate.enter(ctx, wait); err != nil {
		return nil, err
	}
	defer func() {
		// Cleared before the gate is given back: the next holder owns it.
		undoing := w.undoing
		w.undoing = nil
		w.gate.leave(settled(undoing))
	}()
	for {
		lk, err := w.lock.acquire(ctx, wait, false, &w.undoing) // errors carry the path already
		if err != nil {
			return nil, err
		}
		var nodes []string
		nodes, err = w.grant(ctx, lk.h, lk.node, n, wait)
		var ls []*Lease
		// The internal lock goes at once, before the leases are handed out,
		// without waiting for the network: the next acquisition through the
		// gate waits only for its delete to go out, and is applied after it
		// (see gate).
		sent, _ := lk.remove()
		w.undoing = append(w.undoing, sent)
		if err == nil {
			ls, err = w.start(ctx, lk.h, nodes, track)
		}
		if err == nil && lost(ls) {
			// Lost before they were handed out (the connection dropped
			// meanwhile): give them back and start again.
			w.abandon(ls)
			err = errNodeGone
		}
		if err == nil {
			return ls, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, zkconn.ErrSessionLost) && !errors.Is(err, errNodeGone) {
			return nil, withPath(w.leases.path, err)
		}
	}
}

// grant creates n lease nodes in h's session, kin of lock (the caller's
// internal lock node: see Participants), and waits until the leases fit under
// the maximum (a shared maximum below n, until it grows). Without wait it
// fails with ErrWouldBlock instead, unless what is in the way is only leases
// this session is deleting: it waits for those once. The caller holds
// the internal lock, so nobody else adds lease nodes meanwhile, unless an
// operator deletes its lock node (see usurped). On failure it deletes the
// nodes it made, adding the deletes to w.undoing (the caller holds the
// gate).
//
// Invariant: dsync creates a lease node only while its acquirer's node in
// the internal lock's queue exists, checked in the create's transaction
// (zkconn.Handle.CreateProtectedWhile), so only the head of that queue
// creates leases. That queue is checked (see queue): its waiters do not
// watch their own nodes, and one whose node was deleted while it waited may
// believe itself first, but fails here with errNodeGone, and queues again.
func (w *Weighted) grant(ctx context.Context, h zkconn.Handle, lock string, n int64, wait bool) (nodes []string, err error) {
	defer func() {
		if err != nil {
			for _, p := range nodes {
				_, settled := h.Delete(p)
				w.undoing = append(w.undoing, settled)
			}
			nodes = nil
		}
	}()
	// Create the nodes and list the leases: the listing goes out as soon
	// as the first create is written (see CreateProtectedWhileListing),
	// one round trip; it lacks the nodes created after it, which are
	// added. Listings set no watch unless the leases do not fit: most
	// grants fit at once, and a watch set then would only fire for nothing
	// at the next lease's coming or going. One that must wait lists again
	// with the watch, which sees every release after it, before it waits.
	// (If that listing finds room after all, its watch stays until the
	// leases next change, at the latest our own release: a watch cannot be
	// taken back.)
	//
	// Invariant: the first listing is served after the acquirer's first
	// create, so it shows every lease made before the acquirer became the
	// head, even when the session has just moved to a server that lags
	// behind the release it was notified of (a listing sent before the
	// create could miss the last head's leases there, and grant one lease
	// too many).
	var deleting zkconn.Deletes
	if !wait {
		deleting = h.Deleting(w.leases.path) // before the listing, which may still show them
	}
	var children []string
	var watch <-chan zk.Event
	var lerr error
	for i := int64(0); i < n; i++ {
		var p string
		var err error
		if i == 0 {
			p, children, err = h.CreateProtectedWhileListing(ctx, w.leases.path, w.leases.marker, w.leases.data, lock)
		} else {
			p, err = h.CreateProtectedWhile(ctx, w.leases.path, w.leases.marker, w.leases.data, lock)
		}
		if errors.Is(err, zkconn.ErrKinGone) {
			err = errNodeGone // our lock node was deleted: queue again
		}
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, p)
	}
	if children == nil {
		// The listing failed or came before the create (the connection
		// dropped between them): list again, after every create.
		children, watch, lerr = list(ctx, h, w.leases.path, false)
	}
	// The first listing, sent once the acquirer was first: a lease missing
	// from it that is not ours was made since (see usurped).
	known := children
	first, watched, waitedOwn, vouched := true, false, false, false
	for {
		if lerr != nil {
			return nodes, lerr
		}
		missing := 0
		for _, p := range nodes {
			if !contains(children, p[len(w.leases.path)+1:]) {
				missing++
			}
		}
		if missing > 0 && !first || usurped(children, known, nodes, w.leases.path) {
			return nodes, errNodeGone
		}
		first = false
		max, maxWatch, err := w.limit(ctx, h)
		if err != nil {
			return nodes, err
		}
		// n above a shared maximum waits for it to grow, as in Curator.
		if int64(len(children)+missing) <= max {
			return nodes, nil
		}
		if !wait {
			// Leases this session released may still be listed, their
			// deletes under way (sent again after a reconnect, say): if
			// they alone are in the way, wait for them, once, and list
			// again, as a TryLock does (see queue.past).
			own := ownDeletes(w.leases.path, children, deleting, h.Deleting(w.leases.path))
			if waitedOwn || len(own) == 0 || int64(len(children)+missing-len(own)) > max {
				return nodes, ErrWouldBlock
			}
			for _, ch := range own {
				select {
				case <-ch:
				case <-ctx.Done():
					return nodes, ctx.Err()
				}
			}
			waitedOwn = true
			children, watch, lerr = list(ctx, h, w.leases.path, false)
			continue
		}
		if !watched {
			// The first listing set no watch: list again with one,
			// which sees every release from now on.
			children, watch, lerr = list(ctx, h, w.leases.path, true)
			watched = true
			if !vouched && lerr == nil {
				// Before the first wait, make sure of known (see
				// usurped): its reply may have come late (sent
				// again after a reconnect, say), after an operator
				// deleted our lock node and another head made its
				// lease. If the lock node is there after it, it was
				// there when known was served (a deleted node never
				// comes back). This costs one request per grant
				// that waits, and none otherwise.
				if _, _, err := readNode(ctx, h, lock); err != nil {
					return nodes, err
				}
				vouched = true
			}
			continue
		}
		select {
		case <-watch:
		case <-maxWatch:
			w.seen.forget(maxWatch) // read the count again
			select {
			case <-watch:
			default:
				// The leases have not changed: their listing and
				// its watch stand (a watch set again would pile up
				// with it until they change).
				continue
			}
		case <-ctx.Done():
			return nodes, ctx.Err()
		case <-h.Lost():
			return nodes, h.Err()
		}
		// A release usually makes room: list without a watch again.
		children, watch, lerr = list(ctx, h, w.leases.path, false)
		watched = false
	}
}

// usurped reports whether children, a listing of the leases under parent,
// holds a node that is neither one of the acquirer's nodes nor in known,
// its first listing. That listing was served after the acquirer became the
// head of the internal lock, after every lease of the heads before it had
// been made (a session's requests are applied in order, and a head lets go
// only once its creates are done); and before its first wait, the acquirer
// makes sure that its lock node was still there after it (see grant). While
// the acquirer's lock node exists, only it makes leases; a node made since
// means an operator deleted that node and another acquirer is the head now.
// Its leases and ours would then count against each other (with max 1, each
// would wait for the other forever): the caller gives its own up and queues
// again. The new lease's create fires the watch the acquirer waits on, so
// this costs no request; and it compares names, not sequence numbers, which
// wrap. (A node an operator adds meanwhile makes the acquirer queue again,
// once: the next first listing has it.)
func usurped(children, known, nodes []string, parent string) bool {
	for _, c := range children {
		if !contains(known, c) && !contains(nodes, parent+"/"+c) {
			return true
		}
	}
	return false
}

// start turns granted lease nodes into Leases; the internal lock is already
// released. With track set, it watches each lease for loss (and learns its
// token). On failure no lease is left: the deletes go to w.undoing.
func (w *Weighted) start(ctx context.Context, h zkconn.Handle, nodes []string, track bool) ([]*Lease, error) {
	ls := make([]*Lease, 0, len(nodes))
	cfg := holdConfig{policy: w.policy, track: track || w.revocable, revocable: w.revocable}
	for i, p := range nodes {
		e := entry{h: h, node: p}
		if cfg.track {
			var err error
			if e.czxid, e.own, err = watchNode(ctx, h, p); err != nil {
				w.abandon(ls)
				for _, q := range nodes[i:] {
					_, settled := h.Delete(q)
					w.undoing = append(w.undoing, settled)
				}
				return nil, err
			}
		}
		ls = append(ls, &Lease{hd: newHold(ctx, w, e, cfg), data: w.leases.data, timeout: w.lock.sess.SessionTimeout()})
	}
	return ls, nil
}

// abandon gives back leases never handed out, adding their deletes to
// w.undoing (the caller holds the gate).
func (w *Weighted) abandon(ls []*Lease) {
	for _, l := range ls {
		w.undoing = append(w.undoing, l.hd.abandon())
	}
}

// lost reports whether any of ls has ended already.
func lost(ls []*Lease) bool {
	for _, l := range ls {
		if l.hd.ctx.Err() != nil {
			return true
		}
	}
	return false
}

// limit returns the maximum now and, with a shared count, a watch that fires
// when it changes. It reads the count, setting the watch, only when the
// watch it set last has fired or belongs to another ZooKeeper session: one
// watch per change, not one per acquisition (see Value.readWatched).
func (w *Weighted) limit(ctx context.Context, h zkconn.Handle) (int64, <-chan zk.Event, error) {
	if w.count == nil {
		return w.max, nil, nil
	}
	v, _, watch, err := w.count.readWatched(ctx, h, &w.seen)
	return int64(v.Value), watch, err
}

// list lists path's children, with a watch if watch is set; a missing path
// has none (and no watch: the caller's own create will make it).
func list(ctx context.Context, h zkconn.Handle, path string, watch bool) ([]string, <-chan zk.Event, error) {
	var children []string
	var ch <-chan zk.Event
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		if watch {
			children, _, ch, err = c.ChildrenW(path)
		} else {
			children, _, err = c.Children(path)
		}
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	return children, ch, nil
}

// ownDeletes returns, for each of parent's children being deleted by this
// session according to one of deleting (zkconn.Handle.Deleting), the
// channel that closes when its delete is settled.
func ownDeletes(parent string, children []string, deleting ...zkconn.Deletes) []<-chan struct{} {
	var own []<-chan struct{}
	for _, c := range children {
		for _, d := range deleting {
			if ch := d.Of(parent + "/" + c); ch != nil {
				own = append(own, ch)
				break
			}
		}
	}
	return own
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A Lease is one lease of a Weighted, from AcquireLeases.
type Lease struct {
	hd      *hold
	data    []byte
	timeout time.Duration // bounds Token's request, if it needs one
	once    sync.Once
}

// Node returns the name of the lease's node, _c_<uuid>-lease-<sequence>.
func (l *Lease) Node() string { return path.Base(l.hd.node) }

// Path returns the full path of the lease's node.
func (l *Lease) Path() string { return l.hd.node }

// Data returns the data of the lease's node (see WithData). The caller must
// not modify it.
func (l *Lease) Data() []byte { return l.data }

// Context returns a context canceled when the lease ends: by Release (cause
// context.Canceled) or by loss (cause wrapping ErrLockLost).
func (l *Lease) Context() context.Context { return l.hd.ctx }

// Token returns the lease node's czxid, a fencing token. Leases of one
// semaphore are held together, so a resource that refuses tokens lower than
// the highest it has seen would refuse a live lease taken before another:
// fence that way only where one holder at a time writes (a SemaphoreMutex,
// or a maximum of 1).
func (l *Lease) Token() int64 { return l.hd.fencingToken(l.timeout) }

// Release gives the lease back (deleting its node, or, after a loss,
// deleting it if it still exists). Releasing a Lease twice panics.
func (l *Lease) Release() {
	l.released()
	l.hd.end()
}

// released marks l released, and panics if it was already.
func (l *Lease) released() {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		panic("dsync: released more than held")
	}
}
