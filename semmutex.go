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
// A hold can be lost as a Mutex hold can; see Mutex. A SemaphoreMutex must be
// made with NewSemaphoreMutex and must not be copied after first use.
type SemaphoreMutex struct {
	w *Weighted

	mu    sync.Mutex
	lease *Lease
}

var _ sync.Locker = (*SemaphoreMutex)(nil)

// NewSemaphoreMutex returns a SemaphoreMutex at path. Nothing is sent to
// ZooKeeper until it is used; a nil sess or a bad path is reported by every
// call.
func NewSemaphoreMutex(sess *zkconn.Session, path string, opts ...Option) *SemaphoreMutex {
	return &SemaphoreMutex{w: NewWeighted(sess, path, 1, opts...)}
}

// Lock locks m, blocking until it is available; like Mutex.Lock it cannot
// fail, and panics if the lock can never be had (closed Session, bad path).
//
// As with Mutex.Lock, nothing tells of a lost hold, so none is watched for.
func (m *SemaphoreMutex) Lock() {
	ls, err := m.w.acquire(context.Background(), 1, true, false)
	if err != nil {
		panic("dsync: Lock: " + err.Error()) // err names the path
	}
	m.start(ls[0])
}

// TryLock locks m if no one holds it, without waiting, and reports whether
// it did.
func (m *SemaphoreMutex) TryLock() bool {
	if m.w.err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.w.lock.sess.SessionTimeout())
	defer cancel()
	ls, err := m.w.acquire(ctx, 1, false, false)
	if err != nil {
		return false
	}
	m.start(ls[0])
	return true
}

// LockContext locks m, blocking until it is held or ctx is done, and returns
// the hold context (see Mutex.LockContext, but without re-entrancy). On
// failure it returns ctx.Err() or the error that stopped it, leaving m
// unchanged and nothing behind.
func (m *SemaphoreMutex) LockContext(ctx context.Context) (context.Context, error) {
	ls, err := m.w.AcquireLeases(ctx, 1)
	if err != nil {
		return nil, err
	}
	return m.start(ls[0]), nil
}

func (m *SemaphoreMutex) start(l *Lease) context.Context {
	m.mu.Lock()
	m.lease = l
	m.mu.Unlock()
	return l.Context()
}

// Unlock unlocks m; any goroutine may. Unlock of an unlocked SemaphoreMutex
// panics.
func (m *SemaphoreMutex) Unlock() {
	m.mu.Lock()
	l := m.lease
	m.lease = nil
	m.mu.Unlock()
	if l == nil {
		panic("dsync: unlock of unlocked mutex")
	}
	l.Release()
}

// Token returns the fencing token of the current hold (its lease node's
// czxid), or 0 if m is not held.
func (m *SemaphoreMutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return 0
	}
	return m.lease.Token()
}

// Participants returns the lease holders at m's path (at most one, but a
// Curator peer waiting for the lease shows too).
func (m *SemaphoreMutex) Participants(ctx context.Context) ([]Participant, error) {
	return m.w.Participants(ctx)
}
