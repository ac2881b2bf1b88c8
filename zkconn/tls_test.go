package zkconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestTLSSession: a Session WithTLS works on a server's secure port; the
// wire taps the TLS connection, so it reads the frames in the clear (it
// learns the timeout the server granted); after a restart of the server the
// Session reconnects over TLS to the same ZooKeeper session.
func TestTLSSession(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	ctx := context.Background()
	s := dial(t, []string{srv.SecureAddr()}, WithTLS(srv.TLSConfig()), WithSessionTimeout(time.Minute))
	if got, want := s.SessionTimeout(), zktest.DefaultMaxSessionTimeout; got != want {
		t.Errorf("SessionTimeout() = %v; want %v, as granted in the connect response read through TLS", got, want)
	}
	h := current(t, s)
	node, err := h.CreateProtected(ctx, testRoot(t), "lock-", []byte("secure"))
	if err != nil {
		t.Fatalf("CreateProtected over TLS: %v", err)
	}
	if rtt := s.cur.wire.RoundTrip(); rtt <= 0 {
		t.Errorf("wire round trip = %v; want replies read through TLS", rtt)
	}
	obs := zktest.Observer(t, srv.Addr()) // the plain port: the same tree
	if data, _, err := obs.Get(node); err != nil || string(data) != "secure" {
		t.Fatalf("Get(%s) on the plain port = %q, %v; want secure", node, data, err)
	}

	restart(t, s, srv)
	h2 := current(t, s)
	if h2.ID() != h.ID() {
		t.Errorf("session after restart = %#x; want the same %#x", h2.ID(), h.ID())
	}
	if _, _, err := h2.Conn().Get(node); err != nil {
		t.Errorf("Get(%s) after reconnecting over TLS: %v", node, err)
	}
}

// restart stops srv and starts it again, and returns once s, suspended
// meanwhile, has reconnected to the same ZooKeeper session.
func restart(t *testing.T, s *Session, srv *zktest.Server) {
	t.Helper()
	sub := s.Subscribe()
	defer sub.Stop()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	await(t, sub, StateSuspended, 30*time.Second)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	await(t, sub, StateReconnected, 30*time.Second)
}

// TestTLSHandshakes runs the tests of handshakes on one server.
func TestTLSHandshakes(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	t.Run("ServerName", func(t *testing.T) { testTLSServerName(t, srv) })
	t.Run("Refused", func(t *testing.T) { testTLSRefused(t, srv) })
	t.Run("DialDeadline", func(t *testing.T) { testTLSDialDeadline(t, srv) })
	t.Run("RefusalWhileLoggerBlocked", func(t *testing.T) { testTLSRefusalLoggerBlocked(t, srv) })
}

// testTLSRefusalLoggerBlocked: a server that refuses the TLS handshake is
// logged at Warn, and a logger blocked on that line (a sink the outage cut
// off) keeps the Session neither from connecting to another server nor
// from reconnecting there after that server restarts. The Session is given
// a server that answers TLS with garbage (refused) and srv, so whichever
// go-zookeeper tries first, it tries the refusing one before it reconnects.
func testTLSRefusalLoggerBlocked(t *testing.T, srv *zktest.Server) {
	refusing := listener(t, []byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
	g := newLogGate("zkconn: TLS handshake refused")
	var s *Session
	t.Cleanup(func() {
		close(g.release) // before Close, which waits for the logger
		if s != nil {
			s.Close()
		}
	})
	connected := make(chan *Session, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := Dial(ctx, []string{refusing, srv.SecureAddr()}, WithTLS(srv.TLSConfig()),
			WithSessionTimeout(time.Minute), WithLogger(slog.New(g)))
		if err != nil {
			t.Errorf("Dial: %v", err)
		}
		connected <- s
	}()
	select {
	case s = <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("Dial did not return in 30s with the logger blocked on the refusal")
	}
	if s == nil {
		t.FailNow()
	}
	restart(t, s, srv)
	select {
	case <-g.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the refusal never reached the logger")
	}
}

// testTLSServerName: a server's certificate is verified against the host
// as given to Dial, before it is looked up: "localhost" (named by the
// certificate) works; a ServerName it does not name is refused.
func testTLSServerName(t *testing.T, srv *zktest.Server) {
	_, port, err := net.SplitHostPort(srv.SecureAddr())
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, []string{net.JoinHostPort("localhost", port)}, WithTLS(srv.TLSConfig()))
	if _, err := current(t, s).CreateProtected(context.Background(), testRoot(t), "lock-", nil); err != nil {
		t.Fatalf("CreateProtected via localhost: %v", err)
	}

	cfg := srv.TLSConfig()
	cfg.ServerName = "zk.example"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s, err := Dial(ctx, []string{srv.SecureAddr()}, WithTLS(cfg)); !errors.Is(err, ErrTLSHandshake) || !strings.Contains(err.Error(), "zk.example") {
		if err == nil {
			s.Close()
		}
		t.Errorf("Dial with ServerName zk.example = %v; want ErrTLSHandshake naming zk.example", err)
	}
}

