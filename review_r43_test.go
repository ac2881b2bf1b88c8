package dsync_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 43: a writer deep in line once the connection its watches
// were set on has dropped (round 42 makes it list again).

// r43Waiter is a writer waiting in line, on a session of its own.
type r43Waiter struct {
	m      *dsync.RWMutex
	cancel context.CancelFunc
	res    chan error
	node   string // full path
}

// r43Line is a write holder, len(mids) writers waiting behind it (direct),
// and last a writer w through a proxy, which watches the node ahead of it
// and that node's handoff signal.
type r43Line struct {
	path   string
	holder *dsync.RWMutex
	mids   []*r43Waiter
	w      *r43Waiter
	p      *zktest.Proxy
	id     int64
	sub    *zkconn.Subscription
}

func r43Setup(t *testing.T, ctx context.Context, mids int) *r43Line {
	t.Helper()
	d := &r43Line{path: lockPath(t)}
	obs := observer(t, shared.Addr())
	d.holder = dsync.NewRWMutex(dial(t, []string{shared.Addr()}), d.path)
	if _, err := d.holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	wait := func(m *dsync.RWMutex, n int) *r43Waiter {
		wctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		w := &r43Waiter{m: m, cancel: cancel, res: make(chan error, 1)}
		go func() {
			_, err := m.LockContext(wctx)
			w.res <- err
		}()
		line := r38BySequence(awaitChildren(t, obs, d.path, n))
		w.node = d.path + "/" + line[n-1]
		return w
	}
	for i := range mids {
		d.mids = append(d.mids, wait(dsync.NewRWMutex(dial(t, []string{shared.Addr()}), d.path), i+2))
	}
	d.p = zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{d.p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	d.sub = s.Subscribe()
	t.Cleanup(d.sub.Stop)
	d.id = sessionID(t, s)
	d.w = wait(dsync.NewRWMutex(s, d.path), mids+2)
	d.awaitFollows(t, d.mids[mids-1])
	return d
}

// awaitFollows waits until w watches m's node and its handoff signal.
func (d *r43Line) awaitFollows(t *testing.T, m *r43Waiter) {
	t.Helper()
	awaitWatch(t, shared, m.node, d.id)
	awaitWatch(t, shared, m.node+".handoff", d.id)
}

// reconnect makes w's connection hear nothing, then heals it, and waits
// for w's session to be back on a new connection.
func (d *r43Line) reconnect(t *testing.T) {
	t.Helper()
	d.p.BlackHole()
	d.p.Heal()
	for {
		select {
		case ev := <-d.sub.C():
			if ev.State == zkconn.StateReconnected {
				return
			}
		case <-time.After(reviewBound):
			t.Fatal("w's session did not reconnect")
		}
	}
}

// handOn unlocks the holder, waits for m to hold, checks that w does not,
// and unlocks m: a release as holder, which sends m's handoff signal.
func (d *r43Line) handOn(t *testing.T, m *r43Waiter) {
	t.Helper()
	d.holder.Unlock()
	if err := reviewRecv(t, "the middle writer's LockContext", m.res); err != nil {
		t.Fatalf("middle writer: %v", err)
	}
	select {
	case err := <-d.w.res:
		t.Fatalf("w returned (%v) while the middle writer holds", err)
	default:
	}
	m.m.Unlock()
}

// finish checks that w holds, with no watch of its session left on a
// handoff signal, and cleans up.
func (d *r43Line) finish(t *testing.T) {
	t.Helper()
	if err := reviewRecv(t, "w's LockContext", d.w.res); err != nil {
		t.Fatalf("w: %v", err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var left []string
	if err := shared.AwaitWatches(wctx, func(m map[string][]int64) bool {
		left = left[:0]
		for p, ids := range m {
			if strings.HasPrefix(p, d.path+"/") && strings.HasSuffix(p, ".handoff") && slices.Contains(ids, d.id) {
				left = append(left, p)
			}
		}
		return len(left) == 0
	}); err != nil {
		t.Errorf("w holds with watches left on handoff signals: %v", left)
	}
	d.w.m.Unlock()
	awaitChildren(t, observer(t, shared.Addr()), d.path, 0)
}

// TestReviewR43DeepSignalWhileDeaf: the signal w waits for is sent while w hears nothing; w lists again, takes its watch on the signal back, and holds.
func TestReviewR43DeepSignalWhileDeaf(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	d := r43Setup(t, ctx, 1)
	d.p.BlackHole()
	d.handOn(t, d.mids[0])
	d.reconnect(t) // heals: already black-holed
	d.finish(t)
}

// TestReviewR43LinkRetakenAfterRelist: w, listing again because its predecessor left after w's connection dropped, follows the next one on the connection up now: its handoff needs no listing.
func TestReviewR43LinkRetakenAfterRelist(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	d := r43Setup(t, ctx, 2) // holder, x, y, w
	x, y := d.mids[0], d.mids[1]
	d.reconnect(t)
	d.awaitFollows(t, y) // set again on the new connection
	y.cancel()           // y gives up: w lists again, and follows x
	if err := reviewRecv(t, "y's LockContext", y.res); err == nil {
		t.Fatal("y took the lock")
	}
	d.awaitFollows(t, x)
	listing := d.p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: d.path}, zktest.Cut)
	defer listing.Disarm()
	d.handOn(t, x)
	d.finish(t)
	select {
	case <-listing.Struck():
		t.Error("w listed again to take a handoff on the connection it followed x on")
	default:
	}
}
