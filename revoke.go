package dsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// revokeRequest is what a revocation request writes into a hold's node:
// Curator's Revoker.REVOKE_MESSAGE.
const revokeRequest = "__REVOKE__"

// ErrNotRevocable is wrapped by the error Revoke returns for a node whose
// data is neither empty nor a revocation request: not a revocable hold's
// (see Revocable), so nobody would act on the request. Nothing is written.
var ErrNotRevocable = errors.New("dsync: node not revocable")

// ErrNoNode is wrapped, with zk.ErrNoNode, by the error Revoke returns for a
// node that does not exist: its hold has ended, or there never was one.
var ErrNoNode = errors.New("dsync: no such node")

// Revoked returns a channel that is closed when a revocation of the hold
// whose context held is (or is derived from) is requested: when
// "__REVOKE__" is written into its node (Revoke, RevokeHolders, Curator's
// Revoker). A request written while the node still waited in line is seen
// as the hold starts: the channel is then closed before LockContext returns.
//
// The channel belongs to the hold: it is closed at most once, only on a
// request seen while the hold lasts, and never otherwise — not when the hold
// ends (select on held.Done() too). Revocation is cooperative: a request
// neither releases the lock nor cancels held; the holder decides when to
// Unlock.
//
// Revoked returns nil, a channel never closed, for a hold that is not
// revocable (see Revocable) and for a context that is not a hold context, as
// ctx.Done() does for a context that cannot be canceled, and for a
// MultiLock's hold context (ask its members). In a context derived from
// several hold contexts, the innermost hold counts.
func Revoked(held context.Context) <-chan struct{} {
	hd, _ := held.Value(anyHoldKey{}).(*hold)
	if hd == nil {
		return nil
	}
	return hd.revoked
}

// Revoked returns Revoked(held) for m's current hold, or nil if m is not
// held: the way to learn of a revocation request after Lock or TryLock,
// which return no hold context. A later hold has a channel of its own.
func (m *Mutex) Revoked() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hold == nil {
		return nil
	}
	return m.hold.revoked
}

// Revoked returns Revoked(held) for m's current hold, or nil if m is not
// held (see Mutex.Revoked).
func (m *SemaphoreMutex) Revoked() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hold == nil {
		return nil
	}
	return m.hold.revoked
}

// Revoke asks the holder of node (a Participant's Path) to release it, as
// Curator's Revoker.attemptRevoke does: it writes "__REVOKE__" into the node,
// which a revocable holder, dsync's (see Revoked) or Curator's, learns of.
// It only asks: the holder decides whether and when to release.
//
// Unlike Curator's Revoker, it writes only into a node whose data is empty
// or already a request, as a revocable hold's node is; for any other it
// returns an error wrapping ErrNotRevocable and writes nothing, so that it
// never overwrites the data of a node that is not revocable (which its
// holder would not act on anyway). The write is conditional on the version
// read, so a concurrent write makes it read again. A node whose data was
// made empty by WithData without Revocable is written to, and ignored by its
// holder.
//
// Revoke returns nil once the request is written (written again if one was
// there: a Curator holder told while it waited is told again). For a node
// that does not exist it returns an error wrapping ErrNoNode and
// zk.ErrNoNode: there is nobody to ask. A ctx already done fails before
// anything is sent; a ctx done on the way returns ctx.Err(), or, if the
// write was sent and its reply not read, an error wrapping both
// ErrOutcomeUnknown and ctx.Err(). A write whose reply a dropped connection
// lost is not guessed at: the node is read again after the reconnect.
func Revoke(ctx context.Context, sess *zkconn.Session, node string) error {
	if err := validateUpTo(sess, node, maxPath+maxName); err != nil {
		return err
	}
	return revoke(ctx, sess, node)
}

