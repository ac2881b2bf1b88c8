package dsync

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// latchMarker precedes the sequence number in an election node's name
// (_c_<uuid>-latch-0000000042), as in Curator's LeaderLatch.
const latchMarker = "latch-"

// An Election elects one leader among the participants that campaign on the
// same ZooKeeper path: Curator's LeaderLatch in Go, in its layout (children
// _c_<uuid>-latch-<sequence>, data = the participant's id), so that Go and
// Java processes campaign together. With SelectorLayout it takes Curator
// LeaderSelector's layout instead. The leader is the first node in line;
// the others wait in line, each watching only the node ahead of it, so a
// change of leader wakes one participant.
//
// Its names follow etcd's concurrency.Election (Campaign, Resign, Leader,
// Observe, Key; Token for Rev); its shapes follow dsync's locks: Campaign
// returns the leadership context, Leader a Participant, and Observe is an
// iterator rather than a channel. Leadership can be lost as a Mutex hold can (the session
// suspended, under the default LossPolicy, or expired; the node deleted by
// someone else): it is NOT safe to assume leadership lasts until Resign.
// Watch the context Campaign returns, and pass Token to the resources the
// leader writes to.
//
// One Election is one participant: a Campaign while another Campaign of the
// same Election waits or leads waits for that one to end with Resign, as
// Mutex.Lock waits for Unlock. There is no Proclaim: a participant's id is
// fixed for its campaign, as a LeaderLatch's is (Curator's latch stops
// watching a node ahead of it that is written to, so a write would strand
// the Java participant behind it).
//
// An Election must be made with NewElection and must not be copied after
// first use.
type Election struct {
	q      queue
	policy LossPolicy
	err    error // bad input found by NewElection
	gate   gate  // held from Campaign to Resign

	mu   sync.Mutex
	hold *hold
}

// NewElection returns an Election on path. Nothing is sent to ZooKeeper
// until it is used; a nil sess or a bad path is reported by every call.
// WithLossPolicy and SelectorLayout apply; WithData and Revocable do not
// (a participant's node carries its id).
func NewElection(sess *zkconn.Session, path string, opts ...Option) *Election {
	o := newOptions(opts)
	marker := latchMarker
	if o.selector {
		marker = lockMarker
	}
	return &Election{
		q:      queue{sess: sess, path: path, marker: marker},
		policy: o.policy,
		err:    validate(sess, path),
		gate:   newGate(),
	}
}

// ErrNoLeader is returned by Election.Leader when no one campaigns.
var ErrNoLeader = errors.New("dsync: election has no leader")

// Campaign puts this participant, named id, in line for leadership and
// blocks until it leads or ctx is done. On success it returns the leadership
// context: it carries ctx's values (not its deadline or cancellation) and is
// canceled when leadership ends — by Resign (cause context.Canceled) or by
// loss (cause wrapping ErrLockLost; see context.Cause). After a loss, call
// Resign: the node stays in line, first, until Resign deletes it or the
// session ends. On failure Campaign returns ctx.Err() or the error that
// stopped it, and leaves the Election unchanged and no node behind. A ctx
// already done fails before anything is sent. While it waits, a lost
// session, or its node deleted by someone else, puts it back in line, last,
// on the next session, within the same ctx: neither is an error.
func (e *Election) Campaign(ctx context.Context, id string) (context.Context, error) {
	if e.err != nil {
		return nil, e.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.gate.enter(ctx, true); err != nil {
		return nil, err
	}
	q := e.q
	q.data = []byte(id)
	var undoing []<-chan struct{} // deletes of nodes given up on the way
	hd, err := q.take(ctx, e, true, holdConfig{policy: e.policy, track: true}, &undoing)
	if err != nil {
		e.gate.leave(settled(undoing))
		return nil, err
	}
	e.mu.Lock()
	e.hold = hd
	e.mu.Unlock()
	return hd.ctx, nil
}

// Resign ends this participant's leadership, or its lost leadership (see
// Campaign), and lets the next participant lead. It returns nil at once if
// the Election does not lead.
//
// Like Unlock, Resign always resigns: the leadership context is canceled
// and the node's delete is sent (and retried in the background if the
// connection drops) whatever ctx says. ctx bounds only the wait for
// ZooKeeper to apply the delete: Resign returns nil once it has, so that
// another participant may lead from then on, or ctx.Err() if ctx is done
// first (a ctx done already makes Resign return at once, as Unlock does).
// It also returns nil once the session is lost or the Session closed: the
// node then goes with the session, which the server may end a little later
// (at its expiry); no participant leads before it has gone.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	hd := e.hold
	if hd == nil {
		e.mu.Unlock()
		return nil
	}
	e.hold = nil
	hd.cancel(context.Canceled)
	e.mu.Unlock()
	sent, settled := hd.end()
	e.gate.leave(sent)
	select {
	case <-settled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Key returns the full path of this participant's node while it leads (or
// has lost leadership without resigning), and "" otherwise.
func (e *Election) Key() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold == nil {
		return ""
	}
	return e.hold.node
}

// Token returns the fencing token of this participant's leadership (etcd's
// Rev): the czxid of its node, which grows with every leadership term,
// across participants and sessions; 0 if it does not lead. A term that was
// lost keeps its token until Resign, as Key keeps its path.
func (e *Election) Token() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold == nil {
		return 0
	}
	return e.hold.token.Load() // a Campaign learns it
}

