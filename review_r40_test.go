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

// Review round 40: reads that decide safety after a notification.

// TestReviewR40ClaimRereadsAfterSync pins that a waiter made first by a
// notification, whose watch on its own node was set on an earlier
// connection, reads its node again after a sync (entry.claim). The
// notification (here the holder's delete) does not count towards what a
// reconnect asks the next server to have seen: after a move to a server
// that lags behind it, an unsynced read can still show the waiter's node
// when an operator deleted it before the holder left, and the waiter claims
// the lock beside the node behind it. Both requests are armed to be cut;
// the one the proxy sees first is cut, and the waiter still takes the lock.
func TestReviewR40ClaimRereadsAfterSync(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	first := awaitChildren(t, obs, path, 1)[0]
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	m := dsync.NewMutex(s, path)
	type result struct {
		held context.Context
		err  error
	}
	res := make(chan result, 1)
	go func() {
		held, err := m.LockContext(ctx)
		res <- result{held, err}
	}()
	kids := awaitChildren(t, obs, path, 2)
	own := path + "/" + kids[slices.IndexFunc(kids, func(k string) bool { return k != first })]
	id := sessionID(t, s)
	awaitWatch(t, shared, own, id)            // the waiter's watch on its own node…
	awaitWatch(t, shared, path+"/"+first, id) // …and on the holder's, set on this connection

	p.Cut() // the watch on its own node now belongs to a connection gone
	reconnected := false
	for !reconnected {
		select {
		case ev := <-sub.C():
			reconnected = ev.State == zkconn.StateReconnected
		case <-time.After(reviewBound):
			t.Fatal("the waiter's session did not reconnect")
		}
	}
	synced := p.Strike(zktest.Match{Op: zktest.OpSync, Path: path, Prefix: true}, zktest.Cut)
	read := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: own}, zktest.Cut)
	defer synced.Disarm()
	defer read.Disarm()
	holder.Unlock() // the waiter is first by the notification of this delete
	select {
	case <-synced.Struck():
		read.Disarm() // a read behind the sync may pass
	case <-read.Struck():
		t.Error("the waiter read its own node again, to claim the lock, with no sync before it")
	case r := <-res:
		t.Fatalf("LockContext = %v before the waiter read its node again", r.err)
	case <-time.After(reviewBound):
		t.Fatal("the waiter neither synced nor read its node again")
	}
	var r result
	select {
	case r = <-res:
	case <-time.After(reviewBound):
		t.Fatal("LockContext did not return")
	}
	if r.err != nil {
		t.Fatalf("LockContext = %v", r.err)
	}
	if got := children(t, obs, path); len(got) != 1 || path+"/"+got[0] != own {
		t.Errorf("children while the waiter holds = %v; want only %s", got, own)
	}
	m.Unlock()
	assertEmpty(t, path)
}
