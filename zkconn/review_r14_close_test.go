package zkconn

import (
	"bytes"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// noLogs reports whether no goroutine of the process is in Session.logs.
func noLogs(gs [][]byte) bool {
	return !slices.ContainsFunc(gs, func(g []byte) bool { return bytes.Contains(g, []byte("zkconn.(*Session).logs(")) })
}

// TestReviewR14CloseLosesQueued (review round 14): WithLogger routes
// go-zookeeper's lines into l and says "Close returns once l has logged
// what was queued". Close closes the Subscription of logs (close(s.closing))
// before it closes the *zk.Conn: logs flushes the queue and returns at
// once, while go-zookeeper logs the end of its connection ("recv loop
// terminated", "send loop terminated") only once the server has answered
// the closeSession request, a round trip later. Those lines are queued
// (the buffer has room), Close returns, and they are never logged; they
// stay in s.records. (Any record queued in that window is lost the same
// way: a guaranteed delete's failure report whose reply lands between
// close(s.closing) and go-zookeeper's Close, "adding credentials failed"
// from run.) Here the close reply is held in the connection until logs has
// returned, which on a real network it practically always has: the same
// test without the gate fails the same way.
func TestReviewR14CloseLosesQueued(t *testing.T) {
	for _, gated := range []bool{true, false} {
		name := "held close reply"
		if !gated {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var gates []*gateConn
			dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
				c, err := net.DialTimeout(network, addr, timeout)
				if err != nil || !gated {
					return c, err
				}
				g := newGateConn(c, false)
				mu.Lock()
				gates = append(gates, g)
				mu.Unlock()
				return g, nil
			}
			rec := newLogGate("") // records every line, blocks on none
			close(rec.release)
			s := dial(t, []string{shared.Addr()}, WithDialer(dialer), WithLogger(slog.New(rec)))
			current(t, s)
			if gated {
				mu.Lock()
				g := gates[len(gates)-1]
				mu.Unlock()
				g.gate()
				closed := make(chan struct{})
				go func() { s.Close(); close(closed) }()
				awaitGoroutines(t, "Session.logs returned", noLogs)
				g.open() // within go-zookeeper's second for the close reply
				<-closed
			} else {
				s.Close()
			}
			var left []string
			for len(s.records) > 0 {
				left = append(left, (<-s.records).msg)
			}
			got := rec.messages()
			for _, want := range []string{"zk: recv loop terminated", "zk: send loop terminated"} {
				if !slices.ContainsFunc(got, func(m string) bool { return strings.HasPrefix(m, want) }) {
					t.Errorf("Close returned; the logger never got %q; queued and left behind: %q; last lines logged: %q",
						want, left, got[max(0, len(got)-2):])
				}
			}
		})
	}
}
