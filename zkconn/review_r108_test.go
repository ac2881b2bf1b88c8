package zkconn

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r108Suspended suspends s's connection through p by a cut (the black hole
// keeps it down) and returns, read under s.mu once suspended, when the
// Session will give the session up, the wire's aliveUntil and the granted
// timeout.
func r108Suspended(t *testing.T, s *Session, sub *Subscription, p *zktest.Proxy) (at, alive time.Time, granted time.Duration) {
	t.Helper()
	p.BlackHole()
	p.Cut()
	await(t, sub, StateSuspended, 30*time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateSuspended {
		t.Fatal("given up before the test could look")
	}
	return s.expireAt, s.cur.wire.aliveUntil(), s.cur.wire.Timeout()
}

// TestReviewR108MarginFromGrantedTimeout (review round 108): a server
// that grants 2s whatever is asked (its min and max session timeouts
// both 2s). Asked a minute (clamped down) or a second (clamped up), the
// give-up's margin and its reference point both come from the 2s granted:
// aliveUntil less 200ms, never more than the granted timeout after the
// suspension; and the session is given up no sooner than that. (How much
// sooner than aliveUntil it is given up depends on how soon this process
// runs: not asserted.)
func TestReviewR108MarginFromGrantedTimeout(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMinSessionTimeout(2*time.Second), zktest.WithMaxSessionTimeout(2*time.Second))
	for _, asked := range []time.Duration{time.Minute, time.Second} {
		t.Run(asked.String(), func(t *testing.T) {
			p := zktest.NewProxy(t, srv.Addr())
			s := dial(t, []string{p.Addr()}, WithSessionTimeout(asked))
			sub := s.Subscribe()
			defer sub.Stop()
			first := current(t, s)
			if got := s.SessionTimeout(); got != 2*time.Second {
				t.Fatalf("granted %v; want 2s", got)
			}
			before := time.Now()
			at, alive, granted := r108Suspended(t, s, sub, p)
			if granted != 2*time.Second {
				t.Fatalf("wire's timeout %v; want 2s", granted)
			}
			if alive.IsZero() || alive.After(before.Add(granted)) {
				t.Fatalf("aliveUntil %v: unknown, or later than the cut + the granted 2s (%v)", alive, before.Add(granted))
			}
			if want := alive.Add(-200 * time.Millisecond); !at.Equal(want) {
				t.Fatalf("give-up due at aliveUntil - %v; want aliveUntil - 200ms (a tenth of the 2s granted)", alive.Sub(at))
			}
			lost := await(t, sub, StateLost, 30*time.Second)
			if lost.SessionID != first.ID() {
				t.Fatalf("lost %#x; want %#x", lost.SessionID, first.ID())
			}
			if lost.Time.Before(at) {
				t.Fatalf("lost at aliveUntil - %v, before the give-up was due (aliveUntil - 200ms)", alive.Sub(lost.Time))
			}
		})
	}
}

// TestReviewR108GiveUpRecomputedAfterReconnect (review round 108): a cut,
// the same session back (Reconnected), then a second cut at once, for
// good. The give-up of the second suspension counts from what the server
// heard on the reconnect, not from before the first cut: the first
// suspension's timer, still running when the second comes, gives nothing
// up, and the session is lost only at the second's due time.
func TestReviewR108GiveUpRecomputedAfterReconnect(t *testing.T) {
	const T = 4 * time.Second
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(T))
	sub := s.Subscribe()
	defer sub.Stop()
	first := current(t, s)
	at1, alive1, _ := r108Suspended(t, s, sub, p)
	if want := alive1.Add(-maxGiveUpMargin); !at1.Equal(want) {
		t.Fatalf("first give-up at aliveUntil - %v; want - %v", alive1.Sub(at1), maxGiveUpMargin)
	}
	p.Heal()
	back := await(t, sub, StateReconnected, 30*time.Second)
	if back.SessionID != first.ID() {
		t.Fatalf("reconnected %#x; want %#x", back.SessionID, first.ID())
	}
	at2, alive2, _ := r108Suspended(t, s, sub, p)
	if !alive2.After(alive1) {
		t.Fatalf("aliveUntil after the reconnect %v, not after the first %v: heard not renewed by the reconnect", alive2, alive1)
	}
	if want := alive2.Add(-maxGiveUpMargin); !at2.Equal(want) {
		t.Fatalf("second give-up at aliveUntil - %v; want - %v", alive2.Sub(at2), maxGiveUpMargin)
	}
	if !at2.After(at1) {
		t.Fatalf("second give-up %v not after the first %v", at2, at1)
	}
	lost := await(t, sub, StateLost, 30*time.Second)
	if lost.Time.Before(at2) {
		t.Fatalf("lost %v before the second suspension's give-up was due (the first's timer gave it up?)", at2.Sub(lost.Time))
	}
}
