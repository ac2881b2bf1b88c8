package zkconn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// msgSignal is a slog.Handler that closes seen the first time a record
// with one of the messages want is handled; it blocks on nothing.
type msgSignal struct {
	want []string
	once sync.Once
	seen chan struct{}
}

func newMsgSignal(want ...string) *msgSignal {
	return &msgSignal{want: want, seen: make(chan struct{})}
}

func (m *msgSignal) Enabled(context.Context, slog.Level) bool { return true }
func (m *msgSignal) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *msgSignal) WithGroup(string) slog.Handler            { return m }
func (m *msgSignal) Handle(_ context.Context, r slog.Record) error {
	if slices.Contains(m.want, r.Message) {
		m.once.Do(func() { close(m.seen) })
	}
	return nil
}

// TestReviewR16PartialListNeverRefreshed: a Session has two servers, one
// given by IP address and one by a name (zk2). Its ZooKeeper session is
// lost (partition past the session timeout) while zk2's record is missing
// (NXDOMAIN for a while: the name server hiccups, or zk2 is being
// re-provisioned). replace now takes the partial list, [the IP], and
// starts a *zk.Conn to it alone. The server at the IP stays down; zk2's
// record comes back and zk2 is up. Nothing ever resolves again: run only
// re-resolves when a *zk.Conn is retired, and a *zk.Conn that never got a
// session is never given up (expireAt is set only on a suspension). So
// the Session stays without a ZooKeeper session for good, though every
// name resolves and a server is up. Before c138abc replace failed and
// tried again each second, and once zk2 resolved it connected to it.
func TestReviewR16PartialListNeverRefreshed(t *testing.T) {
	byIP := zktest.NewProxy(t, shared.Addr())
	byName := zktest.NewProxy(t, shared.Addr())
	_, port, err := net.SplitHostPort(byName.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dns := &fakeDNS{name: "zk2.r16.test"}
	dns.on.Store(true)
	// c138abc's replace logs the first; the code before it, the second.
	partial := newMsgSignal("zkconn: cannot resolve some servers", "zkconn: cannot resolve the servers")
	s := dial(t, []string{byIP.Addr(), "zk2.r16.test:" + port}, WithResolver(dns.resolver()),
		WithSessionTimeout(2*time.Second), WithLogger(slog.New(partial)))
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, 10*time.Second)

	dns.on.Store(false) // zk2's record goes missing
	byIP.BlackHole()
	byName.BlackHole()
	await(t, sub, StateLost, 30*time.Second)
	select { // replace resolved while zk2 did not (and, since c138abc, started a *zk.Conn to the IP alone)
	case <-partial.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("replace logged no partial resolution within 30s")
	}
	byIP.Close()       // the server at the IP address is down, and stays down
	dns.on.Store(true) // zk2's record is back
	byName.Heal()      // and zk2 is up

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Current(ctx); err != nil {
		t.Fatalf("Current = %v: no new ZooKeeper session within 20s though zk2.r16.test resolves again and %s (its address) is up; "+
			"the *zk.Conn replace made with the partial list [%s] is never replaced", err, byName.Addr(), byIP.Addr())
	}
}

// TestReviewR16DialDeadlineMidResolve: Dial's ctx ends while a name is
// being looked up (its name server hangs), after an earlier server, given
// by IP address, a live ZooKeeper, is in the list. resolve returns the
// partial list and Dial goes on to start a *zk.Conn with a ctx already
// done; Current fails at once and Close ends it. It fails with
// DeadlineExceeded, in time, and (in practice) with no connection
// attempt: Close's connector.close wins the race with go-zookeeper's first
// dial. But the error is now just "dial [..]: context deadline
// exceeded", with no connection attempt behind it: what ran out of time,
// the lookup of zk.dsync-test.invalid, is gone from it (before c138abc:
// "lookup zk.dsync-test.invalid on ...: i/o timeout", a *net.DNSError
// wrapping DeadlineExceeded). It survives only in a Warn line, "cannot
// resolve some servers", which blames the name rather than the deadline.
func TestReviewR16DialDeadlineMidResolve(t *testing.T) {
	var mu sync.Mutex
	var dials []string
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, address)
		mu.Unlock()
		return net.DialTimeout(network, address, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, err := Dial(ctx, []string{shared.Addr(), "zk.dsync-test.invalid:2181"},
		WithResolver(hangingResolver), WithDialer(dialer))
	late := time.Since(mustDeadline(ctx))
	if err == nil {
		s.Close()
		t.Fatal("Dial succeeded after its deadline")
	}
	t.Logf("Dial = %v (%v after the deadline)", err, late.Round(time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial = %v; want DeadlineExceeded", err)
	}
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Errorf("Dial = %v\nwant the lookup that ran out of time (a *net.DNSError for zk.dsync-test.invalid) in it, as before c138abc", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dials) > 0 {
		t.Errorf("Dial connected to %v after its ctx was done", dials)
	}
	if late > time.Second {
		t.Errorf("Dial returned %v after its deadline (ctx ended while resolving; a *zk.Conn was started after it)", late)
	}
}

// TestReviewR16TLSEveryServerRefusedButOneUntried: WithTLS, two servers: A
// (by IP address) presents a certificate the client does not trust; zk2
// (by name) is a good server, but its record is missing when Dial runs.
// Dial leaves zk2 out, A refuses, and the connector, counting only the
// addresses left, calls that "refused by every server": Dial fails at once
// with ErrTLSHandshake, an error that says every server of [A zk2] refused
// the handshake (a wrong certificate "is not fixed by trying again") and
// says nothing of zk2, which was never tried and would have accepted. The
// name left out is only in a Warn line.
func TestReviewR16TLSEveryServerRefusedButOneUntried(t *testing.T) {
	t.Parallel()
	good := zktest.Start(t, zktest.WithTLS())
	stranger := zktest.Start(t, zktest.WithTLS()) // its own CA, which the client does not trust
	_, port, err := net.SplitHostPort(good.SecureAddr())
	if err != nil {
		t.Fatal(err)
	}
	dns := &fakeDNS{name: "zk2.r16.test"} // NXDOMAIN for now
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Dial(ctx, []string{stranger.SecureAddr(), "zk2.r16.test:" + port},
		WithTLS(good.TLSConfig()), WithResolver(dns.resolver()))
	if err == nil {
		s.Close()
		t.Fatal("Dial succeeded with zk2 unresolvable and the other server untrusted")
	}
	t.Logf("Dial = %v", err)
	var dnsErr *net.DNSError
	if errors.Is(err, ErrTLSHandshake) && !errors.As(err, &dnsErr) {
		t.Errorf("Dial = %v\nwant no claim that every server refused the handshake while zk2.r16.test was never tried (its name did not resolve), or at least that lookup's error in it", err)
	}
}
