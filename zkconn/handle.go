package zkconn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// A Handle ties work to one ZooKeeper session of a Session: the session that
// was live when Current returned it. Nodes created through a Handle belong to
// that session and die with it; a hold should be given up when Lost (or, under
// the stricter policy, Suspended) closes.
//
// A Handle is a small value, safe to copy and to use from many goroutines.
// The zero Handle is not usable.
type Handle struct {
	s    *Session
	gen  *generation
	link latch
}

// Session returns the Session h belongs to.
func (h Handle) Session() *Session { return h.s }

// ID returns the ZooKeeper session id: the ephemeralOwner of the nodes
// created through h.
func (h Handle) ID() int64 { return h.gen.id }

// Conn returns the *zk.Conn of h's session, for requests the helpers here do
// not cover. Its errors are go-zookeeper's; Do adds retries and error mapping.
func (h Handle) Conn() *zk.Conn { return h.gen.c.conn }

// Lost returns a channel that is closed when h's ZooKeeper session is lost
// (expired, given up shortly before the server could expire it, or the
// Session closed). It is never closed otherwise, and is owned by the
// Session.
func (h Handle) Lost() <-chan struct{} { return h.gen.lost.done() }

// Suspended returns a channel that is closed when the connection that was up
// when h was made drops (or h's session is lost). From then on, until the
// connection is back, nothing proves that h's ephemeral nodes still exist.
// It is owned by the Session.
func (h Handle) Suspended() <-chan struct{} { return h.link.done() }

// AfterLost runs f on a goroutine of its own once Lost closes (at once if
// it has), unless stop is called first; stop reports whether it stopped f.
// Until then nothing runs: no goroutine waits for the loss.
func (h Handle) AfterLost(f func()) (stop func() bool) { return h.gen.lost.after(f) }

// AfterSuspended is AfterLost for Suspended.
func (h Handle) AfterSuspended(f func()) (stop func() bool) { return h.link.after(f) }

// Refresh returns h with Suspended tracking the connection that is up now:
// a holder that waited through a suspension and a reconnect of the same
// session calls it when its wait ends. If no connection is up (or h's
// session is lost), the returned Handle's Suspended channel is closed.
func (h Handle) Refresh() Handle {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == h.gen && s.state.connected() {
		h.link = s.link
	} else {
		h.link = closedLatch
	}
	return h
}

// Err returns nil while h's session is alive, else why it is not: an error
// wrapping ErrSessionLost or ErrClosed.
func (h Handle) Err() error {
	select {
	case <-h.gen.lost.done():
		return h.gen.cause
	default:
		return nil
	}
}

// ready blocks until h's session has a connection up, and returns the
// channel that closes when that connection drops. On failure it returns
// ctx.Err() or h.Err().
func (h Handle) ready(ctx context.Context) (<-chan struct{}, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s := h.s
		s.mu.Lock()
		if err := h.Err(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if s.state.connected() {
			link := s.link.done()
			s.mu.Unlock()
			return link, nil
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		case <-h.gen.lost.done():
		}
	}
}

// Do runs op with h's connection, retrying it after a reconnect each time it
// fails only because the connection dropped. It is for requests that are safe
// to repeat (reads, deletes, versioned writes). It returns op's error, or
// ctx.Err(), or an error wrapping ErrSessionLost or ErrClosed when h's session
// ends; go-zookeeper's session errors are wrapped, so errors.Is matches both.
//
// Do returns as soon as ctx is done or h's session is lost, even while op is
// in flight: op then finishes on a goroutine the Session owns (Close waits
// for it), and whatever it did stands.
func (h Handle) Do(ctx context.Context, op func(*zk.Conn) error) error {
	for {
		link, err := h.ready(ctx)
		if err != nil {
			return err
		}
		err = h.call(ctx, op)
		if !transient(err) {
			return h.sessionError(err)
		}
		// The connection is going down; wait until the Session says so, so
		// the next attempt waits for the reconnect.
		select {
		case <-link:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.gen.lost.done():
			return h.gen.cause
		}
	}
}

