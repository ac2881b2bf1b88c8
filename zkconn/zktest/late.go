package zktest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"
)

// A held is a request a Hold fault took off its connection, and what keeps
// that connection's session alive at the server until Release delivers it.
type held struct {
	c     *proxyConn
	frame []byte // the request, length included
	xid   int32

	release  chan struct{} // closed by Release
	relOnce  sync.Once
	answered chan struct{} // closed once the reply comes back
	ansOnce  sync.Once
	done     chan struct{} // closed when keep ends
}

// heldPing is how often the proxy pings the server on a held connection:
// well within any session timeout a server grants (at least 2 ticks).
const heldPing = 100 * time.Millisecond

// pingFrame is a ping request as go-zookeeper writes one: length, xid -2,
// opcode 11.
var pingFrame = []byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, byte(OpPing)}

// hold takes frame, the request f strikes, off c, which is partitioned
// from it on; the pipe that read it starts the hold (startHold) once it has
// queued what came before it.
func (c *proxyConn) hold(f *Fault, frame []byte) {
	h := &held{
		c: c, frame: bytes.Clone(frame), xid: parseRequest(frame).xid,
		release: make(chan struct{}), answered: make(chan struct{}), done: make(chan struct{}),
	}
	c.mu.Lock()
	c.held = h
	c.mu.Unlock()
	c.filter.Store(int32(filterHeld))
	f.held = h
}

// startHold starts the hold of f's request, whose predecessors on c were
// just queued (or not: c is closed) to the target on queue: keep pings the
// server through queue until the request is released and answered.
func (c *proxyConn) startHold(f *Fault, queue chan<- packet, open bool) {
	if open {
		c.p.wg.Add(1)
		go f.held.keep(queue)
	} else {
		close(f.held.done)
	}
	f.strike()
}

// keep pings the server every heldPing, sends the request once released,
// and ends the connection once its reply has come back, or when the
// connection ends first.
func (h *held) keep(queue chan<- packet) {
	defer h.c.p.wg.Done()
	defer close(h.done)
	t := time.NewTicker(heldPing)
	defer t.Stop()
	release := h.release
	for {
		var pk packet
		select {
		case <-h.c.ctx.Done():
			return
		case <-t.C:
			pk.b = pingFrame
		case <-release:
			release = nil
			h.c.p.requests.Add(1)
			pk.b = h.frame
		case <-h.answered:
			h.c.send(queue, packet{end: true})
			return
		}
		pk.at = h.c.p.deliveryTime()
		if !h.c.send(queue, pk) {
			return
		}
	}
}

// answers notes frame, read the way dir on c while c drops it, if it is the
// reply to the request c holds.
func (c *proxyConn) answers(frame []byte, kind frameKind, dir direction) {
	if dir != toClient || kind != messageFrame {
		return
	}
	c.mu.Lock()
	h := c.held
	c.mu.Unlock()
	if h != nil && replyXid(frame) == h.xid {
		h.ansOnce.Do(func() { close(h.answered) })
	}
}

// heldEnds is called by the pipe the way dir on c when its source has
// ended. If c holds a request, the pipe to the target waits until keep,
// which sends through its queue, has ended, and the pipe from the target
// (the server closed the connection: the request can no longer be
// delivered) ends c, and with it keep.
func (c *proxyConn) heldEnds(dir direction) {
	c.mu.Lock()
	h := c.held
	c.mu.Unlock()
	switch {
	case h == nil:
	case dir == toTarget:
		<-h.done
	default:
		c.close()
	}
}

// Release delivers the request a Hold fault holds, late, on the connection
// that kept its session alive, and returns once the server's reply has come
// back to the proxy: the server has decided the request (what it decided
// is for the test to read from the server). The proxy then closes that
// connection, both sides, and the session expires at the server in its own
// time; the reply does not reach the client. Release fails if f is not a
// Hold fault that has struck (call it after Struck), if the connection
// ended first (Cut, Close, or the server's closing it: the request is then
// not applied, unless it was on its way already), or when ctx ends. It may
// be called more than once.
func (f *Fault) Release(ctx context.Context) error {
	select {
	case <-f.struck:
	default:
		return errors.New("zktest: Release of a fault that has not struck")
	}
	h := f.held
	if h == nil {
		return errors.New("zktest: Release of a fault that is not Hold")
	}
	h.relOnce.Do(func() { close(h.release) })
	select {
	case <-h.answered:
		return nil
	case <-h.done:
		select {
		case <-h.answered:
			return nil
		default:
		}
		return errors.New("zktest: the held request's connection ended before its reply")
	case <-ctx.Done():
		return ctx.Err()
	}
}
