package zkconn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// deadUnnoticed makes h's connection dead (a black hole from a request
// on) and returns once that request is struck, with a channel that gets
// its error once go-zookeeper notices: two thirds of the session timeout
// after it last heard from the server.
func deadUnnoticed(t *testing.T, p *zktest.Proxy, h Handle, node string) <-chan error {
	t.Helper()
	f := p.Strike(zktest.Match{Op: zktest.OpExists, Path: node + "-probe"}, zktest.BlackHole)
	probe := make(chan error, 1)
	go func() {
		_, _, err := h.Conn().Exists(node + "-probe")
		probe <- err
	}()
	awaitStrike(t, f, "the probe")
	return probe
}

// TestReviewR83ShutdownDeadConnectionUnnoticed: the connection dies
// (black hole: nothing more reaches the server, nothing comes back) and
// go-zookeeper has not noticed yet (it notices after two thirds of the
// session timeout): the Session's state is still Connected. Shutdown,
// called then, used to see a connection and nothing pending, and close at
// once: its closeSession went into the dead connection, and the session's
// ephemeral node stayed until the server expired the session. Its round
// trip (a Sync through Do, which waits through the reconnection) now finds
// the connection dead, and Close ends the session on the next one. Serial:
// the state is checked before go-zookeeper notices.
func TestReviewR83ShutdownDeadConnectionUnnoticed(t *testing.T) {
	const T = 8 * time.Second // go-zookeeper notices after 2T/3: time to check the state before
	p, s, h, obs, node := shutdownSetup(t, T)
	probe := deadUnnoticed(t, p, h, node)
	if st := s.State(); st != StateConnected {
		t.Fatalf("state at Shutdown = %v; want %v (the black hole unnoticed)", st, StateConnected)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	<-probe
	gone(t, obs, node, "after Shutdown")
}

// TestReviewR83ShutdownDroppedDelete: a delete under way whose reply is
// swallowed (Drop: applied, the connection stays up) holds Shutdown until
// the Session closes the connection (at the next reply) and the retry finds
// the node gone; Shutdown then returns nil within the session timeout.
func TestReviewR83ShutdownDroppedDelete(t *testing.T) {
	t.Parallel()
	const T = 4 * time.Second
	p, s, h, obs, node := shutdownSetup(t, T)
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.Drop)
	h.Delete(node)
	awaitStrike(t, f, "the delete")
	ctx, cancel := context.WithTimeout(context.Background(), 3*T)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	gone(t, obs, node, "after Shutdown")
}

// TestReviewR83ShutdownCutTwiceThenUnreachable: the delete is cut, cut
// again on the next connection, and then no server can be reached:
// Shutdown (ctx that never ends) returns once the Session gives the session
// up, within the session timeout of the last contact and a little.
func TestReviewR83ShutdownCutTwiceThenUnreachable(t *testing.T) {
	const T = 3 * time.Second
	p, s, h, _, node := shutdownSetup(t, T)
	sub := s.Subscribe()
	defer sub.Stop()
	cutDelete(t, p, h, node)
	await(t, sub, StateSuspended, time.Minute)
	f2 := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, zktest.Cut)
	start := time.Now()
	result := goShutdown(t, context.Background(), s)
	awaitStrike(t, f2, "the retry")
	p.Close()
	err := result()
	d := time.Since(start)
	t.Logf("Shutdown = %v after %v", err, d)
	if err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if d > T+3*time.Second {
		t.Errorf("Shutdown took %v, session timeout %v", d, T)
	}
}

// TestReviewR83ShutdownRaces: while no server can be reached, Shutdown
// (ctx never ending), a second Shutdown and Close all return once Close
// has; a Shutdown of the closed Session returns nil at once.
func TestReviewR83ShutdownRaces(t *testing.T) {
	s, _ := unreachable(t, 20*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Shutdown(context.Background())
		}()
	}
	s.Close()
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdowns did not return within 10s of a concurrent Close")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Shutdown = %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown of a closed Session = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Shutdown of a closed Session took %v", d)
	}
}

// TestReviewR83ShutdownDoneCtxUnreachable measures how long Shutdown takes
// past a ctx that is already done, while no server can be reached (Close's
// own wait).
func TestReviewR83ShutdownDoneCtxUnreachable(t *testing.T) {
	s, _ := unreachable(t, 20*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	err := s.Shutdown(ctx)
	d := time.Since(start)
	t.Logf("Shutdown(done ctx) = %v after %v", err, d)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v; want context.Canceled", err)
	}
	if d > 3*time.Second {
		t.Errorf("Shutdown with a done ctx took %v", d)
	}
}

// TestReviewR83ShutdownGiveUpDropped: a protected create is given up (its
// ctx ends) while its reply is swallowed (Drop: the node is made, the
// connection stays up). Shutdown, called right after, must wait for the
// give-up's cleanup (the create returns once the Session closes the
// connection, then forgetProtected deletes the node on the next one), and
// return nil with the node gone, within the session timeout.
func TestReviewR83ShutdownGiveUpDropped(t *testing.T) {
	t.Parallel()
	const T = 4 * time.Second
	p, s, h, obs, node := shutdownSetup(t, T)
	parent := node[:len(node)-2]
	f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: parent + "/", Prefix: true}, zktest.Drop)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.CreateProtected(ctx, parent, "lock-", nil)
		done <- err
	}()
	awaitStrike(t, f, "the create")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateProtected = %v; want context.Canceled", err)
	}
	if len(h.Deleting(parent)) == 0 {
		t.Fatal("the give-up is not recorded")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 3*T)
	defer scancel()
	start := time.Now()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown = %v after %v", err, time.Since(start))
	}
	t.Logf("Shutdown took %v", time.Since(start))
	kids, _, err := obs.Children(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if k != "n" {
			t.Errorf("after Shutdown, %s/%s is left", parent, k)
		}
	}
}

// TestReviewR83ShutdownDigestAuth: with digest credentials, a delete cut
// with its connection is sent again on the next one (after go-zookeeper
// has sent the credentials again) before Shutdown closes.
func TestReviewR83ShutdownDigestAuth(t *testing.T) {
	t.Parallel()
	p, s, h, obs, node := shutdownSetup(t, 4*time.Second, WithDigestAuth("r83", "secret"))
	cutDelete(t, p, h, node)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	gone(t, obs, node, "after Shutdown")
}

// TestReviewR83ShutdownCtxOverrunDeadConnection: Shutdown whose ctx ends
// 100ms in, over a connection that died unnoticed (black hole): its round
// trip waits until ctx ends, and Close then waits go-zookeeper's second for
// the reply to the end of the session, which cannot come. Shutdown returns
// ctx's error within that second (and slack) of ctx's end. Serial: it
// bounds a duration.
func TestReviewR83ShutdownCtxOverrunDeadConnection(t *testing.T) {
	const T = 4 * time.Second
	p, s, h, _, node := shutdownSetup(t, T)
	probe := deadUnnoticed(t, p, h, node)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := s.Shutdown(ctx)
	deadline, _ := ctx.Deadline()
	late := time.Since(deadline)
	<-probe
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v; want context.DeadlineExceeded", err)
	}
	if late > 1500*time.Millisecond {
		t.Errorf("Shutdown returned %v after its ctx ended; want within Close's second and slack", late)
	}
}