// DoOnce runs op with h's connection once, for a request that must not be
// repeated (a plain write, say), after waiting for a connection as Do does.
// It returns op's error (mapped as Do maps it), or ctx.Err() or h.Err() if op
// was never sent. If the connection drops, ctx is done or h's session is lost
// while op is in flight, op may or may not have been applied: the error then
// wraps ErrUnknownOutcome and the cause, so errors.Is matches both.
func (h Handle) DoOnce(ctx context.Context, op func(*zk.Conn) error) error {
	if _, err := h.ready(ctx); err != nil {
		return err
	}
	err := h.call(ctx, op)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotSent):
		return ErrClosed
	case transient(err), ctx.Err() != nil && errors.Is(err, ctx.Err()), errors.Is(err, ErrSessionLost), errors.Is(err, ErrClosed),
		// go-zookeeper fails requests it has sent with this too, when
		// its client is closed.
		errors.Is(err, zk.ErrClosing):
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, h.sessionError(err))
	}
	return h.sessionError(err)
}

// call runs op, returning early with ctx.Err() or h's cause if ctx is done or
// h's session is lost first (op then finishes on a goroutine the Session
// owns). A ctx that can never be done runs op inline.
func (h Handle) call(ctx context.Context, op func(*zk.Conn) error) error {
	return h.callOr(ctx, op, nil)
}

// errNotSent is callOr's error when the Session was closed before op was
// sent: it wraps ErrClosed, and tells DoOnce that the outcome is known.
var errNotSent = fmt.Errorf("%w", ErrClosed)

// callOr is call, with abandoned run on op's goroutine, given op's error, if
// the caller returned before op did: it undoes what op may have done.
// Exactly one of the two takes op's outcome.
func (h Handle) callOr(ctx context.Context, op func(*zk.Conn) error, abandoned func(error)) error {
	conn := h.Conn()
	if ctx.Done() == nil {
		if h.s.isClosing() {
			return errNotSent
		}
		return op(conn)
	}
	s := h.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errNotSent
	}
	s.bg.Add(1)
	s.mu.Unlock()
	const (
		pending = iota
		taken   // the caller takes op's error from res
		left    // the caller returned early; abandoned takes it
	)
	var state atomic.Int32
	res := make(chan error, 1)
	go func() {
		defer s.bg.Done()
		err := op(conn)
		if state.CompareAndSwap(pending, taken) {
			res <- err
		} else if abandoned != nil {
			abandoned(err)
		}
	}()
	var early error
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		early = ctx.Err()
	case <-h.gen.lost.done():
		early = h.gen.cause
	}
	if state.CompareAndSwap(pending, left) {
		return early
	}
	return <-res
}

// Wait blocks until watch (a one-shot channel from a go-zookeeper *W call on
// h's connection) fires, ctx is done, or h's session is lost: the one select
// a waiter needs. A watch survives a suspension (the client sets it again on
// reconnect). It returns the event, or ctx.Err(), or an error wrapping
// ErrSessionLost or ErrClosed.
func (h Handle) Wait(ctx context.Context, watch <-chan zk.Event) (zk.Event, error) {
	select {
	case ev := <-watch:
		if ev.Type == zk.EventNotWatching {
			if err := h.Err(); err != nil {
				return ev, err
			}
			return ev, h.sessionError(ev.Err)
		}
		return ev, nil
	case <-ctx.Done():
		return zk.Event{}, ctx.Err()
	case <-h.gen.lost.done():
		return zk.Event{}, h.gen.cause
	}
}

// CatchUp has the server c talks to catch up with the leader (ZooKeeper's
// sync, on path; a missing path is no error), so that a read sent after it
// on c shows every write applied before it. It is for reads that must not
// be stale: a reconnect asks the next server to have seen only as much as
// the last reply the session read, not a notification, nor a request whose
// reply was lost, and a server may lag behind the leader. The sync's own
// reply counts from then on.
func CatchUp(c *zk.Conn, path string) error {
	if _, err := c.Sync(path); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}
