package dsync_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewSignalWatchTakenBack: a waiter B third in line sets an exists
// watch on its predecessor X's handoff signal. X gives up (it never held: no
// signal), and B lists again and follows the holder A. B takes its watch on
// X's signal back then, before it follows A: the watch used to stay set
// until B's own delete sent the signal, and when an operator deleted B's
// node that delete could not (the node was gone), so the watch stayed for
// the life of B's session.
func TestReviewSignalWatchTakenBack(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	sa := dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	sb := dial(t, []string{shared.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a := dsync.NewMutex(sa, path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	nodeA := path + "/" + children(t, obs, path)[0]

	x := dsync.NewMutex(sx, path)
	ctxX, cancelX := context.WithCancel(ctx)
	defer cancelX()
	xdone := make(chan error, 1)
	go func() { _, err := x.LockContext(ctxX); xdone <- err }()
	nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]

	b := dsync.NewMutex(sb, path)
	type res struct {
		held context.Context
		err  error
	}
	bdone := make(chan res, 1)
	go func() { h, err := b.LockContext(ctx); bdone <- res{h, err} }()
	nodeB := path + "/" + orderedNames(awaitChildren(t, obs, path, 3))[2]
	idB := mustSessionOf(t, obs, nodeB)
	awaitWatch(t, shared, nodeX+".handoff", idB) // B follows X, waiting for its signal
	awaitWatch(t, shared, nodeB, idB)            // and watches its own node

	cancelX() // X gives up: it never held, it sends no signal
	if err := <-xdone; err == nil {
		t.Fatal("X acquired")
	}
	awaitWatch(t, shared, nodeA, idB) // B listed again and follows A
	// B set that watch once its signal was sent: the watch on X's is gone.
	if slices.Contains(watches(t, shared)[nodeX+".handoff"], idB) {
		t.Fatalf("B follows A and still watches %s.handoff", nodeX)
	}

	if err := obs.Delete(nodeB, -1); err != nil { // an operator
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 2) // B queued again behind A
	a.Unlock()
	r := <-bdone
	if r.err != nil {
		t.Fatal(r.err)
	}
	b.Unlock()
	awaitChildren(t, obs, path, 0)
	hb, err := sb.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hb.Conn().Sync(path); err != nil {
		t.Fatal(err)
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// TestReviewSignalWatchOutAtGiveUp: a waiter deep in line that gives up
// (ctx ends) while its exists watch on its predecessor's handoff signal is
// being set left that watch set for the life of its session. follow adds
// the signal to e.fire before it sends the request, so that the delete that
// removes the waiter sends it; but the request goes out from a goroutine
// zkconn.Handle.Do leaves running when ctx ends, and it could be queued on
// the connection only after the delete had sent the signal. ZooKeeper then
// set the watch after the signal, on a path that only the predecessor could
// still signal, and it does not when it gives up too. The delete now waits
// for that request (entry.remove).
//
// No fault can force the order (it is decided inside the process, before
// anything is written), so waiters give up at random moments, many times,
// behind a holder A and a waiter B that stay put; B then gives up (it never
// held: no signal) and A unlocks.
func TestReviewSignalWatchOutAtGiveUp(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	ctx := context.Background()
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	bdone := make(chan error, 1)
	go func() { _, err := b.LockContext(ctxB); bdone <- err }()
	awaitChildren(t, obs, path, 2)

	var sess []*zkconn.Session
	var wg sync.WaitGroup
	stop := time.Now().Add(5 * time.Second)
	for i := 0; i < 3; i++ {
		s := dial(t, []string{shared.Addr()})
		sess = append(sess, s)
		wg.Go(func() {
			m := dsync.NewMutex(s, path)
			for time.Now().Before(stop) {
				// Give up while follow sets its watches: a little after
				// the create, whose round trip is about as long.
				ctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
				if _, err := m.LockContext(ctx); err == nil {
					t.Error("a third waiter acquired while A holds")
					m.Unlock()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	cancelB() // B never held: it sends no signal
	if err := <-bdone; err == nil {
		t.Fatal("B acquired")
	}
	a.Unlock()
	awaitChildren(t, obs, path, 0)
	for _, s := range sess {
		h, err := s.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Conn().Sync(path); err != nil { // every event read
			t.Fatal(err)
		}
	}
	if left := watchesUnder(t, path, obs); len(left) > 0 {
		t.Fatalf("no node left under %s, but watches are: %v", path, left)
	}
}

// TestReviewGiveUpDeleteAfterLostReply: a waiter W third in line (behind
// holder A and waiter X) sets an exists watch on X's handoff signal; the
// reply to that request never comes (Drop), while the connection stays up
// and answers pings. W gives up. Its delete must go at once: it waits for
// that request to have been written (see TestReviewSignalWatchOutAtGiveUp),
// not answered, and a delete that waited for the reply left W's node in the
// queue for as long as W's session lived, so that nobody could take the
// lock once A and X were gone.
func TestReviewGiveUpDeleteAfterLostReply(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	sa := dial(t, []string{shared.Addr()})
	sx := dial(t, []string{shared.Addr()})
	p := zktest.NewProxy(t, shared.Addr())
	sw := dial(t, []string{p.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a := dsync.NewMutex(sa, path)
	if _, err := a.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	x := dsync.NewMutex(sx, path)
	xdone := make(chan error, 1)
	go func() { _, err := x.LockContext(ctx); xdone <- err }()
	nodeX := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[1]

	f := p.Strike(zktest.Match{Op: zktest.OpExists, Path: nodeX + ".handoff"}, zktest.Drop)
	w := dsync.NewMutex(sw, path)
	ctxW, cancelW := context.WithCancel(ctx)
	defer cancelW()
	wdone := make(chan error, 1)
	go func() { _, err := w.LockContext(ctxW); wdone <- err }()
	nodeW := path + "/" + orderedNames(awaitChildren(t, obs, path, 3))[2]
	<-f.Struck() // the exists watch on X's signal is set; its reply is gone
	cancelW()
	if err := <-wdone; !errors.Is(err, context.Canceled) {
		t.Fatalf("W's LockContext = %v; want context.Canceled", err)
	}

	// W gave up: its node must go, as it did before (a guaranteed delete
	// needs no reply to an earlier read).
	there, _, gone, err := obs.ExistsW(nodeW)
	if err != nil {
		t.Fatal(err)
	}
	if there {
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Errorf("W gave up, but its node %s is still queued 10s later", nodeW)
		}
	}
	a.Unlock()
	if err := <-xdone; err != nil {
		t.Fatal(err)
	}
	x.Unlock()
	// Nobody holds now; a newcomer must get the lock.
	z := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	ctxZ, cancelZ := context.WithTimeout(ctx, 5*time.Second)
	defer cancelZ()
	if _, err := z.LockContext(ctxZ); err != nil {
		t.Fatalf("with A and X gone and W given up, Z's LockContext = %v; queue: %v", err, children(t, obs, path))
	}
	z.Unlock()
	awaitChildren(t, obs, path, 0)
}
