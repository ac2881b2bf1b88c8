package dsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/dsync-go/dsync/zkconn"
)

// A lockable is a lock a MultiLock can take as a member: a hold on one
// ZooKeeper path (for a SemaphoreMutex, the path it was made with).
//
// lockTarget returns the Session and path the lock queues at, and the
// error every call of the lock reports for bad input (nil Session, bad
// path), or nil. It sends nothing, never fails otherwise, and may be called
// at any time, by any goroutine.
//
// lock takes the lock as LockContext (wait set) or TryLockContext (wait
// unset) do, but never re-enters (whatever ctx carries), and returns the
// context of the new hold, canceled with a cause when the hold ends; with
// track unset the hold need not be watched for loss (as Lock and TryLock).
// Until unlock, the hold excludes the other goroutines of this process
// as the lock's own Lock would (its gate). On failure it returns ctx.Err(),
// ErrWouldBlock (bare or wrapped) or the error that stopped it, leaving the
// lock unchanged and no node behind.
//
// unlock releases exactly the hold whose context lock returned, as
// Unlock does (never waiting on a slow network), whether or not the hold
// was lost. It panics with a "dsync: unlock of unlocked" message, changing
// nothing, if that hold is no longer held (its Unlock was called behind the
// MultiLock's back); it must never release another hold.
type lockable interface {
	lockTarget() (sess *zkconn.Session, path string, err error)
	lock(ctx context.Context, wait, track bool) (context.Context, error)
	unlock(held context.Context)
}

var (
	_ lockable = (*Mutex)(nil)
	_ lockable = (*SemaphoreMutex)(nil)
	_ lockable = (*RWMutex)(nil)
	_ lockable = (*rlocker)(nil)
)

// A MultiLock holds several locks as one, all or none: Curator's
// InterProcessMultiLock, in Go, but free of deadlock. Its members may be any
// mix of *Mutex, *SemaphoreMutex, *RWMutex (its write side) and the
// RLocker of an RWMutex (its read side), on any Sessions.
//
// A MultiLock takes its members in a canonical order, whatever order they
// were given in: by path, in byte order. Two MultiLocks over the same paths
// therefore never deadlock, nor do MultiLocks over overlapping sets of paths:
// whoever waits for a path holds only paths that sort before it. It releases
// them in the reverse order.
//
// Curator's InterProcessMultiLock takes its locks in the order it is given.
// To share paths with Java processes, give it the paths sorted (Java's
// Collections.sort, String.compareTo): that is the order dsync uses. Java
// compares strings by UTF-16 code units and Go by UTF-8 bytes; the two orders
// agree on every path dsync accepts, because zkconn.ValidatePath refuses the
// characters outside the Basic Multilingual Plane (surrogate pairs in
// UTF-16), and without them both orders are code point order. Given any other
// order, a Java MultiLock and a dsync MultiLock (or two Java ones) can
// deadlock, each holding a path the other waits for.
//
// Within a process, goroutines using one MultiLock exclude each other, as
// with sync.Mutex, whatever its members (readers alone share); and a member
// held by a MultiLock is held as its own Lock would hold it, so its Lock,
// and every other MultiLock with that member, waits. A MultiLock never
// re-enters a member, nor itself, even given a hold context of that member.
//
// A hold is lost when any member's hold is; see Mutex. It is NOT safe to
// assume the locks are held until Unlock: watch the context LockContext
// returns. Each member's Token gives its fencing token while the MultiLock
// holds it.
//
// A MultiLock must be made with NewMultiLock and must not be copied after
// first use.
type MultiLock struct {
	members []lockable // in the order they are taken: by path
	paths   []string   // members' paths
	err     error      // bad input found by NewMultiLock

	gate gate // one goroutine of this process at a time, until Unlock

	mu  sync.Mutex
	cur *multiHold
}

var _ sync.Locker = (*MultiLock)(nil)

// A multiHold is a MultiLock's hold: its members' holds, and a context that
// ends with the first of them.
type multiHold struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	helds  []context.Context // the members' hold contexts, in members' order
	stops  []func() bool     // the context.AfterFuncs on helds
	fired  sync.WaitGroup    // the AfterFuncs that ran or run
}

