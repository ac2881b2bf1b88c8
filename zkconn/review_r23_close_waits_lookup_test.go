package zkconn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR23FailedDialWaitsForRefreshLookup: Dial documents that it
// returns up to a second past ctx's end. A *zk.Conn made without one name
// (NXDOMAIN) has no session (black hole), so run's refresh lookup starts
// and the name server holds the query. ctx ends: Dial's Close cancels
// s.ctx, but Go's resolver does not abandon a query in flight on cancel
// (exchange only sets the conn's deadline, now+timeout), so the refresh
// goroutine, and Close's bg.Wait, and Dial, wait the resolver's timeout
// (5s). The resolver's Dial here honours ctx, like net.Dialer.
func TestReviewR23FailedDialWaitsForRefreshLookup(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	_, port, _ := net.SplitHostPort(p.Addr())
	dns := &r22HangDNS{name: "zk2.r23.test", hangOn: make(chan struct{}), release: make(chan struct{}), hung: make(chan struct{})}
	defer close(dns.release)
	inner := dnsResolver(dns.answer)
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return inner.Dial(ctx, network, address)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.BlackHole()
	var canceled time.Time
	r := dialResolving(t, ctx, []string{p.Addr(), "zk2.r23.test:" + port}, res, nil,
		func() {
			close(dns.hangOn)
			<-dns.hung // run's refresh goroutine is resolving
			canceled = time.Now()
			cancel()
		})
	took := time.Since(canceled)
	if r.err == nil {
		r.s.Close()
		t.Fatal("Dial succeeded")
	}
	t.Logf("Dial returned %v after ctx's end: %v", took.Round(time.Millisecond), r.err)
	if took > 3*time.Second {
		t.Fatalf("Dial returned %v after ctx's end (documented: up to a second)", took.Round(time.Millisecond))
	}
}
