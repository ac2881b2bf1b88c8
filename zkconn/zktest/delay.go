package zktest

import (
	"context"
	"net"
	"time"
)

// SetDelay delays every packet by d, each way, on the connections the proxy
// holds and on new ones: each request and its reply, the connect handshake
// and pings, take at least 2·d longer to go and come back, as over a long
// network. A packet is what the proxy reads from one side at once. Order is
// kept: when the delay shrinks, a packet still waits for those before it,
// and a packet waiting in one direction holds up nothing in the other. Bytes
// already in the proxy keep the delay they came in with. SetDelay(0) turns
// the delay off; a negative d panics.
func (p *Proxy) SetDelay(d time.Duration) {
	if d < 0 {
		panic("zktest: negative delay")
	}
	p.delay.Store(int64(d))
}

// deliveryTime returns the time at which a packet read now is due, or the
// zero time without a delay.
func (p *Proxy) deliveryTime() time.Time {
	if d := time.Duration(p.delay.Load()); d > 0 {
		return time.Now().Add(d)
	}
	return time.Time{}
}

// queueLen is how many packets may wait in one direction of a connection
// before the proxy stops reading from that side.
const queueLen = 128

// A packet is what the proxy forwards at once: bytes, and then possibly the
// end of the connection.
type packet struct {
	at    time.Time // when it is due
	b     []byte
	end   bool   // close both sides once b is written
	ping  bool   // b holds a ping reply (see BlackHoleAfterPing)
	fault *Fault // with end: the fault that ends the connection, struck as it is closed
	hold  *Fault // a Hold fault that took the frame after b (see startHold)
}

// finish closes c if pk ends it. The fault that ends it strikes after c
// stops forwarding and before c closes, as in close.
func (pk packet) finish(c *proxyConn) {
	if !pk.end {
		return
	}
	if pk.fault != nil {
		c.cancel()
		pk.fault.strike()
	}
	c.close()
}

// send queues pk, unless it is empty, and reports whether the connection is
// still open. On a closed connection it finishes pk at once.
func (c *proxyConn) send(queue chan<- packet, pk packet) bool {
	if len(pk.b) == 0 && !pk.end {
		return true
	}
	select {
	case queue <- pk:
		return true
	case <-c.ctx.Done():
		pk.finish(c)
		return false
	}
}

// deliver writes the packets of queue to dst, the way dir, each when it is
// due, until queue is closed. Once c is closed it writes nothing but still
// finishes every packet.
func (c *proxyConn) deliver(dst net.Conn, dir direction, queue <-chan packet) {
	w := newWaker(c.ctx)
	defer w.close()
	for pk := range queue {
		w.until(pk.at)
		if len(pk.b) > 0 && c.ctx.Err() == nil {
			var at time.Time
			if pk.ping {
				at = time.Now()
			}
			if _, err := dst.Write(pk.b); err != nil && !c.drops(dir) {
				c.close()
			} else if err == nil && pk.ping {
				c.p.pinged(at)
			}
		}
		pk.finish(c)
	}
}

// A waker puts its goroutine to sleep until a given time. Go's timers wait
// for the runtime's poller in whole milliseconds, so one due within the next
// millisecond may fire up to a millisecond late: a proxy delaying packets
// with them adds a lateness of its own, which grows with the load (measured
// on a 2-core machine: 0.15 ms idle; under 8 sessions' contended lock, 0.34
// ms at the median and 0.81 ms at the 90th percentile). Where the system
// offers a timer the poller waits on (Linux's timerfd), a waker sleeps on
// that instead: 0.07 ms late at the median, idle or loaded. A waker belongs
// to one goroutine.
type waker struct {
	ctx   context.Context
	fine  *timerfd    // made at the first sleep; nil: none yet, or timer
	timer *time.Timer // without a timerfd
}

// newWaker returns a waker whose sleeps end early once ctx is done. It
// holds no timer until it first sleeps: a proxy without a delay opens none.
func newWaker(ctx context.Context) *waker { return &waker{ctx: ctx} }

// until returns at t, or once the waker's context is done; at once if t is
// not in the future (the zero time: no delay).
func (w *waker) until(t time.Time) {
	d := time.Until(t)
	if d <= 0 || w.ctx.Err() != nil {
		return
	}
	if w.fine == nil && w.timer == nil {
		if fine, err := newTimerfd(w.ctx); err == nil {
			w.fine = fine
		} else {
			w.useTimer()
		}
	}
	if w.fine != nil {
		if err := w.fine.sleep(d); err == nil || w.ctx.Err() != nil {
			return
		}
		// The timerfd failed: Go's timers for the rest of the sleep, and
		// from now on.
		w.fine.close()
		w.fine = nil
		w.useTimer()
		if d = time.Until(t); d <= 0 {
			return
		}
	}
	w.timer.Reset(d)
	select {
	case <-w.timer.C:
	case <-w.ctx.Done():
		w.timer.Stop()
	}
}

// useTimer makes the waker sleep on Go's timers.
func (w *waker) useTimer() {
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
}

func (w *waker) close() {
	switch {
	case w.fine != nil:
		w.fine.close()
	case w.timer != nil:
		w.timer.Stop()
	}
}
