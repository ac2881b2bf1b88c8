package zkconn

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestGiveUpAheadOfExpiry pins giveUpAtLocked's invariant: once suspended,
// the Session is due to give its session up giveUpMargin (a tenth of the
// granted timeout, at most 250ms) before the earliest moment the server can
// expire it (the wire's aliveUntil), and it does give it up, with a new
// session after.
func TestGiveUpAheadOfExpiry(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(2*time.Second))
	first := current(t, s)
	sub := s.Subscribe()
	defer sub.Stop()
	// Cut: suspended at once, about the whole timeout ahead of the
	// give-up; the black hole keeps the session from coming back.
	p.BlackHole()
	p.Cut()
	await(t, sub, StateSuspended, 30*time.Second)
	s.mu.Lock()
	if s.state != StateSuspended {
		s.mu.Unlock()
		t.Fatal("given up before the test could look: the process ran too late")
	}
	at, alive, timeout := s.expireAt, s.cur.wire.aliveUntil(), s.cur.wire.Timeout()
	s.mu.Unlock()
	if alive.IsZero() || timeout == 0 {
		t.Fatalf("aliveUntil %v, timeout %v: not known while suspended", alive, timeout)
	}
	if want := alive.Add(-giveUpMargin(timeout)); !at.Equal(want) {
		t.Fatalf("give-up due at %v; want %v (aliveUntil %v less the margin for %v)", at, want, alive, timeout)
	}
	lost := await(t, sub, StateLost, 30*time.Second)
	if lost.SessionID != first.ID() {
		t.Fatalf("lost session %#x; want %#x", lost.SessionID, first.ID())
	}
	if err := first.Err(); err == nil {
		t.Fatal("the given-up Handle reports no error")
	}
	p.Heal()
	if h := current(t, s); h.ID() == first.ID() {
		t.Fatalf("session %#x carried on after it was given up", h.ID())
	}
}
