package dsync

import (
	"context"
	"sync"

	"github.com/dsync-go/dsync/zkconn"
)

// A SemaphoreMutex is a mutual exclusion lock built on a one-lease Weighted:
// Curator's InterProcessSemaphoreMutex, in Go, sharing its layout (PATH/locks,
// PATH/leases), so Java processes using InterProcessSemaphoreMutex on the same
// path exclude it. Unlike Mutex it is never re-entrant: a second LockContext
// waits like any other, even with the hold context of the first.
//
// Within a process, goroutines using one SemaphoreMutex exclude each other
// from acquisition to Unlock, as with sync.Mutex, even after a hold is lost:
// a goroutine whose hold was lost is still inside until it calls Unlock, and
// that Unlock ends its own hold, never a later one.
//
// A hold can be lost as a Mutex hold can; see Mutex. A SemaphoreMutex must be
// made with NewSemaphoreMutex and must not be copied after first use.
type SemaphoreMutex struct {
	w         *Weighted
	gate      gate // held from acquisition to Unlock
	revocable bool // see Revocable

	mu   sync.Mutex
	hold *hold // the lease of the current hold
}

var _ sync.Locker = (*SemaphoreMutex)(nil)

// NewSemaphoreMutex returns a SemaphoreMutex at path. Nothing is sent to
// ZooKeeper until it is used; a nil sess or a bad path is reported by every
// call.
func NewSemaphoreMutex(sess *zkconn.Session, path string, opts ...Option) *SemaphoreMutex {
	o := newOptions(opts)
	w := NewWeighted(sess, path, 1, opts...)
	w.leases.data, w.revocable = o.nodeData(), o.revocable
	return &SemaphoreMutex{w: w, gate: newGate(), revocable: o.revocable}
}

// Lock locks m, blocking until it is available; like Mutex.Lock it cannot
// fail, and panics if the lock can never be had (closed Session, bad path).
//
// As with Mutex.Lock, nothing tells of a lost hold, so none is watched for
// (unless m is Revocable; see SemaphoreMutex.Revoked).
func (m *SemaphoreMutex) Lock() {
	if _, err := m.lock(context.Background(), true, false); err != nil {
		panic("dsync: Lock: " + err.Error()) // err names the path
	}
}

// TryLock locks m if no one holds it, without waiting, and reports whether
// it did.
func (m *SemaphoreMutex) TryLock() bool {
	if m.w.err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.w.lock.sess.SessionTimeout())
	defer cancel()
	_, err := m.lock(ctx, false, false)
	return err == nil
}

// LockContext locks m, blocking until it is held or ctx is done, and returns
// the hold context (see Mutex.LockContext, but without re-entrancy). On
// failure it returns ctx.Err() or the error that stopped it, leaving m
// unchanged and nothing behind.
func (m *SemaphoreMutex) LockContext(ctx context.Context) (context.Context, error) {
	return m.lock(ctx, true, true)
}

// lock takes m's gate, which it keeps until Unlock, then the lease (see
// Weighted.acquire, which takes the Weighted's own gate inside m's: only
// the holder of m's gate ever waits for it).
func (m *SemaphoreMutex) lock(ctx context.Context, wait, track bool) (context.Context, error) {
	if m.w.err != nil {
		return nil, m.w.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := m.gate.enter(ctx, wait); err != nil {
		return nil, err
	}
	ls, err := m.w.acquire(ctx, 1, wait, track)
	if err != nil {
		m.gate.leave(nil)
		return nil, err
	}
	hd := ls[0].hd // m owns the Lease: Unlock ends its hold once
	m.mu.Lock()
	m.hold = hd
	m.mu.Unlock()
	return hd.ctx, nil
}

// Unlock unlocks m; any goroutine may. It returns normally after a loss too
// (and deletes the lease node if it still exists), and lets the next
// goroutine of this process in. Like Mutex.Unlock it never waits on a slow
// network. Unlock of an unlocked SemaphoreMutex panics.
func (m *SemaphoreMutex) Unlock() { m.unlock(nil) }

// unlock is Unlock; given held, only for the hold whose context it is.
func (m *SemaphoreMutex) unlock(held context.Context) {
	m.mu.Lock()
	hd := m.hold
	if hd == nil || held != nil && hd.ctx != held {
		m.mu.Unlock()
		panic("dsync: unlock of unlocked mutex")
	}
	m.hold = nil
	m.mu.Unlock()
	sent, _ := hd.end()
	m.gate.leave(sent)
}

// Token returns the fencing token of the current hold (its lease node's
// czxid), or 0 if m is not held. After Lock or TryLock the first call asks
// ZooKeeper (bounded by the session timeout; 0 if it cannot), without
// keeping Unlock waiting meanwhile.
func (m *SemaphoreMutex) Token() int64 {
	m.mu.Lock()
	hd := m.hold
	m.mu.Unlock()
	if hd == nil {
		return 0
	}
	return hd.fencingToken(m.w.lock.sess.SessionTimeout())
}

// Participants returns the lease holders at m's path (at most one, but a
// Curator peer waiting for the lease shows too).
func (m *SemaphoreMutex) Participants(ctx context.Context) ([]Participant, error) {
	return m.w.Participants(ctx)
}
