package zktest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

func TestServerCommands(t *testing.T) {
	t.Parallel()
	s := zktest.Start(t)
	ctx := testContext(t, time.Minute)

	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q; want 127.0.0.1:port", s.Addr())
	}
	if s.SecureAddr() != "" || s.TLSConfig() != nil || s.ClientTLS() != (zktest.TLSFiles{}) {
		t.Errorf("without WithTLS: SecureAddr() = %q, TLSConfig() = %v, ClientTLS() = %v; want none", s.SecureAddr(), s.TLSConfig(), s.ClientTLS())
	}

	reply, err := s.Command(ctx, "ruok")
	if err != nil || reply != "imok" {
		t.Errorf(`Command("ruok") = %q, %v; want "imok", nil`, reply, err)
	}

	mode, err := s.Mode(ctx)
	if err != nil || mode != "standalone" {
		t.Errorf("Mode() = %q, %v; want standalone, nil", mode, err)
	}

	m, err := s.Mntr(ctx)
	if err != nil {
		t.Fatalf("Mntr() error: %v", err)
	}
	if got := m["zk_server_state"]; got != "standalone" {
		t.Errorf("Mntr()[zk_server_state] = %q; want standalone", got)
	}
	if !strings.HasPrefix(m["zk_version"], "3.") {
		t.Errorf("Mntr()[zk_version] = %q; want 3.x", m["zk_version"])
	}
	if n, err := strconv.Atoi(m["zk_znode_count"]); err != nil || n < 1 {
		t.Errorf("Mntr()[zk_znode_count] = %q; want a count >= 1", m["zk_znode_count"])
	}

	// The defaults reach the server.
	conf, err := s.Command(ctx, "conf")
	if err != nil {
		t.Fatalf(`Command("conf") error: %v`, err)
	}
	for _, want := range []string{"tickTime=200\n", "minSessionTimeout=400\n", "maxSessionTimeout=30000\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("conf reply lacks %q:\n%s", want, conf)
		}
	}

	// The log is in the server's file, and is ZooKeeper's (a logger is bound).
	if log := s.Log(); !strings.Contains(log, "binding to port /127.0.0.1:") {
		t.Errorf("Log() lacks ZooKeeper's start-up lines; got:\n%s", log)
	}

	// A client works.
	c := connect(t, []string{s.Addr()}, 4*time.Second)
	if _, err := c.Create("/hello", []byte("world"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(/hello) error: %v", err)
	}
	data, _, err := c.Get("/hello")
	if err != nil || string(data) != "world" {
		t.Errorf("Get(/hello) = %q, %v; want world, nil", data, err)
	}

	// A context that is done fails before any I/O.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Command(done, "ruok"); !errors.Is(err, context.Canceled) {
		t.Errorf("Command(canceled ctx) error = %v; want context.Canceled", err)
	}
}

func TestServerOptions(t *testing.T) {
	t.Parallel()
	s := zktest.Start(t,
		zktest.WithTickTime(100*time.Millisecond),
		zktest.WithMinSessionTimeout(250*time.Millisecond),
		zktest.WithMaxSessionTimeout(5*time.Second),
		zktest.WithSystemProperty("zookeeper.maxBatchSize", "777"),
		zktest.WithSystemProperty("zookeeper.maxBatchSize", "778"), // the last wins
	)
	ctx := testContext(t, time.Minute)

	conf, err := s.Command(ctx, "conf")
	if err != nil {
		t.Fatalf(`Command("conf") error: %v`, err)
	}
	for _, want := range []string{"tickTime=100\n", "minSessionTimeout=250\n", "maxSessionTimeout=5000\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("conf reply lacks %q:\n%s", want, conf)
		}
	}
	// ZooKeeper logs the property it read.
	if log := s.Log(); !strings.Contains(log, "zookeeper.maxBatchSize=778") {
		t.Errorf("Log() lacks zookeeper.maxBatchSize=778; got:\n%s", log)
	}
}

func TestServerStopRestartKeepsData(t *testing.T) {
	s := zktest.Start(t)
	ctx := testContext(t, time.Minute)
	addr := s.Addr()

	c := connect(t, []string{addr}, 4*time.Second)
	if _, err := c.Create("/kept", []byte("across restarts"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(/kept) error: %v", err)
	}
	c.Close()

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop() error: %v", err)
	}
	if reply, err := s.Command(ctx, "ruok"); err == nil {
		t.Fatalf(`Command("ruok") after Stop = %q, nil; want an error`, reply)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop() error: %v; want nil", err)
	}
	if err := s.Pause(); !errors.Is(err, zktest.ErrNotRunning) {
		t.Errorf("Pause() of a stopped server error = %v; want ErrNotRunning", err)
	}

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart() error: %v", err)
	}
	if s.Addr() != addr {
		t.Errorf("Addr() after Restart = %q; want %q", s.Addr(), addr)
	}
	c2 := connect(t, []string{s.Addr()}, 4*time.Second)
	data, _, err := c2.Get("/kept")
	if err != nil || string(data) != "across restarts" {
		t.Errorf("Get(/kept) after Restart = %q, %v; want %q, nil", data, err, "across restarts")
	}
	c2.Close()

	// Restart of a running server bounces it.
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart() of a running server error: %v", err)
	}
	if mode, err := s.Mode(ctx); err != nil || mode != "standalone" {
		t.Errorf("Mode() after bounce = %q, %v; want standalone, nil", mode, err)
	}

	// After Close everything says so.
	if err := s.Close(); err != nil {
		t.Fatalf("Close() error: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() error: %v; want nil", err)
	}
	for name, err := range map[string]error{
		"Restart": s.Restart(),
		"Stop":    s.Stop(),
		"Pause":   s.Pause(),
		"Resume":  s.Resume(),
	} {
		if !errors.Is(err, zktest.ErrClosed) {
			t.Errorf("%s() after Close error = %v; want ErrClosed", name, err)
		}
	}
	if _, err := s.Command(ctx, "ruok"); !errors.Is(err, zktest.ErrClosed) {
		t.Errorf("Command() after Close error = %v; want ErrClosed", err)
	}
}

