package dsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// ErrUpgrade is returned by RWMutex.LockContext given the context of a read
// hold: a reader that waits for the write lock waits for itself.
var ErrUpgrade = errors.New("dsync: read lock cannot be upgraded to write lock")

// An RWMutex is a reader/writer mutual exclusion lock shared by every process
// that uses the same ZooKeeper path: Curator's InterProcessReadWriteLock, in
// Go. Any number of readers, or one writer, hold it at a time, across
// processes and within one. Java processes using InterProcessReadWriteLock on
// the same path share it.
//
// Readers and writers queue in one line of nodes under the path, in order of
// arrival: _c_<uuid>-__READ__<sequence> and _c_<uuid>-__WRIT__<sequence>. A
// writer holds when its node is first; a reader when no writer's node is
// ahead of its own. So a reader that comes after a waiting writer waits
// behind it, and writers do not starve, as with sync.RWMutex.
//
// Within a process, goroutines share read holds like sync.RWMutex's readers
// (each RLock queues a node of its own) and take the write lock one at a
// time; a reader waits while a writer of this process waits or holds, as
// with sync.RWMutex (so RLock by the write holder waits for ever: downgrade
// with RLockContext and the write hold's context instead).
// The write side is re-entrant through its hold context as Mutex is; a read
// hold through its own. A holder of the write lock may take the read lock, by
// passing its hold context to RLockContext (a downgrade): the read node takes
// the write node's place in line, so that after Unlock of the write lock no
// writer that queued meanwhile gets in before that read hold ends. A read
// hold never turns into a write hold: LockContext with its context returns
// ErrUpgrade. Lock called by a goroutine that holds the read lock deadlocks,
// as with sync.RWMutex. That holds after a loss too: a writer of this
// process waits for every read hold of this process to end (RUnlock), one
// lost unawares after RLock included, and a reader for a write hold's
// Unlock, as goroutines sharing a Mutex do.
//
// Holds are lost as Mutex holds are (see LossPolicy): it is NOT safe to assume
// a lock is held until it is released; watch the hold contexts.
//
// An RWMutex must be made with NewRWMutex and must not be copied after first
// use.
type RWMutex struct {
	w *Mutex // the write side, on writers' nodes
	r queue  // the readers' nodes

	mu      sync.Mutex
	reads   []*hold       // read holds, newest last
	members []*hold       // read holds of MultiLocks (RLocker), which only they end
	noReads chan struct{} // nil while reads and members are empty, else closed when they are
}

// NewRWMutex returns an RWMutex on the lock path path. Nothing is sent to
// ZooKeeper until it is used. A nil sess or a bad path is reported by every
// call (see ErrNilSession, ErrBadPath); the panicking calls panic with it.
func NewRWMutex(sess *zkconn.Session, path string, opts ...Option) *RWMutex {
	w := NewMutex(sess, path, opts...)
	w.q.marker, w.q.rw = writeMarker, true
	r := w.q
	r.marker = readMarker
	rw := &RWMutex{w: w, r: r}
	w.admit = rw.awaitNoReads
	return rw
}

// Invariant: within a process, a write hold and a read hold of one RWMutex
// that their goroutines hold (not yet Unlock or RUnlock) never overlap, lost
// or not, as with sync.RWMutex. Their nodes exclude each other in ZooKeeper
// while both exist; after one is lost (its node gone, maybe untold, as after
// RLock), the process itself keeps them apart:
//   - a reader passes the gate, which a writer of this process holds until
//     Unlock;
//   - a writer that holds in ZooKeeper waits for this process's read holds to
//     end before its hold is handed out (awaitNoReads), and takes the lock
//     again if that hold is lost meanwhile;
//   - a reader whose claim comes while a writer of this process holds or is
//     about to (its node was behind a lost write node, or was lost itself
//     once the writer's came after it) gives it back and queues again
//     (keep).
// The writer sets rw.w.taking before awaitNoReads reads the read holds,
// and keep reads rw.w.taking and rw.w.hold in the critical section that
// adds its read hold: whichever of the two comes second sees the other.

