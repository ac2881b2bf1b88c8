package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// rawCommand sends a four-letter word over a plain connection to addr and
// reads the reply until EOF or the read deadline.
func rawCommand(t *testing.T, addr, word string, wait time.Duration) (*net.TCPConn, string, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("Dial(%s) error: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, word); err != nil {
		t.Fatalf("write %s error: %v", word, err)
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	reply, err := io.ReadAll(conn)
	return conn.(*net.TCPConn), string(reply), err
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)

	if p.Addr() == s.Addr() || p.Target() != s.Addr() {
		t.Errorf("Addr() = %s, Target() = %s; want a new address and %s", p.Addr(), p.Target(), s.Addr())
	}
	if _, reply, err := rawCommand(t, p.Addr(), "ruok", 10*time.Second); err != nil || reply != "imok" {
		t.Errorf("ruok through the proxy = %q, %v; want imok, nil", reply, err)
	}

	c := connect(t, []string{p.Addr()}, 4*time.Second)
	c.waitState(ctx, t, zk.StateHasSession)
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns() with one client = %d; want 1", n)
	}
	before := p.Requests()
	if _, err := c.Create("/through", []byte("proxy"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create through the proxy error: %v", err)
	}
	data, _, err := c.Get("/through")
	if err != nil || string(data) != "proxy" {
		t.Errorf("Get through the proxy = %q, %v; want proxy, nil", data, err)
	}
	if n := p.Requests() - before; n != 2 {
		t.Errorf("Requests() grew by %d over a create and a get; want 2", n)
	}
	c.Close()
	// Closing the client ends its connection through the proxy.
	err = retry(ctx, func() error {
		if n := p.Conns(); n != 0 {
			return errors.New("connection still held")
		}
		return nil
	})
	if err != nil {
		t.Errorf("Conns() after the client closed: %v", err)
	}

	p.Close()
	p.Close() // idempotent
	if conn, err := net.Dial("tcp", p.Addr()); err == nil {
		conn.Close()
		t.Errorf("Dial(%s) after Close succeeded; want refused", p.Addr())
	}
}

func TestProxyCut(t *testing.T) {
	t.Parallel()
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)

	c := connect(t, []string{p.Addr()}, 4*time.Second)
	c.waitState(ctx, t, zk.StateHasSession)
	session := c.SessionID()

	p.Cut()
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns() right after Cut = %d; want 0", n)
	}
	// The client sees its connection go, reconnects through the proxy and
	// keeps its session.
	c.waitState(ctx, t, zk.StateDisconnected)
	c.waitState(ctx, t, zk.StateHasSession)
	if got := c.SessionID(); got != session {
		t.Errorf("SessionID() after Cut = %#x; want the same session %#x", got, session)
	}
	if _, _, err := c.Exists("/"); err != nil {
		t.Errorf("Exists(/) after Cut error: %v", err)
	}
}

func TestProxyBlackHoleHeal(t *testing.T) {
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)

	c := connect(t, []string{p.Addr()}, 2*time.Second)
	c.waitState(ctx, t, zk.StateHasSession)

	p.BlackHole()

	// A new connection is accepted and held, but nothing comes back.
	held, reply, err := rawCommand(t, p.Addr(), "ruok", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ruok into the black hole = %q, %v; want no reply until the read deadline", reply, err)
	}
	err = retry(ctx, func() error {
		if n := p.Conns(); n < 2 {
			return fmt.Errorf("Conns() = %d", n)
		}
		return nil
	})
	if err != nil {
		t.Errorf("want the client's connection and ours held in the black hole; %v", err)
	}

	// A request gets no answer: the client gives up on the connection after
	// two thirds of its session timeout and fails the request, which never
	// reached the server.
	if _, err := c.Create("/lost", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Create(/lost) in the black hole error = %v; want zk.ErrConnectionClosed", err)
	}
	c.waitState(ctx, t, zk.StateDisconnected)

	p.Heal()

	// Connections from the black hole are closed: ours sees EOF now.
	held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := held.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read on a black-holed connection after Heal = %d, %v; want 0, EOF", n, err)
	}
	// The client gets through again (with its session, or a new one if it
	// expired meanwhile), and finds that /lost was never created.
	assertNeverCreated(ctx, t, c, "/lost")
	if reply, err := s.Command(ctx, "ruok"); err != nil || reply != "imok" {
		t.Errorf(`server's Command("ruok") = %q, %v; want "imok", nil`, reply, err)
	}
	if _, reply, err := rawCommand(t, p.Addr(), "ruok", 10*time.Second); err != nil || reply != "imok" {
		t.Errorf("ruok through the healed proxy = %q, %v; want imok, nil", reply, err)
	}
}

// TestProxyBlackHoleAfterPing: the partition begins right after a ping
// reply, so the client's last reply is that one: go-zookeeper gives the
// connection up no sooner than two thirds of the session timeout after the
// time the channel gives (it failed so when the partition was aimed by the
// server's record of its last reply, and the reply was still in the proxy).
func TestProxyBlackHoleAfterPing(t *testing.T) {
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)
	const timeout = 3 * time.Second // pings every second
	c := connect(t, []string{p.Addr()}, timeout)
	c.waitState(ctx, t, zk.StateHasSession)

	var at time.Time
	select {
	case at = <-p.BlackHoleAfterPing():
	case <-ctx.Done():
		t.Fatal("no ping reply went through the proxy")
	}
	// A request gets no answer: it does not reach the server.
	if _, err := c.Create("/after-ping", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Create(/after-ping) in the black hole error = %v; want zk.ErrConnectionClosed", err)
	}
	c.waitState(ctx, t, zk.StateDisconnected)
	if gone, earliest := time.Now(), at.Add(2*timeout/3); gone.Before(earliest) {
		t.Errorf("the client gave its connection up %v after the ping reply; it reads nothing after that reply for %v", gone.Sub(at), 2*timeout/3)
	}
	p.Heal()
	assertNeverCreated(ctx, t, c, "/after-ping")
}