// NewMultiLock returns a MultiLock of locks, each a *Mutex, a
// *SemaphoreMutex, an *RWMutex (its write side) or an RWMutex's RLocker (its
// read side). Nothing is sent to ZooKeeper until it is used. Bad input is
// reported by every call before anything is sent (and Lock panics with it):
// no locks, a nil one, a sync.Locker that is not one of these, or two on the
// same path (all wrapping ErrBadMember), and a member's own bad input
// (ErrNilSession, ErrBadPath).
func NewMultiLock(locks ...sync.Locker) *MultiLock {
	ml := &MultiLock{gate: newGate()}
	if len(locks) == 0 {
		ml.err = fmt.Errorf("%w: no locks", ErrBadMember)
		return ml
	}
	type member struct {
		l    lockable
		path string
	}
	ms := make([]member, len(locks))
	for i, l := range locks {
		if l == nil {
			ml.err = fmt.Errorf("%w: lock %d is nil", ErrBadMember, i)
			return ml
		}
		lk, ok := l.(lockable)
		if !ok {
			ml.err = fmt.Errorf("%w: lock %d is a %T, not one of dsync's locks", ErrBadMember, i, l)
			return ml
		}
		if v := reflect.ValueOf(l); v.Kind() == reflect.Pointer && v.IsNil() {
			ml.err = fmt.Errorf("%w: lock %d is a nil %T", ErrBadMember, i, l)
			return ml
		}
		_, path, err := lk.lockTarget()
		if err != nil {
			ml.err = err
			return ml
		}
		ms[i] = member{lk, path}
	}
	slices.SortStableFunc(ms, func(a, b member) int { return cmp.Compare(a.path, b.path) })
	for i := 1; i < len(ms); i++ {
		if ms[i].path == ms[i-1].path {
			ml.err = fmt.Errorf("%w: two locks on %s", ErrBadMember, ms[i].path)
			return ml
		}
	}
	for _, m := range ms {
		ml.members = append(ml.members, m.l)
		ml.paths = append(ml.paths, m.path)
	}
	return ml
}

// check returns the bad input every call reports; a zero MultiLock has no
// locks.
func (ml *MultiLock) check() error {
	if ml.err == nil && len(ml.members) == 0 {
		return fmt.Errorf("%w: no locks", ErrBadMember)
	}
	return ml.err
}

// Lock locks every member, blocking until it holds them all. Like
// Mutex.Lock it cannot fail: it waits out disconnections and starts over on
// a new session if one is lost. It panics if the locks can never be had (bad
// input, a closed Session, ZooKeeper refusing a node), having released what
// it took. It watches the members while it takes them (one lost meanwhile is
// not handed out: all are taken again), but gives no way to learn of a loss
// after it returns: use LockContext to bound the wait, handle errors, and
// learn when the hold is lost.
func (ml *MultiLock) Lock() {
	if _, err := ml.lock(context.Background(), true); err != nil {
		panic("dsync: Lock: " + err.Error())
	}
}

