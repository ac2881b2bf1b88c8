package zkconn

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR25DialEndsWithAuthAndLookupUnderWay (a check): both of run's
// own goroutines are under way when Dial's ctx ends. The *zk.Conn, made
// without zk2 (NXDOMAIN), has a session; its setAuth is dropped (applied,
// no reply: AddAuth waits) and, the session not being reported (no
// credentials yet), refresh's lookup starts and the name server holds it.
// Dial must fail within about a second of ctx's end, and neither run, nor
// authenticate, nor the refresh lookup may outlive it.
func TestReviewR25DialEndsWithAuthAndLookupUnderWay(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	_, port, _ := net.SplitHostPort(p.Addr())
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.Drop)
	dns := &r22HangDNS{name: "zk2.r25.test", hangOn: make(chan struct{}), release: make(chan struct{}), hung: make(chan struct{})}
	defer close(dns.release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var canceled time.Time
	r := dialResolving(t, ctx, []string{p.Addr(), "zk2.r25.test:" + port}, dnsResolver(dns.answer),
		[]Option{WithDigestAuth("alice", "secret"), WithSessionTimeout(10 * time.Second)},
		func() {
			zktest.AwaitStruck(t, f) // AddAuth waits for a reply that never comes
			awaitGoroutines(t, "AddAuth under way", inAddAuth)
			close(dns.hangOn)
			<-dns.hung // refresh's lookup is under way too
			canceled = time.Now()
			cancel()
		})
	took := time.Since(canceled)
	if r.err == nil {
		r.s.Close()
		t.Fatal("Dial succeeded without the credentials' reply")
	}
	t.Logf("Dial returned %v after ctx's end: %v", took.Round(time.Millisecond), r.err)
	if took > 3*time.Second {
		t.Fatalf("Dial returned %v after ctx's end (documented: up to a second)", took.Round(time.Millisecond))
	}
	awaitGoroutines(t, "run, authenticate and the refresh lookup ended", func(gs [][]byte) bool {
		for _, g := range gs {
			if bytes.Contains(g, []byte("(*Session).authenticate")) || bytes.Contains(g, []byte("(*Session).run")) ||
				bytes.Contains(g, []byte("zkconn.resolve(")) {
				return false
			}
		}
		return true
	})
}
