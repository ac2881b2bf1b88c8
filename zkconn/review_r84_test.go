package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR84ShutdownSyncStruck: the round trip of Shutdown itself (its
// sync) is struck: cut (not applied), lost (applied, reply lost with the
// connection) or dropped (applied, reply swallowed, connection up). Shutdown
// must send it again on the next connection and end the session there:
// nil, the ephemeral node gone at once, within the session timeout.
func TestReviewR84ShutdownSyncStruck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    zktest.Action
		name string
		opts []Option
	}{
		{zktest.Cut, "Cut", nil},
		{zktest.Lose, "Lose", nil},
		{zktest.Drop, "Drop", nil},
		{zktest.Cut, "CutDigestAuth", []Option{WithDigestAuth("r84", "secret")}},
		{zktest.Drop, "DropDigestAuth", []Option{WithDigestAuth("r84", "secret")}},
	} {
		a := tc.a
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const T = 4 * time.Second
			p, s, _, obs, node := shutdownSetup(t, T, tc.opts...)
			f := p.Strike(zktest.Match{Op: zktest.OpSync, Path: "/"}, a)
			ctx, cancel := context.WithTimeout(context.Background(), 3*T)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown = %v", err)
			}
			select {
			case <-f.Struck():
			default:
				t.Fatal("the sync was not struck")
			}
			gone(t, obs, node, "after Shutdown")
		})
	}
}

// TestReviewR84ShutdownSyncBlackHoledCtx: the sync goes into a black hole
// and ctx ends first: Shutdown returns ctx's error within Close's second
// (and slack) of ctx's end, and leaves no goroutine (goleak in TestMain).
// Serial: it bounds a duration.
func TestReviewR84ShutdownSyncBlackHoledCtx(t *testing.T) {
	const T = 20 * time.Second
	p, s, _, _, _ := shutdownSetup(t, T)
	f := p.Strike(zktest.Match{Op: zktest.OpSync, Path: "/"}, zktest.BlackHole)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := goShutdown(t, ctx, s)
	awaitStrike(t, f, "the sync")
	cancel()
	at := time.Now()
	err := result()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v; want context.Canceled", err)
	}
	if d := time.Since(at); d > 1500*time.Millisecond {
		t.Errorf("Shutdown returned %v after its ctx ended", d)
	}
	closed(t, s)
}

// TestReviewR84ShutdownSyncBlackHoledRecovers: the sync goes into a black
// hole and ctx never ends: go-zookeeper notices the dead connection (2/3 of
// the session timeout), reconnects, and Shutdown's sync goes out again
// there: nil, node gone.
func TestReviewR84ShutdownSyncBlackHoledRecovers(t *testing.T) {
	t.Parallel()
	const T = 6 * time.Second
	p, s, _, obs, node := shutdownSetup(t, T)
	f := p.Strike(zktest.Match{Op: zktest.OpSync, Path: "/"}, zktest.BlackHole)
	start := time.Now()
	result := goShutdown(t, context.Background(), s)
	awaitStrike(t, f, "the sync")
	err := result()
	t.Logf("Shutdown = %v after %v (session timeout %v)", err, time.Since(start), T)
	if err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	gone(t, obs, node, "after Shutdown")
}

// TestReviewR84ShutdownSessionExpiresWhileSuspended: a release's delete is
// cut and the servers stay out of reach (black hole) past the session
// timeout: Shutdown (ctx never ending) returns nil once the session is
// lost, the node gone with the session, and the Session closed; no new
// session is left open.
func TestReviewR84ShutdownSessionExpiresWhileSuspended(t *testing.T) {
	t.Parallel()
	const T = 2 * time.Second
	p, s, h, obs, node := shutdownSetup(t, T)
	sub := s.Subscribe()
	defer sub.Stop()
	cutDelete(t, p, h, node)
	p.BlackHole()
	result := goShutdown(t, context.Background(), s)
	await(t, sub, StateLost, time.Minute)
	p.Heal()
	if err := result(); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	closed(t, s)
	// The server expires the session in its own time: the node goes then.
	zktest.AwaitChildren(t, obs, node[:len(node)-2], 0)
}
