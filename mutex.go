package dsync

import (
	"context"
	"errors"
	"sync"

	"github.com/dsync-go/dsync/zkconn"
)

// A Mutex is a mutual exclusion lock shared by every process that uses the
// same ZooKeeper path: Curator's InterProcessMutex, in Go. Go processes and
// Java processes using InterProcessMutex on one path exclude each other.
//
// Within a process, goroutines using one Mutex exclude each other as they
// would with a sync.Mutex: Lock is not re-entrant. LockContext is, when it is
// given back the context of the current hold.
//
// A hold can be lost — the ZooKeeper session suspended (under the default
// LossPolicy) or expired, or the node deleted by someone else — and then
// another process may take the lock. It is NOT safe to assume the lock is
// held until Unlock: watch the context LockContext returns, and pass Token to
// the resources the lock protects.
//
// A Mutex must be made with NewMutex and must not be copied after first use.
type Mutex struct {
	q         queue
	policy    LossPolicy
	revocable bool  // see Revocable
	err       error // bad input found by NewMutex
	gate      gate  // one goroutine of this process at a time
	// admit, if set, runs once a lock call holds the lock in ZooKeeper,
	// before the hold is handed out: the write side of an RWMutex waits
	// there for this process's read holds (see RWMutex.awaitNoReads). On
	// error the hold is given back, and lock takes the lock again after
	// errRetake, else returns the error.
	admit func(ctx context.Context, hd *hold, wait bool) error

	mu     sync.Mutex
	hold   *hold
	taking bool // admit runs: a hold is about to be handed out
}

// errRetake is admit's error for a hold lost before it was handed out.
var errRetake = errors.New("dsync: hold lost before it was handed out")

var _ sync.Locker = (*Mutex)(nil)

// NewMutex returns a Mutex on the lock path path, for the holders it creates
// as children (Curator's layout: _c_<uuid>-lock-<sequence>). Nothing is sent
// to ZooKeeper until the Mutex is used. A nil sess or a path ZooKeeper would
// reject is reported by every call (see ErrNilSession, ErrBadPath).
func NewMutex(sess *zkconn.Session, path string, opts ...Option) *Mutex {
	o := newOptions(opts)
	return &Mutex{
		q:         queue{sess: sess, path: path, marker: lockMarker, data: o.nodeData()},
		policy:    o.policy,
		revocable: o.revocable,
		err:       validate(sess, path),
		gate:      newGate(),
	}
}

// Lock locks m, blocking until the lock is available. Like sync.Mutex.Lock it
// cannot fail: it waits out disconnections and starts over on a new session
// if the old one is lost. It panics if the lock can never be had (the Session
// is closed, the path is bad, ZooKeeper refuses the node). Lock gives no way
// to learn that the hold was lost, so it does not watch for loss (which
// saves a request per hold): use LockContext to bound the wait, handle those
// errors, and learn when the hold is lost. (A Revocable Mutex does watch;
// see Mutex.Revoked.)
func (m *Mutex) Lock() {
	if _, err := m.lock(context.Background(), true, false); err != nil {
		panic("dsync: Lock: " + err.Error()) // err names the path
	}
}

// TryLock tries to lock m without waiting for other holders and reports
// whether it succeeded. It does talk to ZooKeeper (bounded by the session
// timeout), and reports false if that fails.
func (m *Mutex) TryLock() bool {
	if m.err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.q.sess.SessionTimeout())
	defer cancel()
	_, err := m.lock(ctx, false, false)
	return err == nil
}

// TryLockContext locks m if no one holds it, without waiting for other
// holders, and returns the hold context as LockContext does. If m is held
// (here or elsewhere) it returns ErrWouldBlock; ctx bounds the requests to
// ZooKeeper. It does not re-enter.
func (m *Mutex) TryLockContext(ctx context.Context) (context.Context, error) {
	return m.lock(ctx, false, true)
}

