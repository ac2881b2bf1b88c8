package zkconn

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR17RefreshNeverRunsWhileAuthenticating: 8b031c8's refresh runs
// from run's select, in the case `c.partial && !live`; but run's switch
// takes `!c.authed` first, and authenticate loops (AddAuth, which fails
// with ErrNoServer after every round of servers that cannot be reached,
// then a second's wait) until the credentials are accepted or the Session
// closes. With WithDigestAuth a *zk.Conn made without some server names
// (partial) whose servers are down is therefore never refreshed: the name
// that resolves again, to a server that is up, is never tried. Dial (whose
// first *zk.Conn is partial) waits to its deadline; after a loss the
// Session stays without a session for good (TestReviewR16PartialListNeverRefreshed
// with credentials). The subtest without credentials shows refresh doing
// its job in the same setting.
func TestReviewR17RefreshNeverRunsWhileAuthenticating(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"NoAuth", nil},
		{"DigestAuth", []Option{WithDigestAuth("alice", "secret")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down := zktest.NewProxy(t, shared.Addr())
			down.Close() // the server given by IP address is down
			byName := zktest.NewProxy(t, shared.Addr())
			_, port, err := net.SplitHostPort(byName.Addr())
			if err != nil {
				t.Fatal(err)
			}
			dns := &fakeDNS{name: "zk2.r17.test"} // NXDOMAIN while Dial resolves
			partial := newMsgSignal("zkconn: cannot resolve some servers")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			type result struct {
				s   *Session
				err error
			}
			done := make(chan result, 1)
			go func() {
				s, err := Dial(ctx, []string{down.Addr(), "zk2.r17.test:" + port},
					append(tc.opts, WithResolver(dns.resolver()), WithLogger(slog.New(partial)))...)
				done <- result{s, err}
			}()
			select { // Dial has resolved, without zk2, and started its *zk.Conn to down alone
			case <-partial.seen:
			case r := <-done:
				t.Fatalf("Dial returned %v before logging the name left out", r.err)
			}
			dns.on.Store(true) // zk2's record is back; byName is up
			r := <-done
			if r.err != nil {
				t.Fatalf("Dial = %v\nwant a session on %s: zk2.r17.test resolves to it (refresh looks the names up every second)", r.err, byName.Addr())
			}
			r.s.Close()
		})
	}
}