// Leader returns the current leader: the first node in line, whoever made
// it (a Curator LeaderLatch, or LeaderSelector with SelectorLayout, too).
// Its Data is the leader's id, and its Session the leader's ZooKeeper
// session, live when it was read: ZooKeeper deletes an ephemeral node with
// its session. With no participant it returns ErrNoLeader.
//
// Leader reads from the server the session is connected to, which may lag
// behind the ensemble's leader (one round trip, no sync, unlike Value.Get):
// a leader that has just resigned through another server may still be
// returned. Only a Campaign that returns makes its caller the leader.
func (e *Election) Leader(ctx context.Context) (Participant, error) {
	if e.err != nil {
		return Participant{}, e.err
	}
	ps, err := e.q.first(ctx, 1)
	switch {
	case err != nil:
		return Participant{}, withPath(e.q.path, err)
	case len(ps) == 0:
		return Participant{}, ErrNoLeader
	}
	return ps[0], nil
}

// Participants returns the participants in line: the leader first, then the
// others in the order they will lead. Each one's Data is its id. Like
// Leader, it reads without a sync.
func (e *Election) Participants(ctx context.Context) ([]Participant, error) {
	if e.err != nil {
		return nil, e.err
	}
	return e.q.participants(ctx)
}

// Observe returns an iterator over the election's leaders: it yields the
// leader as Observe starts (once there is one), then every new leader, and
// the leader again if its node's data changes. Leaders that are Curator
// processes count too. It runs in the caller's goroutine and starts no
// goroutine of its own (the Session runs each request it sends). It keeps
// one ZooKeeper watch: on the leader's node, or on the path's children while
// no one campaigns (and for a while two, when a participant arrives just as
// that watch is set), or on the path itself while it does not exist. The
// loops of one Session share these watches: loops that end leave at most
// one behind, until it fires (a change of leader). For a single reading,
// Leader sets none.
//
// Observe rides out trouble as Value.Watch does: it waits while the
// connection is down, goes on with the next session if one is lost (yielding
// the leader only if it changed meanwhile), and yields other errors of
// ZooKeeper, retrying after a pause that grows to 10s. It ends without an
// error when ctx is done or the loop breaks, and after yielding an error
// only when the Session is closed (wrapping ErrClosed) or the Election was
// made with bad input.
func (e *Election) Observe(ctx context.Context) iter.Seq2[Participant, error] {
	return func(yield func(Participant, error) bool) {
		if e.err != nil {
			yield(Participant{}, e.err)
			return
		}
		var (
			last  Participant
			pause time.Duration
			head  *zkconn.Watch // the last read, stopped once done with
		)
		defer func() { head.Stop() }() // a panic in yield included
		for ctx.Err() == nil {
			h, err := e.q.sess.Current(ctx)
			if err != nil {
				if ctx.Err() == nil {
					yield(Participant{}, withPath(e.q.path, err))
				}
				return
			}
			var p Participant
			p, head, err = e.q.watchHead(ctx, h)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, zkconn.ErrClosed):
				yield(Participant{}, withPath(e.q.path, err))
				return
			case errors.Is(err, zkconn.ErrSessionLost):
				continue
			case err != nil:
				if !yield(Participant{}, withPath(e.q.path, err)) {
					return
				}
				pause = min(max(2*pause, 100*time.Millisecond), 10*time.Second)
				if !pauseOrDone(ctx, pause) {
					return
				}
				continue
			}
			pause = 0
			if p.Path != "" && (p.Path != last.Path || !bytes.Equal(p.Data, last.Data)) {
				last = p
				if !yield(p, nil) {
					return
				}
			}
			_, err = h.Wait(ctx, head.C())
			head.Stop() // fired, or no longer wanted
			if errors.Is(err, zkconn.ErrClosed) && ctx.Err() == nil {
				yield(Participant{}, withPath(e.q.path, err))
				return
			}
		}
	}
}

// watchHead returns the first node in q and head, a Watch that fires when
// it changes: a getData Watch on that node, which fires when the node
// leaves or is written to. With no node in q it returns no participant
// (Path "") and head on the path's children, or, if the path does not
// exist, on the path, which fires when one arrives. The caller stops head
// once done with it (nil on error). If a node arrives between the listing
// and that watch, it lists again.
func (q *queue) watchHead(ctx context.Context, h zkconn.Handle) (_ Participant, head *zkconn.Watch, _ error) {
	for {
		var children []string
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			children, _, err = c.Children(q.path)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return Participant{}, nil, err
		}
		if len(children) > 0 {
			p, w, err := describe(ctx, h, q.path, q.head(children), true)
			if errors.Is(err, zk.ErrNoNode) {
				continue // gone meanwhile: the next is first
			}
			return p, w, err
		}
		if err == nil { // the path is there, with no one in it
			children, _, w, err := h.ChildrenW(ctx, q.path)
			switch {
			case err == nil && len(children) == 0:
				return Participant{}, w, nil
			case err == nil:
				w.Stop() // go-zookeeper keeps the watch until the children change
				continue
			case !errors.Is(err, zk.ErrNoNode):
				return Participant{}, nil, err
			}
		}
		// No path: wait for it to be made.
		there, w, err := h.CreatedW(ctx, q.path)
		if err != nil || !there {
			return Participant{}, w, err
		}
	}
}

// SelectorLayout makes an Election take Curator LeaderSelector's layout
// instead of LeaderLatch's: an InterProcessMutex at the path (children
// _c_<uuid>-lock-<sequence>, data = the participant's id), so that it
// campaigns with LeaderSelector processes (the Election is then a Mutex at
// that path whose node carries the id). The two layouts must never share
// a path: each orders only its own nodes, so a participant of one would
// not wait for a leader of the other. Other primitives ignore it.
func SelectorLayout() Option {
	return optionFunc(func(o *options) { o.selector = true })
}
