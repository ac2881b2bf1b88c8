package zkconn

import (
	"fmt"
	"sync"
	"time"
)

// State is where a Session stands with ZooKeeper. The transitions are
// Connected → Suspended → Reconnected (→ Suspended → …), Suspended → Lost →
// Connected (a new ZooKeeper session), and any state → Closed.
type State int32

const (
	// StateConnected: a new ZooKeeper session is established.
	StateConnected State = iota + 1
	// StateSuspended: the connection dropped, or was given up because the
	// server answered no request for two thirds of the session timeout; the
	// session may still be alive on the server, but nothing this client
	// holds can be proven held.
	StateSuspended
	// StateReconnected: the connection is back with the same session; its
	// ephemeral nodes and watches survived.
	StateReconnected
	// StateLost: the session expired, or stayed disconnected until shortly
	// before the server could expire it (a tenth of the session timeout
	// ahead, at most 250ms) and was given up. Its ephemeral nodes are gone
	// (or will be once the server expires it). A new session follows.
	StateLost
	// StateClosed: Close was called. Final.
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateConnected:
		return "connected"
	case StateSuspended:
		return "suspended"
	case StateReconnected:
		return "reconnected"
	case StateLost:
		return "lost"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// connected reports whether requests can be sent in state s.
func (s State) connected() bool { return s == StateConnected || s == StateReconnected }

// An Event is one state transition of a Session.
type Event struct {
	State State
	// SessionID is the ZooKeeper session the transition is about (for Lost,
	// the one that was lost; 0 for Closed when no session was up).
	SessionID int64
	Time      time.Time
}

// A Subscription delivers a Session's state transitions in order. It is
// created by Session.Subscribe and must be stopped with Stop when no longer
// read.
type Subscription struct {
	s    *Session
	c    chan Event
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	queue []Event
}

// subscriptionBuffer is how many transitions C holds before the rest queue
// up inside the Subscription.
const subscriptionBuffer = 16

// Subscribe returns a Subscription whose channel first receives the current
// state, then every later transition. A reader that falls behind never
// blocks the Session or other subscribers: transitions queue up for it
// without limit and none is dropped while the Session is open.
func (s *Session) Subscribe() *Subscription {
	sub := &Subscription{
		s:    s,
		c:    make(chan Event, subscriptionBuffer),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		sub.c <- s.eventLocked(StateClosed)
		close(sub.c)
		close(sub.done)
		sub.once.Do(func() {})
		return sub
	}
	sub.push(s.eventLocked(s.state))
	s.subs[sub] = struct{}{}
	s.bg.Add(1)
	go sub.pump()
	return sub
}

// C returns the channel of transitions. It is closed after Stop, and when the
// Session is closed: then it holds the transitions still queued, ending with
// StateClosed, as far as its buffer of 16 allows; a reader more than 16
// transitions behind at that moment sees the channel closed early, which
// means the same thing.
func (sub *Subscription) C() <-chan Event { return sub.c }

// Stop ends the Subscription and waits for its goroutine to finish. C is
// closed; transitions not yet read are discarded. Stop is idempotent.
func (sub *Subscription) Stop() {
	sub.once.Do(func() {
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
		close(sub.stop)
	})
	<-sub.done
}

// push queues ev without blocking. The caller holds s.mu, which keeps
// transitions in order.
func (sub *Subscription) push(ev Event) {
	sub.mu.Lock()
	sub.queue = append(sub.queue, ev)
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *Subscription) next() (Event, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.queue) == 0 {
		return Event{}, false
	}
	return sub.queue[0], true
}

func (sub *Subscription) pop() {
	sub.mu.Lock()
	sub.queue = sub.queue[1:]
	sub.mu.Unlock()
}

// pump moves queued transitions into C at the reader's pace.
func (sub *Subscription) pump() {
	defer sub.s.bg.Done()
	defer close(sub.done)
	defer close(sub.c)
	for {
		ev, ok := sub.next()
		if !ok {
			select {
			case <-sub.wake:
				continue
			case <-sub.stop:
				return
			case <-sub.s.closing:
				sub.drain()
				return
			}
		}
		select {
		case sub.c <- ev:
			sub.pop()
		case <-sub.stop:
			return
		case <-sub.s.closing:
			sub.drain()
			return
		}
	}
}

// drain hands the rest of the queue to C as far as its buffer allows. The
// Session is closed, so the queue no longer grows.
func (sub *Subscription) drain() {
	for {
		ev, ok := sub.next()
		if !ok {
			return
		}
		select {
		case sub.c <- ev:
			sub.pop()
		default:
			return
		}
	}
}