// LockContext locks m, blocking until the lock is held or ctx is done. On
// success it returns the hold context: it carries ctx's values (not its
// deadline or cancellation) and is canceled when the hold ends — by the last
// Unlock (cause context.Canceled) or by loss (cause wrapping ErrLockLost; see
// context.Cause). On failure it returns ctx.Err() or the error that stopped
// it, and leaves m unchanged and no node behind. A ctx already done fails
// before anything is sent.
// While it waits, a lost session, or its node deleted by someone else, puts
// it back in line, last, on the next session, within the same ctx: neither
// is an error.
//
// Given the hold context of m's current hold (or a context derived from it),
// LockContext re-enters: it counts one more level, which one more Unlock
// releases, and returns the same hold context. If that hold has ended, it
// returns the hold context's cause.
func (m *Mutex) LockContext(ctx context.Context) (context.Context, error) {
	if m.err != nil {
		return nil, m.err
	}
	if hd, ok := ctx.Value(holdKey{m}).(*hold); ok {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.hold != hd || hd.ctx.Err() != nil {
			return nil, context.Cause(hd.ctx) // before ctx.Err: ctx may be hd.ctx
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hd.count++
		return hd.ctx, nil
	}
	return m.lock(ctx, true, true)
}

// lock takes the gate, then a place in the queue (waiting for its turn if
// wait is set), and starts a hold, watched for loss if track is set.
func (m *Mutex) lock(ctx context.Context, wait, track bool) (context.Context, error) {
	if m.err != nil {
		return nil, m.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := m.gate.enter(ctx, wait); err != nil {
		return nil, err
	}
	var undoing []<-chan struct{} // deletes of nodes given up on the way
	// A revocable hold watches its node, after Lock and TryLock too.
	cfg := holdConfig{policy: m.policy, track: track || m.revocable, revocable: m.revocable}
	for {
		hd, err := m.q.take(ctx, m, wait, cfg, &undoing)
		if err == nil {
			if err = m.handOut(ctx, hd, wait); err == nil {
				return hd.ctx, nil
			}
			undoing = append(undoing, hd.abandon())
			if errors.Is(err, errRetake) {
				continue
			}
		}
		m.gate.leave(settled(undoing))
		return nil, err
	}
}

// handOut makes hd m's hold, once admit lets it.
func (m *Mutex) handOut(ctx context.Context, hd *hold, wait bool) error {
	var err error
	if m.admit != nil {
		m.mu.Lock()
		m.taking = true
		m.mu.Unlock()
		err = m.admit(ctx, hd, wait)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.taking = false
	if err == nil {
		m.hold = hd
	}
	return err
}

// Unlock releases one level of m's hold; the last level deletes the node,
// which lets the next waiter in. It returns normally after a loss too (and
// deletes the node if it still exists). As with sync.Mutex, any goroutine may
// unlock; Unlock of an unlocked Mutex panics.
//
// Unlock never waits for the network, as sync.Mutex.Unlock never blocks: the
// delete goes out at once (Unlock waits, 10ms at most, for it to be written
// to the connection: a write, not a round trip), and its reply is not
// awaited (zkconn.Handle.AwaitSent;
// it is retried in the background if the connection drops, and the
// Session's Close ends the session, which deletes the node too). Requests
// this process sends through the same Session later are applied after it,
// so a Lock here does not queue behind its own release (if the connection
// drops before the delete's reply, it is sent again, and a Lock meanwhile
// may wait for it; TryLock waits for it rather than fail); other processes
// see the release when it reaches them.
func (m *Mutex) Unlock() { m.unlock(nil) }

// unlock is Unlock; given held, only for the hold whose context it is.
func (m *Mutex) unlock(held context.Context) {
	m.mu.Lock()
	hd := m.hold
	if hd == nil || held != nil && hd.ctx != held {
		m.mu.Unlock()
		panic("dsync: unlock of unlocked mutex")
	}
	if hd.count--; hd.count > 0 {
		m.mu.Unlock()
		return
	}
	m.hold = nil
	// Canceled before m.mu is let go, so that a LockContext re-entering
	// with this hold's context sees it ended, with its cause.
	hd.cancel(context.Canceled)
	m.mu.Unlock()
	sent, _ := hd.end()
	m.gate.leave(sent)
}

// Token returns the fencing token of the current hold, or 0 if m is not
// held: the czxid of the lock node, which grows with every hold, across
// holders and sessions. A resource that remembers the highest token it has
// seen can refuse a holder that has lost the lock without knowing it.
//
// After Lock or TryLock, which do not watch the node, the first call asks
// ZooKeeper for the czxid (bounded by the session timeout; 0 if it cannot).
func (m *Mutex) Token() int64 {
	m.mu.Lock()
	hd := m.hold
	m.mu.Unlock()
	if hd == nil {
		return 0
	}
	return hd.fencingToken(m.q.sess.SessionTimeout())
}

// Participants returns the nodes queued on m's path: the holder first, then
// the waiters in the order they will acquire. It includes nodes made by other
// processes, Curator's InterProcessMutex and go-zookeeper's zk.Lock among
// them.
func (m *Mutex) Participants(ctx context.Context) ([]Participant, error) {
	if m.err != nil {
		return nil, m.err
	}
	return m.q.participants(ctx)
}