// TestResolveNames: the addresses a name resolves to remember the name, for
// TLS to verify; an IP address needs nothing remembered.
func TestResolveNames(t *testing.T) {
	r := resolve(context.Background(), net.DefaultResolver, []string{"localhost:2281", "10.0.0.1:2281"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	var c connector
	c.names = r.names
	for _, a := range r.addrs {
		want := "localhost"
		if a == "10.0.0.1:2281" {
			want = "10.0.0.1"
		}
		if got := c.serverName(a); got != want {
			t.Errorf("serverName(%s) = %q; want %q", a, got, want)
		}
	}
}

// testTLSRefused: a client the server refuses (no certificate, or one
// signed by another CA), or that refuses the server (its certificate is
// signed by a CA the client does not trust), fails Dial at once with
// ErrTLSHandshake and a message that says why, well before Dial's deadline.
func testTLSRefused(t *testing.T, srv *zktest.Server) {
	misfits, err := zktest.MisfitTLSConfigs(srv.TLSConfig(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wants := map[string]string{ // in the error
		"no client certificate":            "presented no certificate",
		"client certificate of another CA": "certificate",
		"server certificate of another CA": "certificate signed by unknown authority",
	}
	if len(misfits) != len(wants) {
		t.Fatalf("%d misfit configurations; want %d", len(misfits), len(wants))
	}
	for _, m := range misfits {
		want := wants[m.Name]
		if want == "" {
			t.Fatalf("misfit %q: no expected error", m.Name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var log bytes.Buffer // written by the Session's log goroutine, which Dial's return follows
		s, err := Dial(ctx, []string{srv.SecureAddr()}, WithTLS(m.Config), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		cancel()
		if line := "TLS handshake refused\" server=" + srv.SecureAddr(); !strings.Contains(log.String(), line) {
			t.Errorf("%s: log after Dial returned:\n%s\nwant a line with %q", m.Name, log.String(), line)
		}
		if err == nil {
			s.Close()
			t.Errorf("%s: Dial succeeded; want ErrTLSHandshake", m.Name)
			continue
		}
		t.Logf("%s: %v", m.Name, err)
		if !errors.Is(err, ErrTLSHandshake) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Dial = %v; want ErrTLSHandshake, not the deadline", m.Name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "TLS handshake") || !strings.Contains(msg, want) {
			t.Errorf("%s: Dial error %q; want it to say TLS handshake and %q", m.Name, msg, want)
		}
	}
}

// testTLSDialDeadline: where not every server refuses the handshake (a
// plain port closes it, another server is down, one accepts TCP and never
// answers), Dial returns by its ctx's deadline, with the deadline's error
// and how the last attempt on each server failed.
func testTLSDialDeadline(t *testing.T, srv *zktest.Server) {
	noCert := srv.TLSConfig()
	noCert.Certificates = nil
	silent := silentListener(t)
	down := closedPort(t)
	for _, tt := range []struct {
		name    string
		servers []string
		cfg     *tls.Config
		want    string // in the error
	}{
		{"plain port", []string{srv.Addr()}, srv.TLSConfig(), "TLS handshake with " + srv.Addr() + ": EOF"},
		{"silent server", []string{silent}, srv.TLSConfig(), "TLS handshake with " + silent + ": no answer"},
		{"one refuses, one down", []string{srv.SecureAddr(), down}, noCert, "connection attempts"},
	} {
		const deadline = 3 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		done := make(chan error, 1)
		go func() {
			s, err := Dial(ctx, tt.servers, WithTLS(tt.cfg))
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(deadline + 20*time.Second):
			t.Fatalf("%s: Dial did not return within 20s of its deadline", tt.name)
		}
		cancel()
		t.Logf("%s: %v", tt.name, err)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Dial = %v; want context.DeadlineExceeded and %q", tt.name, err, tt.want)
		}
	}
}

// TestTLSNilConfig: WithTLS(nil) fails Dial; it never means plain TCP.
func TestTLSNilConfig(t *testing.T) {
	s, err := Dial(context.Background(), []string{shared.Addr()}, WithTLS(nil))
	if err == nil {
		s.Close()
		t.Fatal("Dial with WithTLS(nil) succeeded; want an error")
	}
	if !strings.Contains(err.Error(), "nil TLS config") {
		t.Errorf("Dial with WithTLS(nil) = %v; want nil TLS config", err)
	}
}

// TestTLSEnsemble: a Session WithTLS works on an ensemble's secure ports,
// and moves to another member over TLS when its member stops.
func TestTLSEnsemble(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t, 3, zktest.WithTLS())
	addrs := e.SecureAddrs()
	if len(addrs) != 3 {
		t.Fatalf("SecureAddrs() = %v; want 3", addrs)
	}
	s := dial(t, addrs, WithTLS(e.Server(0).TLSConfig()))
	h := current(t, s)
	if _, err := h.CreateProtected(context.Background(), testRoot(t), "lock-", nil); err != nil {
		t.Fatalf("CreateProtected over TLS: %v", err)
	}
	sub := s.Subscribe()
	defer sub.Stop()
	at := h.Conn().Server()
	for i, a := range addrs {
		if a == at {
			if err := e.Server(i).Stop(); err != nil {
				t.Fatal(err)
			}
		}
	}
	await(t, sub, StateReconnected, time.Minute)
	if got := current(t, s).Conn().Server(); got == at {
		t.Errorf("reconnected to %s, which is stopped", got)
	}
}

// silentListener accepts connections on 127.0.0.1 and never writes; the
// test's cleanup closes it and them.
func silentListener(t *testing.T) string { return listener(t, nil) }

// listener accepts connections on 127.0.0.1, writes greeting to each, and
// then reads nothing; the test's cleanup closes it and them.
func listener(t *testing.T, greeting []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if len(greeting) > 0 {
				_, _ = c.Write(greeting)
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// closedPort returns an address of 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
