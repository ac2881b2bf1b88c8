package dsync_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 42: what a reconnect hides from a waiter.

// TestReviewR42DowngradeHiddenByReconnect: a writer behind a write holder
// that downgrades and unlocks while the writer's connection hears nothing
// learns, on the next connection, only that the write node is gone
// (go-zookeeper sets its watches again, and ZooKeeper reports the deletion,
// not the write before it): it must list again and wait for the downgrade's
// read hold, not hold beside it.
func TestReviewR42DowngradeHiddenByReconnect(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	w0 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	held, err := w0.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := awaitChildren(t, obs, path, 1)[0]
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	x := dsync.NewRWMutex(s, path)
	res := make(chan error, 1)
	go func() {
		_, err := x.LockContext(ctx)
		res <- err
	}()
	kids := awaitChildren(t, obs, path, 2)
	own := kids[slices.IndexFunc(kids, func(k string) bool { return k != first })]
	id := sessionID(t, s)
	awaitWatch(t, shared, path+"/"+own, id)
	awaitWatch(t, shared, path+"/"+first, id)

	p.BlackHole()                       // x hears nothing from here on
	rheld, err := w0.RLockContext(held) // a downgrade: writes the write node
	if err != nil {
		t.Fatal(err)
	}
	w0.Unlock() // deletes the write node; the read hold stays
	kids = awaitChildren(t, obs, path, 2)
	read := kids[slices.IndexFunc(kids, func(k string) bool { return k != own })]
	p.Heal() // x's connection closes; on the next one its watch on the write node reports it gone
	for reconnected := false; !reconnected; {
		select {
		case ev := <-sub.C():
			reconnected = ev.State == zkconn.StateReconnected
		case <-time.After(reviewBound):
			t.Fatal("the writer's session did not reconnect")
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, reviewBound)
	defer wcancel()
	follows := make(chan error, 1)
	go func() {
		follows <- shared.AwaitWatches(wctx, func(m map[string][]int64) bool {
			return slices.Contains(m[path+"/"+read], id)
		})
	}()
	select {
	case err := <-res:
		if err == nil {
			t.Errorf("writer holds beside the downgrade's read hold (read hold canceled: %v); children %v",
				rheld.Err(), children(t, obs, path))
			x.Unlock()
		} else {
			t.Errorf("LockContext = %v", err)
		}
		wcancel()
		<-follows
	case err := <-follows:
		if err != nil {
			t.Fatalf("the writer neither took the lock nor followed the read node: %v", err)
		}
		w0.RUnlock()
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("LockContext = %v", err)
			}
		case <-time.After(reviewBound):
			t.Fatal("LockContext did not return after the read hold ended")
		}
		x.Unlock()
		awaitChildren(t, obs, path, 0)
		return
	}
	w0.RUnlock()
	awaitChildren(t, obs, path, 0)
}
