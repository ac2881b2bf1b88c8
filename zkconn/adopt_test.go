package zkconn

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReplaceAdoptsOutsideTheLock: replace starts the next *zk.Conn without
// holding s.mu, and go-zookeeper's events of it wait at the client's ready
// gate until replace has adopted it (or given it up). Held between the two:
// the Session's lock is free (State answers), the new conn's first event
// waits at the gate; then the Session comes up on the new conn, or, when
// Close came meanwhile, the new conn is closed and no connection is left.
func TestReplaceAdoptsOutsideTheLock(t *testing.T) {
	for _, closing := range []bool{false, true} {
		name := "adopted"
		if closing {
			name = "closedMeanwhile"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := zktest.NewProxy(t, shared.Addr())
			s := dial(t, []string{p.Addr()})
			first := current(t, s)
			entered := make(chan *client, 1)
			release := make(chan struct{})
			let := sync.OnceFunc(func() { close(release) })
			t.Cleanup(let) // before the Session's Close, which waits for replace
			s.mu.Lock()
			s.adopting = func(c *client) {
				entered <- c
				<-release
			}
			s.loseLocked(errors.New("test: given up"))
			s.retireLocked(s.cur)
			s.mu.Unlock()
			var next *client
			select {
			case next = <-entered:
			case <-ctx.Done():
				t.Fatal("replace did not start a new *zk.Conn")
			}
			awaitGoroutines(t, "the new conn's first event held at its ready gate", func(gs [][]byte) bool {
				for _, g := range gs {
					if bytes.Contains(g, []byte("zkconn.(*Session).onEvent")) && bytes.Contains(g, []byte("[chan receive")) {
						return true
					}
				}
				return false
			})
			state := make(chan State, 1)
			go func() { state <- s.State() }()
			select {
			case st := <-state:
				if st != StateLost {
					t.Fatalf("State = %v; want lost", st)
				}
			case <-ctx.Done():
				t.Fatal("State waited while replace started a *zk.Conn: s.mu held")
			}
			if !closing {
				let()
				if h := current(t, s); h.ID() == first.ID() {
					t.Fatalf("session %#x after the replacement; want a new one", h.ID())
				}
				return
			}
			closed := make(chan struct{})
			go func() {
				s.Close()
				close(closed)
			}()
			select {
			case <-s.closing:
			case <-ctx.Done():
				t.Fatal("Close did not begin")
			}
			let()
			select {
			case <-closed:
			case <-ctx.Done():
				t.Fatal("Close did not return")
			}
			if _, open := <-next.events; open {
				t.Fatal("the conn started meanwhile still has events coming")
			}
			if err := p.AwaitConns(ctx, 0); err != nil {
				t.Fatalf("connections left after Close: %d (%v)", p.Conns(), err)
			}
		})
	}
}
