package zkconn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR95SmallRequestedTimeout: a session timeout asked below the
// server's minimum is clamped up by the server (WithSessionTimeout's doc),
// but greetWait bounds the first connect by the timeout asked for, as none
// is granted yet: 50ms here, while the link's round trip is 100ms, well
// under a third of the 400ms the server grants. Every connect is closed
// before its response, and Dial never returns a Session. Before round 94
// Dial succeeded.
func TestReviewR95SmallRequestedTimeout(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	p.SetDelay(50 * time.Millisecond) // each way
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := Dial(ctx, []string{p.Addr()}, WithSessionTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatalf("Dial asking 50ms (server grants its minimum, 400ms), 100ms round trip = %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
	defer s.Close()
	current(t, s)
}

// TestReviewR95DialUnansweredMessage: Dial on a single server that accepts
// connections and never answers (a black hole). Since round 94 the tap
// closes each connection after greetWait, and firstRead records that close
// as the attempt's failure: Dial's error lists "use of closed network
// connection", which points at the client, not at a server that did not
// answer. The attempt must say the server did not answer.
func TestReviewR95DialUnansweredMessage(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	p.BlackHole()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := Dial(ctx, []string{p.Addr()}, WithSessionTimeout(time.Second))
	if err == nil {
		s.Close()
		t.Fatal("Dial on a black hole succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "use of closed network connection") {
		t.Fatalf("Dial on a server that never answers: %v", err)
	}
}
