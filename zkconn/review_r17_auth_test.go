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
	t.Parallel()
	for _, tc := range withAndWithoutAuth {
		t.Run(tc.name, func(t *testing.T) {
			down := zktest.NewProxy(t, shared.Addr())
			down.Close() // the server given by IP address is down
			byName := zktest.NewProxy(t, shared.Addr())
			_, port, err := net.SplitHostPort(byName.Addr())
			if err != nil {
				t.Fatal(err)
			}
			dns := &fakeDNS{name: "zk2.r17.test"} // NXDOMAIN while Dial resolves
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := dialResolving(t, ctx, []string{down.Addr(), "zk2.r17.test:" + port}, dns.resolver(), tc.opts,
				func() { dns.on.Store(true) }) // zk2's record is back; byName is up
			if r.err != nil {
				t.Fatalf("Dial = %v\nwant a session on %s: zk2.r17.test resolves to it (refresh looks the names up every second)", r.err, byName.Addr())
			}
			r.s.Close()
		})
	}
}

// A dialed is what Dial returned.
type dialed struct {
	s   *Session
	err error
}

// dialResolving runs Dial(ctx, servers, opts…) with resolver r, calls
// change once Dial has logged that some names did not resolve (it has
// started its *zk.Conn without them), and returns what Dial returned.
func dialResolving(t *testing.T, ctx context.Context, servers []string, r *net.Resolver, opts []Option, change func()) dialed {
	t.Helper()
	partial := newMsgSignal("zkconn: cannot resolve some servers")
	done := make(chan dialed, 1)
	go func() {
		s, err := Dial(ctx, servers, append(opts, WithResolver(r), WithLogger(slog.New(partial)))...)
		done <- dialed{s, err}
	}()
	select {
	case <-partial.seen:
	case d := <-done:
		t.Fatalf("Dial returned %v before logging the names left out", d.err)
	}
	change()
	return <-done
}

// withAndWithoutAuth are the Session options of the tests that run both
// without credentials and WithDigestAuth.
var withAndWithoutAuth = []struct {
	name string
	opts []Option
}{
	{"NoAuth", nil},
	{"DigestAuth", []Option{WithDigestAuth("alice", "secret")}},
}
