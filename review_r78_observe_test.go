package dsync_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR78ObserveContainerReaped: Observe waits while no one
// campaigns, through the container's reaping (a NodeDeleted on its child
// Watch, then CreatedW on the missing path), with its connection cut in
// some cycles while it waits, and must report every leader that comes
// after (each stays until Observe has reported it).
func TestReviewR78ObserveContainerReaped(t *testing.T) {
	t.Parallel() // a server of its own
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := zktest.Start(t, zktest.WithSystemProperty("znode.container.checkIntervalMs", "50"))
	p := zktest.NewProxy(t, srv.Addr())
	sess := dial(t, []string{p.Addr()})
	const path = "/r78/elect"
	obs := observer(t, srv.Addr())
	e := dsync.NewElection(sess, path)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	got := r77Observe(t, octx, e)
	awaitGone := func() {
		t.Helper()
		for {
			there, _, ch, err := obs.ExistsW(path)
			if err != nil {
				t.Fatal(err)
			}
			if !there {
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatal("the container was never reaped")
			}
		}
	}
	for i := range 8 {
		// Observe is waiting (on the children, or the path), or about to.
		switch i % 4 {
		case 1:
			p.Cut()
		case 2:
			r66Flush(t, ctx, sess, "/")
			p.Cut()
		}
		ls := dial(t, []string{srv.Addr()})
		le := dsync.NewElection(ls, path)
		id := fmt.Sprintf("leader-%d", i)
		if _, err := le.Campaign(ctx, id); err != nil {
			t.Fatal(err)
		}
		select {
		case pt := <-got:
			if string(pt.Data) != id {
				t.Fatalf("cycle %d: Observe yielded %+v; want %s", i, pt, id)
			}
		case <-ctx.Done():
			t.Fatalf("cycle %d: Observe never reported %s", i, id)
		}
		if err := le.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		awaitGone()
	}
	ocancel()
	for pt := range got {
		t.Errorf("yielded after the last cycle: %+v", pt)
	}
	r66Flush(t, ctx, sess, "/")
	tab := zktest.ClientWatchTable(t, connOf(t, sess))
	for k, n := range tab {
		t.Logf("go-zookeeper holds %d %+v", n, k)
		if n > 1 {
			t.Errorf("go-zookeeper holds %d watches %+v", n, k)
		}
	}
	_ = zk.ErrNoNode
}

// TestReviewR78ObserveExpiryWhileCreatedWOut: Observe on a missing path,
// its CreatedW's exists with a watch black-holed, then the whole proxy
// partitioned until the server expires the session; a participant
// campaigns during the partition (before or after the expiry) or after it
// heals. Observe must go on with the next session and report the leader.
func TestReviewR78ObserveExpiryWhileCreatedWOut(t *testing.T) {
	t.Parallel() // paths and sessions of its own
	for _, when := range []string{"before", "after"} {
		t.Run(when, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			path := lockPath(t)
			p := zktest.NewProxy(t, shared.Addr())
			sess := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(6*time.Second))
			obs := observer(t, shared.Addr())
			h, err := sess.Current(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var eph string
			if err := h.Do(ctx, func(c *zk.Conn) (err error) {
				eph, err = c.Create(path+"-eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			_, _, gone, err := obs.ExistsW(eph)
			if err != nil {
				t.Fatal(err)
			}
			e := dsync.NewElection(sess, path)
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			got := r77ObserveMissing(t, octx, p, e, path, zktest.BlackHole)
			p.BlackHole()
			leader := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
			if when == "before" {
				if _, err := leader.Campaign(ctx, "leader"); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-gone:
			case <-ctx.Done():
				t.Fatal("the session never expired")
			}
			p.Heal()
			if when == "after" {
				if _, err := leader.Campaign(ctx, "leader"); err != nil {
					t.Fatal(err)
				}
			}
			defer leader.Resign(context.Background())
			r77Reported(t, ctx, got, "leader")
			ocancel()
			for pt := range got {
				t.Errorf("yielded after: %+v", pt)
			}
		})
	}
}

// TestReviewR78ObserveSharedSoak: several Observe loops on one Session
// (sharing their watches), its connection cut at random, while leaders
// come and go and the container is reaped between them; loops start and
// end (ctx) throughout. Once a final leader stays, every loop still
// running must report it.
func TestReviewR78ObserveSharedSoak(t *testing.T) {
	t.Parallel() // a server of its own
	for seed := range 3 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { r78ObserveSoak(t, int64(seed)) })
	}
}

func r78ObserveSoak(t *testing.T, seed int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := r78Reaper(t)
	p := zktest.NewProxy(t, srv.Addr())
	sess := dial(t, []string{p.Addr()})
	path := fmt.Sprintf("/r78s%d/elect", seed)
	e := dsync.NewElection(sess, path)
	r := rand.New(rand.NewSource(seed))
	type loop struct {
		cancel context.CancelFunc
		last   chan string // the last data yielded
		done   chan struct{}
	}
	start := func() *loop {
		lctx, lcancel := context.WithCancel(ctx)
		l := &loop{cancel: lcancel, last: make(chan string, 1), done: make(chan struct{})}
		go func() {
			defer close(l.done)
			for pt, err := range e.Observe(lctx) {
				if err != nil {
					t.Logf("Observe yielded %v", err)
					continue
				}
				select {
				case <-l.last:
				default:
				}
				l.last <- string(pt.Data)
			}
		}()
		return l
	}
	var loops []*loop
	for range 4 {
		loops = append(loops, start())
	}
	ls := dial(t, []string{srv.Addr()})
	le := dsync.NewElection(ls, path)
	for i := range 40 {
		switch r.Intn(4) {
		case 0:
			p.Cut()
		case 1:
			k := r.Intn(len(loops))
			loops[k].cancel()
			<-loops[k].done
			loops[k] = start()
		}
		if r.Intn(2) == 0 {
			if _, err := le.Campaign(ctx, fmt.Sprintf("l%d", i)); err != nil {
				t.Fatal(err)
			}
			if err := le.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := le.Campaign(ctx, "final"); err != nil {
		t.Fatal(err)
	}
	for k, l := range loops {
		for {
			var got string
			select {
			case got = <-l.last:
			case <-ctx.Done():
				t.Fatalf("loop %d never reported the final leader", k)
			}
			if got == "final" {
				break
			}
		}
		l.cancel()
		<-l.done
	}
	le.Resign(ctx)
}

// r78Reaper starts a server that reaps empty containers every 20 ms.
func r78Reaper(t *testing.T) *zktest.Server {
	return zktest.Start(t, zktest.WithSystemProperty("znode.container.checkIntervalMs", "20"))
}
