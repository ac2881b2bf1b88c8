package zkconn

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR17RefreshChurn: refresh retires the current *zk.Conn whenever
// a lookup gives an address it lacks, once a second, whatever that *zk.Conn
// is doing. Servers: gone.r17.test (its record removed for good, as in
// TestReviewR15*: the *zk.Conn is always partial) and zk.r17.test, a
// round-robin name answering one of two addresses at a time (both lead to
// the same, up, ZooKeeper, over a link with a 1.2 s round trip). Each
// *zk.Conn gets one address; a second later refresh's lookup gives the
// other one, and the *zk.Conn is retired with its connect request still
// out: no *zk.Conn ever lives long enough to be answered, and Dial fails
// at its deadline (after a loss, the Session stays without a session
// alike). Without the name that does not resolve (no refresh), the same
// Dial connects in about 1.2 s; before 8b031c8 so did this one. Any
// attempt that takes more than a second is cut off alike (a TLS
// handshake, a first server that drops SYNs: go-zookeeper's connect
// timeout is itself a second).
func TestReviewR17RefreshChurn(t *testing.T) {
	t.Parallel()
	slow := zktest.NewProxy(t, shared.Addr())
	slow.SetDelay(600 * time.Millisecond)
	for _, tc := range []struct {
		name    string
		servers []string
	}{
		{"AllResolve", []string{"zk.r17.test:2181"}},
		{"OneGone", []string{"gone.r17.test:2181", "zk.r17.test:2181"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns := &fakeDNS{name: "zk.r17.test", ips: [][4]byte{{10, 17, 0, 1}, {10, 17, 0, 2}}}
			dns.on.Store(true)
			var mu sync.Mutex
			dialed := map[string]int{}
			dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
				mu.Lock()
				dialed[address]++
				mu.Unlock()
				return net.DialTimeout(network, slow.Addr(), timeout) // both addresses lead to slow
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Dial(ctx, tc.servers, WithResolver(dns.resolver()), WithDialer(dialer), WithSessionTimeout(10*time.Second),
				WithLogger(slog.New(slog.DiscardHandler)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Fatalf("Dial = %v\n%d lookups of zk.r17.test, connections %v: a *zk.Conn retired every second, its connect request unanswered",
					err, dns.n.Load(), dialed)
			}
			s.Close()
		})
	}
}