// awaitNoReads waits until this process has no read hold of rw left (an
// RLocker's included), for the write hold hd that holds rw in ZooKeeper
// and is not handed out yet. Without wait it fails with ErrWouldBlock
// instead of waiting. If hd is lost while it waits (its session lost, its
// node gone, or a tracked hold's context canceled) it returns errRetake;
// if ctx is done first, ctx.Err().
func (rw *RWMutex) awaitNoReads(ctx context.Context, hd *hold, wait bool) error {
	waited := false
	for {
		rw.mu.Lock()
		left := rw.noReads
		rw.mu.Unlock()
		switch {
		case left == nil && !waited:
			return nil
		case left == nil:
			// Lost meanwhile? An untracked hold watches nothing: read its
			// node; a tracked one says so, the read included (a
			// suspension under it, say).
			if _, _, err := readNode(ctx, hd.h, hd.node); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return errRetake
			}
			if hd.ctx.Err() != nil {
				return errRetake
			}
			return nil
		case !wait:
			return ErrWouldBlock
		}
		waited = true
		select {
		case <-left:
		case <-hd.ctx.Done():
			return errRetake
		case <-hd.h.Lost():
			return errRetake
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Lock locks rw for writing, blocking until no one else holds it; see
// Mutex.Lock for what it cannot report.
func (rw *RWMutex) Lock() { rw.w.Lock() }

// TryLock tries to lock rw for writing without waiting for other holders, and
// reports whether it did (see Mutex.TryLock).
func (rw *RWMutex) TryLock() bool { return rw.w.TryLock() }

// LockContext locks rw for writing, blocking until it is held or ctx is
// done, and returns the hold context, as Mutex.LockContext does (re-entering
// given the context of the current write hold). Given the context of a read
// hold of rw instead, it returns ErrUpgrade at once.
func (rw *RWMutex) LockContext(ctx context.Context) (context.Context, error) {
	if err := rw.upgrade(ctx); err != nil {
		return nil, err
	}
	return rw.w.LockContext(ctx)
}

// TryLockContext locks rw for writing if no one holds it, without waiting,
// as Mutex.TryLockContext does (ErrWouldBlock if held, ErrUpgrade given the
// context of a read hold).
func (rw *RWMutex) TryLockContext(ctx context.Context) (context.Context, error) {
	if err := rw.upgrade(ctx); err != nil {
		return nil, err
	}
	return rw.w.TryLockContext(ctx)
}

// upgrade returns ErrUpgrade if ctx carries a live read hold of rw and not
// also rw's current write hold (a downgrade's read hold carries the write
// hold it came from, which may have ended).
func (rw *RWMutex) upgrade(ctx context.Context) error {
	hd, r := ctx.Value(holdKey{rw}).(*hold)
	if !r || hd.ctx.Err() != nil {
		return nil
	}
	wh, w := ctx.Value(holdKey{rw.w}).(*hold)
	rw.w.mu.Lock()
	current := w && rw.w.hold == wh
	rw.w.mu.Unlock()
	if current && wh.ctx.Err() == nil {
		return nil
	}
	return ErrUpgrade
}

// Unlock releases one level of the write hold, as Mutex.Unlock does (a
// downgrade's read hold stays). Unlock of an RWMutex not locked for writing
// panics.
func (rw *RWMutex) Unlock() { rw.w.Unlock() }

// RLock locks rw for reading, blocking until no writer holds it or waits
// ahead. Like Lock it cannot fail: it panics only if the lock can never be
// had. It does not watch for loss; use RLockContext for that.
func (rw *RWMutex) RLock() {
	if _, err := rw.rlock(context.Background(), true, false, false); err != nil {
		panic("dsync: RLock: " + err.Error())
	}
}

// TryRLock tries to lock rw for reading without waiting, and reports whether
// it did. It talks to ZooKeeper (bounded by the session timeout), and
// reports false if that fails.
func (rw *RWMutex) TryRLock() bool {
	if rw.w.err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), rw.r.sess.SessionTimeout())
	defer cancel()
	_, err := rw.rlock(ctx, false, false, false)
	return err == nil
}

