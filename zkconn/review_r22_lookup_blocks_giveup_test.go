package zkconn

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r22HangDNS answers NXDOMAIN for everything until hang is closed; from
// then on a query for name is held (no answer) until release is closed.
// hung is closed at the first query held.
type r22HangDNS struct {
	name     string
	hangOn   chan struct{}
	release  chan struct{}
	hung     chan struct{}
	hungOnce sync.Once
}

func (d *r22HangDNS) answer(q []byte) []byte {
	name, _, question, ok := dnsQuestion(q)
	if !ok {
		return nil
	}
	if name == d.name {
		select {
		case <-d.hangOn:
			d.hungOnce.Do(func() { close(d.hung) })
			<-d.release
			return nil // the resolver gave up long ago
		default:
		}
	}
	h := make([]byte, 12)
	copy(h, q[:2])
	binary.BigEndian.PutUint16(h[2:], 0x8000|0x0400|0x0100|0x0080|3) // NXDOMAIN
	binary.BigEndian.PutUint16(h[4:], 1)
	return append(h, question...)
}

// TestReviewR22LookupBlocksGiveUp: run calls refresh (and its name
// lookups) inline. A *zk.Conn made without one name (NXDOMAIN) has no
// session yet, so run's lookup fires and refresh starts resolving; the
// name server now holds the query (a name server that stops answering:
// Go's resolver waits its timeout, 5s, per attempt, twice). Meanwhile the
// server comes up, the session is granted (no credentials: onEvent, not
// run, brings it up), and then a partition suspends it. The session
// timeout is 1s: giveUp is due about a second later, but run is stuck in
// refresh's resolve and gives nothing up until the lookup ends: Lost
// comes ten seconds late, and so does the next ZooKeeper session.
func TestReviewR22LookupBlocksGiveUp(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	_, port, _ := net.SplitHostPort(p.Addr())
	dns := &r22HangDNS{name: "zk2.r22.test", hangOn: make(chan struct{}), release: make(chan struct{}), hung: make(chan struct{})}
	defer close(dns.release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.BlackHole() // no session for now
	r := dialResolving(t, ctx, []string{p.Addr(), "zk2.r22.test:" + port}, dnsResolver(dns.answer),
		[]Option{WithSessionTimeout(time.Second)},
		func() {
			close(dns.hangOn)
			<-dns.hung // run's refresh is resolving
			p.Heal()   // the server is reachable: a session
		})
	if r.err != nil {
		t.Fatalf("Dial: %v", r.err)
	}
	defer r.s.Close()
	sub := r.s.Subscribe()
	defer sub.Stop()
	p.BlackHole() // a partition
	susp := await(t, sub, StateSuspended, 10*time.Second)
	timeout := r.s.SessionTimeout()
	deadline := time.After(timeout + 2*time.Second)
	for {
		select {
		case ev := <-sub.C():
			if ev.State == StateLost {
				if d := ev.Time.Sub(susp.Time); d > timeout+2*time.Second {
					t.Fatalf("Lost %v after Suspended (session timeout %v)", d, timeout)
				}
				return
			}
		case <-deadline:
			t.Errorf("no Lost within %v of Suspended (session timeout %v): run is in refresh's lookup", timeout+2*time.Second, timeout)
			ev := await(t, sub, StateLost, 30*time.Second)
			t.Fatalf("Lost came %v after Suspended", ev.Time.Sub(susp.Time).Round(time.Millisecond))
		}
	}
}