// revoke is Revoke for a node path known good: one a listing returned
// (RevokeHolders), which another client's longer node names may make
// longer than Revoke takes.
func revoke(ctx context.Context, sess *zkconn.Session, node string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		sent    bool  // a write of ours may have been applied…
		sentAt  int32 // …to the node at this version
		noNode  = fmt.Errorf("%w: %s: %w", ErrNoNode, node, zk.ErrNoNode)
		unknown = func(err error) error {
			if sent && !errors.Is(err, ErrOutcomeUnknown) {
				return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			}
			return err
		}
	)
	for {
		h, err := sess.Current(ctx)
		if err != nil {
			return unknown(err)
		}
		data, st, err := readNode(ctx, h, node)
		switch {
		case errors.Is(err, errNodeGone):
			return unknown(noNode) // after a write of ours, it may have been seen
		case errors.Is(err, zkconn.ErrSessionLost) && ctx.Err() == nil:
			continue // ask on the next session
		case err != nil:
			return unknown(err)
		case string(data) == revokeRequest && sent && st.Version > sentAt:
			return nil // ours, or another request written since
		case len(data) != 0 && string(data) != revokeRequest:
			return fmt.Errorf("%w: %s: its data is not empty", ErrNotRevocable, node)
		}
		err = h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Set(node, []byte(revokeRequest), st.Version)
			return err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrBadVersion):
			continue // written meanwhile: read it again
		case errors.Is(err, zk.ErrNoNode):
			return noNode
		case errors.Is(err, ErrOutcomeUnknown):
			if !sent {
				sent, sentAt = true, st.Version
			}
			if ctx.Err() != nil {
				return err
			}
			continue // the connection dropped, or the session ended: read again
		default:
			return unknown(err)
		}
	}
}

// RevokeHolders asks the current holders of the lock at path to release it
// (see Revoke), and returns those it asked. path is a Mutex's (Curator's
// InterProcessMutex layout: the holder is the first node in line) or a
// semaphore's (Weighted, SemaphoreMutex; Curator's InterProcessSemaphoreV2
// layout: the holders are the lease nodes that are not Waiting, see
// Weighted.Participants). Waiters are not asked.
//
// A holder that released before it was asked is left out; if every holder
// found did, the lock is read again, for whoever holds it now. A holder whose
// node is not revocable is not asked: the error then wraps ErrNotRevocable
// for each, alongside the holders that were asked. With nobody holding,
// RevokeHolders returns no Participant and a nil error. Any other failure
// stops it, with the holders asked so far; ctx is honoured as by Revoke. So
// does a holder found gone after a write whose reply was lost: it may have
// been asked before it released, and the error wraps ErrOutcomeUnknown and
// ErrNoNode (call again to ask whoever holds now).
func RevokeHolders(ctx context.Context, sess *zkconn.Session, path string) ([]Participant, error) {
	if err := validate(sess, path); err != nil {
		return nil, err
	}
	for {
		hs, err := holders(ctx, sess, path)
		if err != nil {
			return nil, withPath(path, err)
		}
		var (
			asked   []Participant
			refused []error
			gone    int
		)
		for _, p := range hs {
			switch err := revoke(ctx, sess, p.Path); {
			case err == nil:
				asked = append(asked, p)
			case errors.Is(err, ErrNoNode) && !errors.Is(err, ErrOutcomeUnknown):
				gone++ // released meanwhile: nothing to ask
			case errors.Is(err, ErrNotRevocable):
				refused = append(refused, err)
			default:
				return asked, err
			}
		}
		if gone == 0 || gone < len(hs) {
			return asked, errors.Join(refused...)
		}
	}
}

// holders returns the nodes that hold the lock at path now, in queue
// order. It is the one place that knows who holds which layout:
//   - a semaphore (PATH has a "leases" or "locks" child): the lease nodes
//     that are not Waiting (Weighted.Participants, with the smallest
//     maximum, which leaves out every lease that may still be waiting; the
//     real maximum is not known here);
//   - an RWMutex (a child carries __READ__ or __WRIT__): the writer first in
//     line, or else the readers ahead of the first writer;
//   - otherwise a mutex: the first node in line (lock- order).
func holders(ctx context.Context, sess *zkconn.Session, path string) ([]Participant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := sess.Current(ctx)
	if err != nil {
		return nil, err
	}
	var kids []string
	err = h.Do(ctx, func(c *zk.Conn) (err error) {
		kids, _, err = c.Children(path)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil
	case err != nil:
		return nil, err
	case slices.Contains(kids, "leases") || slices.Contains(kids, "locks"):
		ps, err := NewWeighted(sess, path, 1).Participants(ctx)
		return slices.DeleteFunc(ps, func(p Participant) bool { return p.Waiting }), err
	}
	if slices.ContainsFunc(kids, func(k string) bool {
		return strings.Contains(k, readMarker) || strings.Contains(k, writeMarker)
	}) {
		ps, err := NewRWMutex(sess, path).Participants(ctx)
		return slices.DeleteFunc(ps, func(p Participant) bool { return p.Waiting }), err
	}
	q := queue{sess: sess, path: path, marker: lockMarker}
	ps, err := q.first(ctx, 1)
	// Children that are not lock nodes (a path that is no lock) hold nothing.
	return slices.DeleteFunc(ps, func(p Participant) bool {
		_, _, ok := sequence(p.Node, lockMarker)
		return !ok
	}), err
}