// TryLock locks every member if none is held by others, without waiting for
// them, and reports whether it did; if not, it holds none. It does talk to
// ZooKeeper (bounded by the longest session timeout of the members'
// Sessions), and reports false if that fails.
func (ml *MultiLock) TryLock() bool {
	if ml.check() != nil {
		return false
	}
	var timeout time.Duration
	for _, m := range ml.members {
		sess, _, _ := m.lockTarget()
		timeout = max(timeout, sess.SessionTimeout())
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := ml.lock(ctx, false)
	return err == nil
}

// LockContext locks every member, blocking until it holds them all or ctx
// is done. On success it returns the hold context: it carries ctx's values
// (not its deadline or cancellation) and is canceled when the hold ends — by
// Unlock (cause context.Canceled) or by the loss of any member's hold (cause
// that member's: wrapping ErrLockLost and naming its node; see
// context.Cause). On failure it returns ctx.Err() or the error that stopped
// it, having released the members it took, in reverse order, so that it
// leaves ml unchanged and no node behind. A ctx already done, or bad input,
// fails before anything is sent.
//
// A member whose hold is lost before the MultiLock holds them all is not
// handed out: LockContext releases every member and starts again.
func (ml *MultiLock) LockContext(ctx context.Context) (context.Context, error) {
	return ml.lock(ctx, true)
}

// TryLockContext locks every member if none is held by others (here or
// elsewhere), without waiting for them, and returns the hold context as
// LockContext does. If one is held, it releases those it took and returns
// an error wrapping ErrWouldBlock that names the held path; if ml itself is
// held in this process, it returns ErrWouldBlock before anything is sent.
// ctx bounds the requests to ZooKeeper.
func (ml *MultiLock) TryLockContext(ctx context.Context) (context.Context, error) {
	return ml.lock(ctx, false)
}

// lock takes the gate, then the members in order (waiting for each if wait
// is set), and starts the hold; on failure it gives back what it took.
func (ml *MultiLock) lock(ctx context.Context, wait bool) (context.Context, error) {
	if err := ml.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ml.gate.enter(ctx, wait); err != nil {
		return nil, err
	}
	for {
		helds := make([]context.Context, 0, len(ml.members))
		for i, m := range ml.members {
			// Watched whatever track says: a member lost while the
			// others are taken must not be handed out.
			held, err := m.lock(ctx, wait, true)
			if err != nil {
				func() {
					defer ml.gate.leave(nil) // even if a member panics
					release(ml.members, helds)
				}()
				switch {
				case ctx.Err() != nil:
					return nil, ctx.Err()
				case errors.Is(err, ErrWouldBlock):
					return nil, fmt.Errorf("%w: %s", ErrWouldBlock, ml.paths[i])
				}
				return nil, err
			}
			helds = append(helds, held)
		}
		if !slices.ContainsFunc(helds, func(h context.Context) bool { return h.Err() != nil }) {
			mh := newMultiHold(ctx, helds)
			ml.mu.Lock()
			ml.cur = mh
			ml.mu.Unlock()
			return mh.ctx, nil
		}
		// A member's hold was lost while later ones were taken (the
		// connection dropped, its node was deleted): start again, in order,
		// rather than take that one again out of order.
		func() {
			defer func() {
				if r := recover(); r != nil {
					ml.gate.leave(nil) // a member panicked: give the gate back
					panic(r)
				}
			}()
			release(ml.members, helds)
		}()
	}
}

// newMultiHold returns the hold of the members' holds helds: its context,
// with parent's values, ends when any of theirs does, with its cause.
func newMultiHold(parent context.Context, helds []context.Context) *multiHold {
	mh := &multiHold{helds: helds}
	// Not the hold of an outer lock parent may carry: a MultiLock hold is
	// not one hold (see Revoked; its members' Revoked tell of theirs).
	parent = context.WithValue(context.WithoutCancel(parent), anyHoldKey{}, (*hold)(nil))
	mh.ctx, mh.cancel = context.WithCancelCause(parent)
	for _, held := range helds {
		mh.fired.Add(1)
		mh.stops = append(mh.stops, context.AfterFunc(held, func() {
			defer mh.fired.Done()
			mh.cancel(context.Cause(held))
		}))
	}
	return mh
}

// Unlock releases every member, in the reverse order of Lock. It returns
// normally after a loss too (and deletes the nodes that still exist). As
// with sync.Mutex, any goroutine may unlock; Unlock of an unlocked MultiLock
// panics. The hold context is canceled before any member is released. Like
// Mutex.Unlock, it never waits on a slow or silent network.
func (ml *MultiLock) Unlock() {
	ml.mu.Lock()
	mh := ml.cur
	if mh == nil {
		ml.mu.Unlock()
		panic("dsync: unlock of unlocked multilock")
	}
	ml.cur = nil
	mh.cancel(context.Canceled)
	ml.mu.Unlock()
	for _, stop := range mh.stops {
		if stop() {
			mh.fired.Done() // will not run
		}
	}
	mh.fired.Wait()
	defer ml.gate.leave(nil)
	release(ml.members, mh.helds)
}

// release releases the holds helds of the first len(helds) members, last
// first. A member that panics (its hold was released behind the MultiLock's
// back) does not keep the others held: the first panic is raised again
// once all are released.
func release(members []lockable, helds []context.Context) {
	var (
		panicked bool
		first    any
	)
	for i := len(helds) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if r := recover(); r != nil && !panicked {
					panicked, first = true, r
				}
			}()
			members[i].unlock(helds[i])
		}()
	}
	if panicked {
		panic(first)
	}
}

// Mutex as a MultiLock member.

func (m *Mutex) lockTarget() (*zkconn.Session, string, error) { return m.q.sess, m.q.path, m.err }

// SemaphoreMutex as a MultiLock member.

func (m *SemaphoreMutex) lockTarget() (*zkconn.Session, string, error) {
	return m.w.lock.sess, m.path(), m.w.err
}

// path returns the path m was made with (its Weighted's internal Mutex is
// at path/locks).
func (m *SemaphoreMutex) path() string {
	p := m.w.lock.path
	return p[:len(p)-len("/locks")]
}
