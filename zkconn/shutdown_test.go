package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// shutdownSetup dials a Session with session timeout T through a proxy to
// the shared server, and makes an ephemeral node in it.
func shutdownSetup(t *testing.T, T time.Duration, opts ...Option) (p *zktest.Proxy, s *Session, h Handle, obs *zk.Conn, node string) {
	t.Helper()
	p = zktest.NewProxy(t, shared.Addr())
	s = dial(t, []string{p.Addr()}, append([]Option{WithSessionTimeout(T)}, opts...)...)
	h = current(t, s)
	obs = zktest.Observer(t, shared.Addr())
	root := testRoot(t)
	if err := h.CreateParents(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	node = root + "/n"
	if _, err := h.Conn().Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return p, s, h, obs, node
}

// unreachable dials a Session with the session timeout given, through a
// proxy that it then closes, and returns it once suspended.
func unreachable(t *testing.T, timeout time.Duration) (*Session, *Subscription) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(timeout))
	sub := s.Subscribe()
	p.Close()
	await(t, sub, StateSuspended, time.Minute)
	return s, sub
}

// awaitStrike waits, a minute at most, for f to strike what.
func awaitStrike(t *testing.T, f *zktest.Fault, what string) {
	t.Helper()
	select {
	case <-f.Struck():
	case <-time.After(time.Minute):
		t.Fatalf("%s was not struck within a minute", what)
	}
}

// cutDelete starts h's delete of node and returns once the proxy has cut
// its connection as the delete went out (the delete not applied).
func cutDelete(t *testing.T, p *zktest.Proxy, h Handle, node string) {
	t.Helper()
	cut := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.Cut)
	h.Delete(node)
	awaitStrike(t, cut, "the delete")
}

// goShutdown runs s.Shutdown(ctx) on a goroutine; result waits a minute at
// most for what it returned.
func goShutdown(t *testing.T, ctx context.Context, s *Session) (result func() error) {
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	return func() error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("Shutdown did not return within a minute")
			return nil
		}
	}
}

// closed fails the test unless s is closed.
func closed(t *testing.T, s *Session) {
	t.Helper()
	if st := s.State(); st != StateClosed {
		t.Errorf("State after Shutdown = %v; want %v", st, StateClosed)
	}
}

// gone fails the test unless the node at path is gone now.
func gone(t *testing.T, obs *zk.Conn, path, when string) {
	t.Helper()
	there, _, err := obs.Exists(path)
	if err != nil || there {
		t.Errorf("%s: %s there = %v, %v; want it gone", when, path, there, err)
	}
}

// TestShutdownSettlesCutDelete: a delete under way when Shutdown is
// called, cut with its connection, is sent again on the next one before
// the session ends. Close, with the connection down then, ends the Session
// without telling the server: the node (a released lock's) stayed until the
// server expired the session.
func TestShutdownSettlesCutDelete(t *testing.T) {
	t.Parallel()
	p, s, h, obs, node := shutdownSetup(t, 20*time.Second)
	cutDelete(t, p, h, node)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	gone(t, obs, node, "after Shutdown")
}

// TestShutdownWhileSuspended: Shutdown called while the connection is down
// and the session alive waits for the reconnection and ends the session
// there, so its ephemeral nodes go at once.
func TestShutdownWhileSuspended(t *testing.T) {
	t.Parallel()
	p, s, _, obs, node := shutdownSetup(t, 20*time.Second)
	sub := s.Subscribe()
	p.Cut()
	await(t, sub, StateSuspended, time.Minute)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	gone(t, obs, node, "after Shutdown")
}

// TestShutdownUnreachable: with no server to reach, Shutdown waits until
// the Session gives the session up (Lost), then closes; or, if its ctx ends
// first, closes then and returns ctx's error.
func TestShutdownUnreachable(t *testing.T) {
	t.Parallel()
	t.Run("session ends", func(t *testing.T) {
		t.Parallel()
		s, sub := unreachable(t, 2*time.Second)
		result := goShutdown(t, context.Background(), s)
		await(t, sub, StateLost, time.Minute)
		if err := result(); err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		closed(t, s)
	})
	t.Run("ctx ends", func(t *testing.T) {
		t.Parallel()
		s, _ := unreachable(t, 20*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := goShutdown(t, ctx, s)(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v; want context.DeadlineExceeded", err)
		}
		closed(t, s)
	})
}
