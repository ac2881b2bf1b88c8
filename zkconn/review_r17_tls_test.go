package zkconn

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusals is a slog.Handler that closes all once "zkconn: TLS handshake
// refused" has been logged for every one of want (its "server" attr); it
// blocks on nothing.
type refusals struct {
	mu   sync.Mutex
	want map[string]bool
	all  chan struct{}
}

func newRefusals(servers ...string) *refusals {
	r := &refusals{want: map[string]bool{}, all: make(chan struct{})}
	for _, s := range servers {
		r.want[s] = true
	}
	return r
}

func (r *refusals) Enabled(context.Context, slog.Level) bool { return true }
func (r *refusals) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *refusals) WithGroup(string) slog.Handler            { return r }
func (r *refusals) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "zkconn: TLS handshake refused" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "server" {
			r.mu.Lock()
			if r.want[a.Value.String()] {
				delete(r.want, a.Value.String())
				if len(r.want) == 0 {
					close(r.all)
				}
			}
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestReviewR17TLSRefusalAfterRefresh: WithTLS, two servers, A by IP
// address and zk2 by a name whose record is missing when Dial resolves;
// both (once reached) answer the handshake with garbage, i.e. refuse it.
// Dial's first *zk.Conn, [A] alone, is partial; its attempt on A has not
// finished (the TCP connect is slow) when zk2's record comes back. refresh
// retires the first *zk.Conn and replace starts one with [A, zk2] — made
// with refused = nil. Both servers then refuse the handshake, which WithTLS
// and ErrTLSHandshake promise ends Dial at once ("when every server has
// refused it before any accepted a connection, Dial returns at once"); but
// nobody tells Dial: it waits for its ctx and fails with
// DeadlineExceeded. And its error ends "not resolved: lookup
// zk2.r17.test: no such host", though zk2 was resolved and tried (its
// refusal is in the same error's connection attempts).
func TestReviewR17TLSRefusalAfterRefresh(t *testing.T) {
	t.Parallel()
	garbage := []byte("HTTP/1.0 400 Bad Request\r\n\r\n")
	a := listener(t, garbage)
	zk2 := listener(t, garbage)
	_, port, err := net.SplitHostPort(zk2)
	if err != nil {
		t.Fatal(err)
	}
	dns := &fakeDNS{name: "zk2.r17.test"} // NXDOMAIN while Dial resolves

	firstA := make(chan struct{})  // the first *zk.Conn dials A
	release := make(chan struct{}) // ends that dial
	zk2Dialed := make(chan struct{})
	var once, once2 sync.Once
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		first := false
		if address == a {
			once.Do(func() { first = true; close(firstA) })
		}
		if first {
			<-release // a slow TCP connect
			return nil, errors.New("connect timed out")
		}
		if address == zk2 {
			once2.Do(func() { close(zk2Dialed) })
		}
		return net.DialTimeout(network, address, timeout)
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	refused := newRefusals(a, zk2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		s   *Session
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		s, err := Dial(ctx, []string{a, "zk2.r17.test:" + port}, WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}), WithDialer(dialer),
			WithResolver(dns.resolver()), WithSessionTimeout(30*time.Second), WithLogger(slog.New(refused)))
		done <- result{s, err, time.Now()}
	}()
	<-firstA
	dns.on.Store(true) // zk2's record is back: refresh retires the first *zk.Conn
	select {
	case <-zk2Dialed: // the replacement, [A zk2], is trying
	case r := <-done:
		t.Fatalf("Dial = %v before zk2 was tried", r.err)
	}
	close(release)
	var all time.Time
	select {
	case <-refused.all: // both servers have refused the handshake
		all = time.Now()
	case r := <-done:
		t.Fatalf("Dial = %v before both servers refused", r.err)
	}
	r := <-done
	if r.err == nil {
		r.s.Close()
		t.Fatal("Dial succeeded")
	}
	t.Logf("Dial = %v\n(returned %v after both servers had refused the handshake)", r.err, r.at.Sub(all).Round(time.Millisecond))
	if !errors.Is(r.err, ErrTLSHandshake) {
		t.Errorf("Dial's error does not wrap ErrTLSHandshake, though every server refused the handshake (A, then zk2 once it resolved): it waited for its ctx")
	}
	if strings.Contains(r.err.Error(), "not resolved") {
		t.Errorf("Dial's error says zk2.r17.test was not resolved, though it was resolved and refused the handshake")
	}
}
