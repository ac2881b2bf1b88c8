package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 41: the sync before a claim's re-read.

// r41Waiter puts a Mutex waiter behind a holder on path, its session through
// a proxy, and returns once it watches its own node and the holder's.
type r41Waiter struct {
	p      *zktest.Proxy
	s      *zkconn.Session
	m      *dsync.Mutex
	holder *dsync.Mutex
	own    string
	res    chan error
}

func r41Queue(t *testing.T, ctx context.Context, path string, obs *zk.Conn) *r41Waiter {
	t.Helper()
	w := &r41Waiter{res: make(chan error, 1)}
	w.holder = dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := w.holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	first := awaitChildren(t, obs, path, 1)[0]
	w.p = zktest.NewProxy(t, shared.Addr())
	w.s = dial(t, []string{w.p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	w.m = dsync.NewMutex(w.s, path)
	go func() {
		_, err := w.m.LockContext(ctx)
		w.res <- err
	}()
	kids := awaitChildren(t, obs, path, 2)
	w.own = path + "/" + kids[slices.IndexFunc(kids, func(k string) bool { return k != first })]
	id := sessionID(t, w.s)
	awaitWatch(t, shared, w.own, id)
	awaitWatch(t, shared, path+"/"+first, id)
	return w
}

// TestReviewR41RewatchAfterDropKeepsReread pins that a waiter whose own node
// was written to, and whose watch on it is set again on a new connection,
// still reads its node again after a sync when it claims on a notification
// that came on the connection gone (queue.follow): both events were in
// before the drop, and the waiter took the write first. Set again on the
// next connection (to a server that may lag behind the notification), the
// watch proves nothing about a delete of the node before it.
func TestReviewR41RewatchAfterDropKeepsReread(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	obs := observer(t, shared.Addr())
	for i := range 4 { // the waiter takes one of two ready events, at random
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
			defer cancel()
			path := lockPath(t)
			w := r41Queue(t, ctx, path, obs)
			id := sessionID(t, w.s)
			reread := w.p.Strike(zktest.Match{Op: zktest.OpGetData, Path: w.own}, zktest.Drop)
			defer reread.Disarm()
			if _, err := obs.Set(w.own, []byte("1"), -1); err != nil { // the waiter watches its node again…
				t.Fatal(err)
			}
			select {
			case <-reread.Struck(): // …and that request's reply is swallowed
			case <-time.After(reviewBound):
				t.Fatal("the waiter did not watch its node again after a write")
			}
			awaitWatch(t, shared, w.own, id) // the server set that watch
			if _, err := obs.Set(w.own, []byte("2"), -1); err != nil {
				t.Fatal(err) // fires it: the waiter, still waiting for the reply, does not take it
			}
			synced := w.p.Strike(zktest.Match{Op: zktest.OpSync, Path: path, Prefix: true}, zktest.Cut)
			defer synced.Disarm()
			w.holder.Unlock() // the waiter is first by this delete's notification, on the same connection
			awaitChildren(t, obs, path, 1)
			// A reply to a later request comes out of turn: the Session
			// closes the connection, after the two notifications.
			h, err := w.s.Current(ctx)
			if err == nil {
				err = h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(path); return err })
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-synced.Struck():
			case err := <-w.res:
				t.Fatalf("LockContext = %v with no sync since the connection that brought the notification dropped", err)
			case <-time.After(reviewBound):
				t.Fatal("the waiter neither synced nor took the lock")
			}
			select {
			case err := <-w.res:
				if err != nil {
					t.Fatalf("LockContext = %v", err)
				}
			case <-time.After(reviewBound):
				t.Fatal("LockContext did not return")
			}
			w.m.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewR41ClaimSyncCanceled pins the give-up path of the sync before a
// claim's re-read: ctx ends while the sync is out (its reply swallowed), and
// LockContext returns ctx.Err() at once, leaving no node behind.
func TestReviewR41ClaimSyncCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w := r41Queue(t, wctx, path, obs)
	sub := w.s.Subscribe()
	defer sub.Stop()
	w.p.Cut() // the watch on its own node now belongs to a connection gone
	for reconnected := false; !reconnected; {
		select {
		case ev := <-sub.C():
			reconnected = ev.State == zkconn.StateReconnected
		case <-time.After(reviewBound):
			t.Fatal("the waiter's session did not reconnect")
		}
	}
	synced := w.p.Strike(zktest.Match{Op: zktest.OpSync, Path: path, Prefix: true}, zktest.Drop)
	defer synced.Disarm()
	w.holder.Unlock()
	select {
	case <-synced.Struck():
	case err := <-w.res:
		t.Fatalf("LockContext = %v before the sync", err)
	case <-time.After(reviewBound):
		t.Fatal("the waiter did not sync")
	}
	wcancel()
	select {
	case err := <-w.res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext = %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockContext did not return when ctx ended during the sync")
	}
	awaitChildren(t, obs, path, 0)
}
