package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR69GivenUpWaitersShareWatch: waiters that give up (ctx) behind
// a holder that stays must not each leave a watch on the holder's node in
// go-zookeeper, which keeps every watch it hands out until its event: the
// node ahead was read with a watch of its own each time, one more kept per
// acquisition given up for as long as the holder held (30 after 30). A
// waiter now reads without a watch while the session holds one there.
func TestReviewR69GivenUpWaitersShareWatch(t *testing.T) {
	t.Parallel()
	const waiters = 30
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if _, err := holder.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	head := path + "/" + awaitChildren(t, obs, path, 1)[0]
	p := zktest.NewProxy(t, shared.Addr())
	sess := dial(t, []string{p.Addr()})
	m := dsync.NewMutex(sess, path)
	for i := range waiters {
		read := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: head}, zktest.Pass)
		wctx, wcancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() { _, err := m.LockContext(wctx); res <- err }()
		select {
		case <-read.Struck():
		case err := <-res:
			t.Fatalf("waiter %d returned %v before reading the holder's node", i, err)
		}
		r66Flush(t, ctx, sess, path) // the read's reply is in
		wcancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter %d: LockContext = %v; want context.Canceled", i, err)
		}
		awaitChildren(t, obs, path, 1) // its node is gone
	}
	if n := clientWatches(t, connOf(t, sess), head); n != 1 {
		t.Errorf("after %d waiters gave up behind one holder, go-zookeeper holds %d watches on its node; want 1", waiters, n)
	}
	holder.Unlock()
	awaitChildren(t, obs, path, 0)
	r66Flush(t, ctx, sess, path) // the deletion's event is in
	if n := clientWatches(t, connOf(t, sess), head); n != 0 {
		t.Errorf("go-zookeeper holds %d watches on the holder's node once it is gone; want 0", n)
	}
}

// TestReviewR69ObserveLoopsShareWatch: Observe loops that end (a break)
// while the leader stays must not each leave a watch on the leader's node
// in go-zookeeper: each read it with a watch of its own, one more kept per
// loop for as long as the leader led (30 after 30). The loops of one
// Session now share it, and it goes when the leader does.
func TestReviewR69ObserveLoopsShareWatch(t *testing.T) {
	t.Parallel()
	const loops = 30
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := lockPath(t)
	leader := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	if _, err := leader.Campaign(ctx, "leader"); err != nil {
		t.Fatal(err)
	}
	sess := dial(t, []string{shared.Addr()})
	e := dsync.NewElection(sess, path)
	node := ""
	for range loops {
		for p, err := range e.Observe(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			node = p.Path
			break
		}
	}
	if n := clientWatches(t, connOf(t, sess), node); n != 1 {
		t.Errorf("after %d Observe loops ended, go-zookeeper holds %d watches on the leader's node; want 1", loops, n)
	}
	if err := leader.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, observer(t, shared.Addr()), path, 0)
	r66Flush(t, ctx, sess, path) // the deletion's event is in
	if n := clientWatches(t, connOf(t, sess), node); n != 0 {
		t.Errorf("go-zookeeper holds %d watches on the leader's node once it is gone; want 0", n)
	}
}