func TestServerPauseResume(t *testing.T) {
	s := zktest.Start(t)
	ctx := testContext(t, time.Minute)

	c := connect(t, []string{s.Addr()}, 2*time.Second)
	c.waitState(ctx, t, zk.StateHasSession)
	if _, err := c.Create("/p", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(/p) error: %v", err)
	}

	if err := s.Pause(); err != nil {
		t.Fatalf("Pause() error: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Errorf("second Pause() error: %v; want nil", err)
	}

	// The port still accepts, but nothing answers.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	reply, err := s.Command(short, "ruok")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf(`Command("ruok") while paused = %q, %v; want context.DeadlineExceeded`, reply, err)
	}

	// A request gets no answer: the client gives up on the connection after
	// two thirds of its session timeout and fails the request.
	if _, _, err := c.Get("/p"); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Get(/p) while paused error = %v; want zk.ErrConnectionClosed", err)
	}
	c.waitState(ctx, t, zk.StateDisconnected)

	if err := s.Resume(); err != nil {
		t.Fatalf("Resume() error: %v", err)
	}
	if reply, err := s.Command(ctx, "ruok"); err != nil || reply != "imok" {
		t.Errorf(`Command("ruok") after Resume = %q, %v; want "imok", nil`, reply, err)
	}
	// The client comes back (its session may have expired meanwhile; zk then
	// makes a new one).
	err = retry(ctx, func() error {
		_, _, err := c.Get("/p")
		return err
	})
	if err != nil {
		t.Errorf("Get(/p) after Resume error: %v", err)
	}
}

// TestWatches: Watches reads the server's watch table, a path and the
// sessions watching it.
func TestWatches(t *testing.T) {
	srv := zktest.Start(t)
	c := zktest.Observer(t, srv.Addr())
	if _, _, _, err := c.ExistsW("/zktest-watched"); err != nil {
		t.Fatal(err)
	}
	m, err := srv.Watches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ids := m["/zktest-watched"]; len(ids) != 1 || ids[0] != c.SessionID() {
		t.Fatalf("Watches = %v; want /zktest-watched watched by %#x", m, c.SessionID())
	}
	watched := func(m map[string][]int64) bool { return len(m["/zktest-watched"]) == 1 }
	if err := srv.AwaitWatches(context.Background(), watched); err != nil {
		t.Fatalf("AwaitWatches of a watch set = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	never := func(map[string][]int64) bool { return false }
	if err := srv.AwaitWatches(ctx, never); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitWatches of what never comes = %v; want %v", err, context.DeadlineExceeded)
	}
}

// TestServerRestartPastHeldPort: a Restart whose port is held when the JVM
// binds tries again while the port stays the same, and serves once the
// port is let go; it does not take what holds the port for its server,
// even when that answers ruok, srvr and conf as a server would (another
// process's, from another data directory): it waits until its JVM serves
// from its own directory.
func TestServerRestartPastHeldPort(t *testing.T) {
	s := zktest.Start(t)
	for _, answers := range []map[string]string{
		nil, // a socket that answers nothing
		{
			"ruok": "imok",
			"srvr": "Zookeeper version: 3.8.0\nMode: standalone\n",
			"conf": "clientPort=1\ndataDir=/elsewhere/data/version-2\n",
		},
	} {
		t.Run(map[bool]string{true: "Silent", false: "AnotherServer"}[answers == nil], func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			if err := s.Stop(); err != nil {
				t.Fatalf("Stop() error: %v", err)
			}
			before := len(s.Log())
			ln, err := net.Listen("tcp", s.Addr())
			if err != nil {
				t.Fatalf("holding the port: %v", err)
			}
			defer ln.Close()
			served := make(chan struct{})
			go func() {
				defer close(served)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					word := make([]byte, 4)
					if _, err := io.ReadFull(c, word); err == nil {
						io.WriteString(c, answers[string(word)])
					}
					c.Close()
				}
			}()
			restarted := make(chan error, 1)
			go func() { restarted <- s.Restart() }()
			// Let go once a JVM has failed to bind (its log says so).
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for !strings.Contains(s.Log()[before:], "Address already in use") {
				select {
				case err := <-restarted:
					t.Fatalf("Restart() = %v while its port was held", err)
				case <-ctx.Done():
					t.Fatal("no JVM found its port held")
				case <-tick.C:
				}
			}
			ln.Close()
			<-served
			select {
			case err := <-restarted:
				if err != nil {
					t.Fatalf("Restart() = %v; want it served once the port was free", err)
				}
			case <-ctx.Done():
				t.Fatal("Restart() did not return")
			}
			if reply, err := s.Command(ctx, "conf"); err != nil || strings.Contains(reply, "/elsewhere/") {
				t.Fatalf(`Command("conf") = %q, %v; want the restarted server's`, reply, err)
			}
		})
	}
}