// RLockContext locks rw for reading, blocking until it is held or ctx is
// done. On success it returns the read hold's context, which is canceled when
// that hold ends (by RUnlock, with cause context.Canceled, or by loss, with a
// cause wrapping ErrLockLost). On failure it returns ctx.Err() or the error
// that stopped it, and leaves nothing behind. A ctx already done fails before
// anything is sent.
//
// Given the context of a live read hold of rw, it re-enters that hold (one
// more RUnlock ends it). Given the context of the current write hold, it
// downgrades: it takes a read hold at once, in the write node's place (see
// RWMutex).
func (rw *RWMutex) RLockContext(ctx context.Context) (context.Context, error) {
	if rw.w.err != nil {
		return nil, rw.w.err
	}
	if hd, ok := ctx.Value(holdKey{rw}).(*hold); ok {
		rw.mu.Lock()
		defer rw.mu.Unlock()
		if hd.ctx.Err() != nil || !slices.Contains(rw.reads, hd) {
			return nil, context.Cause(hd.ctx) // before ctx.Err: ctx may be hd.ctx
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hd.count++
		return hd.ctx, nil
	}
	if wh, ok := ctx.Value(holdKey{rw.w}).(*hold); ok {
		return rw.downgrade(ctx, wh)
	}
	return rw.rlock(ctx, true, true, false)
}

// TryRLockContext locks rw for reading if no writer holds it or waits, without
// waiting, and returns the hold context as RLockContext does; ErrWouldBlock
// if a writer is ahead. ctx bounds the requests to ZooKeeper.
func (rw *RWMutex) TryRLockContext(ctx context.Context) (context.Context, error) {
	return rw.rlock(ctx, false, true, false)
}

// rlock queues a reader's node (waiting for the writers ahead if wait is set)
// and starts a read hold, watched for loss if track is set: a hold of a
// MultiLock if member is set.
func (rw *RWMutex) rlock(ctx context.Context, wait, track, member bool) (context.Context, error) {
	if rw.w.err != nil {
		return nil, rw.w.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var undoing []<-chan struct{} // readers hold no gate: deletes go on alone
	cfg := holdConfig{policy: rw.w.policy, track: track || rw.w.revocable, revocable: rw.w.revocable}
	for {
		// After a give-back, the gate waits for the writer's Unlock.
		if err := rw.w.gate.pass(ctx, wait); err != nil {
			return nil, err
		}
		hd, err := rw.r.take(ctx, rw, wait, cfg, &undoing)
		if err != nil {
			return nil, err
		}
		if rw.keep(hd, member, true) {
			return hd.ctx, nil
		}
		hd.abandon() // its node is gone (see RWMutex's invariant)
		if !wait {
			return nil, ErrWouldBlock
		}
	}
}

// keep adds hd to rw's read holds and reports true; with exclusive set, only
// if no writer of this process holds rw or is about to (see RWMutex's
// invariant).
func (rw *RWMutex) keep(hd *hold, member, exclusive bool) bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if exclusive {
		rw.w.mu.Lock()
		writer := rw.w.hold != nil || rw.w.taking
		rw.w.mu.Unlock()
		if writer {
			return false
		}
	}
	if member {
		rw.members = append(rw.members, hd)
	} else {
		rw.reads = append(rw.reads, hd)
	}
	if rw.noReads == nil {
		rw.noReads = make(chan struct{})
	}
	return true
}

// drop removes the read hold (*holds)[i], and tells a writer waiting for
// rw's read holds when none is left; rw.mu is held.
func (rw *RWMutex) drop(holds *[]*hold, i int) {
	*holds = slices.Delete(*holds, i, i+1)
	if len(rw.reads) == 0 && len(rw.members) == 0 {
		close(rw.noReads)
		rw.noReads = nil
	}
}

// downgrade starts a read hold for wh, the current write hold: a plain
// ephemeral read node, of a new name that carries the write node's sequence
// number so that it sorts right after it (see order), made in one
// transaction with a write to the write node that makes every waiter
// watching it list again (see queue). Its token is the write hold's: it
// goes on with that hold, and writers queued meanwhile (with larger ones)
// come after it.
func (rw *RWMutex) downgrade(ctx context.Context, wh *hold) (context.Context, error) {
	rw.w.mu.Lock()
	current := rw.w.hold == wh
	rw.w.mu.Unlock()
	if !current || wh.ctx.Err() != nil {
		return nil, context.Cause(wh.ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seq := wh.node[strings.LastIndex(wh.node, writeMarker)+len(writeMarker):]
	node := rw.r.path + "/" + zkconn.ProtectedName(readMarker+seq)
	for {
		// The write node's data goes back as it is, so that a revocation
		// request written into it stays there.
		data, st, err := readNode(ctx, wh.h, wh.node)
		if err == nil {
			err = wh.h.CreateTouching(ctx, node, rw.r.data, wh.node, data, st.Version)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, zk.ErrBadVersion) {
			return nil, withPath(rw.r.path, err)
		}
	}
	e := entry{h: wh.h, node: node}
	var err error
	if _, e.own, err = watchNode(ctx, e.h, node); err != nil {
		e.remove()
		return nil, withPath(rw.r.path, err)
	}
	e.czxid = wh.fencingToken(rw.r.sess.SessionTimeout())
	hd := newHold(ctx, rw, e, holdConfig{policy: rw.w.policy, track: true, revocable: rw.w.revocable})
	if hd.ctx.Err() != nil {
		// Born lost (the connection dropped, or ctx ended as it read the
		// node): give it back.
		hd.abandon()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, context.Cause(hd.ctx)
	}
	rw.keep(hd, false, false) // the write hold it comes from is rw's
	return hd.ctx, nil
}

// RUnlock ends one read hold of rw in this process (one more level of it,
// if it was re-entered): one that was lost if there is one, as it holds
// nothing, else the one taken last, as live read holds are interchangeable.
// The read node is deleted without waiting on a slow network (see
// Mutex.Unlock). RUnlock without a read hold panics.
func (rw *RWMutex) RUnlock() { rw.runlock(nil) }

// runlock is RUnlock, for held's read hold if held is not nil (a
// MultiLock's among them).
func (rw *RWMutex) runlock(held context.Context) {
	rw.mu.Lock()
	holds, i := &rw.reads, len(rw.reads)-1
	if held != nil {
		is := func(hd *hold) bool { return hd.ctx == held }
		if i = slices.IndexFunc(rw.reads, is); i < 0 {
			holds, i = &rw.members, slices.IndexFunc(rw.members, is)
		}
	} else if j := slices.IndexFunc(rw.reads, (*hold).gone); j >= 0 {
		i = j // a gone hold first (see hold.gone)
	}
	if i < 0 {
		rw.mu.Unlock()
		panic("dsync: RUnlock of unlocked RWMutex")
	}
	hd := (*holds)[i]
	if hd.count--; hd.count > 0 {
		rw.mu.Unlock()
		return
	}
	rw.drop(holds, i)
	hd.cancel(context.Canceled)
	rw.mu.Unlock()
	hd.end()
}

// An RWMutex is a MultiLock member by its write side, and its RLocker by its
// read side.

func (rw *RWMutex) lockTarget() (*zkconn.Session, string, error) { return rw.w.lockTarget() }

func (rw *RWMutex) lock(ctx context.Context, wait, track bool) (context.Context, error) {
	if err := rw.upgrade(ctx); err != nil {
		return nil, err
	}
	return rw.w.lock(ctx, wait, track)
}

func (rw *RWMutex) unlock(held context.Context) { rw.w.unlock(held) }

func (r *rlocker) lockTarget() (*zkconn.Session, string, error) {
	return (*RWMutex)(r).lockTarget()
}

func (r *rlocker) lock(ctx context.Context, wait, track bool) (context.Context, error) {
	return (*RWMutex)(r).rlock(ctx, wait, track, true)
}

func (r *rlocker) unlock(held context.Context) { (*RWMutex)(r).runlock(held) }

// RLocker returns a sync.Locker whose Lock and Unlock are rw's RLock and
// RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*rlocker)(rw) }

type rlocker RWMutex

func (r *rlocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }

// Token returns the fencing token of the write hold (see Mutex.Token), or
// of the newest read hold when rw is not locked for writing (a MultiLock's,
// through RLocker, when no other is left); 0 if rw is not held here. Read
// holds are held together, so fence by refusing lower tokens only where
// writers write.
func (rw *RWMutex) Token() int64 {
	if t := rw.w.Token(); t != 0 {
		return t
	}
	if hd := rw.newestRead(); hd != nil {
		return hd.fencingToken(rw.r.sess.SessionTimeout())
	}
	return 0
}

// Revoked returns Revoked(held) for rw's write hold, or else for its newest
// read hold (as Token picks it); nil if rw is not held here (see
// Mutex.Revoked).
func (rw *RWMutex) Revoked() <-chan struct{} {
	if ch := rw.w.Revoked(); ch != nil {
		return ch
	}
	if hd := rw.newestRead(); hd != nil {
		return hd.revoked
	}
	return nil
}

// newestRead returns the newest read hold taken by RLock or RLockContext,
// or else the newest of a MultiLock (RLocker), whose Token and Revoked are
// rw's (see MultiLock); nil if there is none.
func (rw *RWMutex) newestRead() *hold {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if n := len(rw.reads); n > 0 {
		return rw.reads[n-1]
	}
	if n := len(rw.members); n > 0 {
		return rw.members[n-1]
	}
	return nil
}

// Participants returns the readers' and writers' nodes at rw's path in queue
// order, Curator's included, each marked Reader or not; those that wait are
// marked Waiting: a writer not first, a reader behind a writer (other than
// the one it is a downgrade of, whose sequence number it carries: a write
// hold downgraded twice has two such readers).
func (rw *RWMutex) Participants(ctx context.Context) ([]Participant, error) {
	if rw.w.err != nil {
		return nil, rw.w.err
	}
	ps, err := rw.r.participants(ctx)
	if err != nil {
		return nil, err
	}
	writers, first := 0, 0 // first: the first writer's index
	for i := range ps {
		switch {
		case !ps[i].Reader:
			ps[i].Waiting = i > 0
			if writers++; writers == 1 {
				first = i
			}
		case writers > 1, writers == 1 && ps[first].Sequence != ps[i].Sequence:
			ps[i].Waiting = true
		}
	}
	return ps, nil
}