// TestProxyCutAtPing: the connection is cut as the client's next ping
// arrives, and the proxy forwards the connection the client makes next: the
// same session comes back.
func TestProxyCutAtPing(t *testing.T) {
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)
	c := connect(t, []string{p.Addr()}, 3*time.Second) // pings every second
	c.waitState(ctx, t, zk.StateHasSession)
	id := c.SessionID()
	select {
	case <-p.CutAtPing():
	case <-ctx.Done():
		t.Fatal("no ping reached the proxy")
	}
	c.waitState(ctx, t, zk.StateDisconnected)
	c.waitState(ctx, t, zk.StateHasSession)
	if got := c.SessionID(); got != id {
		t.Fatalf("session %#x after the cut; want %#x back", got, id)
	}
}

// assertNeverCreated checks, once c gets through after a Heal (with its
// session, or a new one), that path, created into a black hole, does not
// exist.
func assertNeverCreated(ctx context.Context, t *testing.T, c *client, path string) {
	t.Helper()
	err := retry(ctx, func() error {
		ok, _, err := c.Exists(path)
		if err == nil && ok {
			t.Fatalf("Exists(%s) = true; a request crossed the black hole", path)
		}
		return err
	})
	if err != nil {
		t.Errorf("Exists(%s) after Heal error: %v", path, err)
	}
}

func TestProxyDropReplies(t *testing.T) {
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)

	c := connect(t, []string{p.Addr()}, 2*time.Second)
	c.waitState(ctx, t, zk.StateHasSession)
	observer := connect(t, []string{s.Addr()}, 4*time.Second)

	p.DropReplies()

	// The server answers and closes, but neither gets through.
	held, reply, err := rawCommand(t, p.Addr(), "ruok", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ruok with replies dropped = %q, %v; want no reply until the read deadline", reply, err)
	}

	// The request takes effect; its reply is lost, and the client gives up
	// on the connection after two thirds of its session timeout.
	if _, err := c.Create("/sent", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Create(/sent) with replies dropped error = %v; want zk.ErrConnectionClosed", err)
	}
	if ok, _, err := observer.Exists("/sent"); err != nil || !ok {
		t.Errorf("observer's Exists(/sent) = %v, %v; want true, nil: the request should reach the server", ok, err)
	}

	p.Heal()
	held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := held.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read on a connection with replies dropped, after Heal = %d, %v; want 0, EOF", n, err)
	}
	err = retry(ctx, func() error {
		_, _, err := c.Exists("/sent")
		return err
	})
	if err != nil {
		t.Errorf("Exists(/sent) after Heal error: %v", err)
	}
}

// TestProxyDeafen checks the one-way partition: a request goes nowhere and
// gets no reply, while a notification of a watch set before still arrives.
func TestProxyDeafen(t *testing.T) {
	s := zktest.Start(t)
	p := zktest.NewProxy(t, s.Addr())
	ctx := testContext(t, time.Minute)

	c := connect(t, []string{p.Addr()}, 2*time.Second)
	c.waitState(ctx, t, zk.StateHasSession)
	observer := connect(t, []string{s.Addr()}, 4*time.Second)
	_, _, watch, err := c.ExistsW("/told")
	if err != nil {
		t.Fatal(err)
	}

	p.Deafen()

	if _, err := observer.Create("/told", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNodeCreated || ev.Path != "/told" {
			t.Errorf("watch event while deafened = %+v; want NodeCreated at /told", ev)
		}
	case <-ctx.Done():
		t.Fatal("no notification while deafened")
	}
	// Nothing more comes back: the client gives up on the connection after
	// two thirds of its session timeout, and the request never arrived.
	if _, err := c.Create("/unheard", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Create(/unheard) while deafened error = %v; want zk.ErrConnectionClosed", err)
	}
	if ok, _, err := observer.Exists("/unheard"); err != nil || ok {
		t.Errorf("observer's Exists(/unheard) = %v, %v; want false, nil: the request should not reach the server", ok, err)
	}
	// A new connection goes nowhere either.
	_, reply, err := rawCommand(t, p.Addr(), "ruok", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ruok while deafened = %q, %v; want no reply until the read deadline", reply, err)
	}

	p.Heal()
	err = retry(ctx, func() error {
		_, _, err := c.Exists("/told")
		return err
	})
	if err != nil {
		t.Errorf("Exists(/told) after Heal error: %v", err)
	}
}

// TestProxyCloseReleasesHeldConns checks that Close ends connections in a
// black hole and waits for their goroutines (goleak checks the rest).
func TestProxyCloseReleasesHeldConns(t *testing.T) {
	// A target that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	p, err := zktest.StartProxy(ln.Addr().String())
	if err != nil {
		t.Fatalf("StartProxy() error: %v", err)
	}
	forwarded, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer forwarded.Close()
	upstream, err := ln.Accept() // the proxy dialed the target
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()

	p.BlackHole()
	holed, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer holed.Close()
	// Close what the proxy holds, not what waits in the listen queue.
	err = retry(testContext(t, time.Minute), func() error {
		if n := p.Conns(); n != 2 {
			return fmt.Errorf("Conns() = %d", n)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("want both connections held: %v", err)
	}

	done := make(chan struct{})
	go func() {
		p.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close() did not return")
	}
	for name, conn := range map[string]net.Conn{"forwarded": forwarded, "black-holed": holed, "upstream": upstream} {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("Read on the %s connection after Close error = %v; want EOF", name, err)
		}
	}
}
