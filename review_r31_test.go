package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
)

// Review round 31: the in-process exclusion of RWMutex readers and writers
// (Mutex.admit, RWMutex.awaitNoReads), on the ways out of the wait.

// TestReviewR31WriterCtxEndsWhileAwaitingReads: a writer whose ctx ends while it waits for a lost reader of the process returns ctx.Err(), leaves no node, and lets readers and writers in after.
func TestReviewR31WriterCtxEndsWhileAwaitingReads(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(s, path)
	r29LostReader(t, ctx, obs, rw, path)
	wctx, wcancel := context.WithCancel(ctx)
	w, _ := r29AwaitingReads(t, wctx, obs, s, rw.LockContext, path)
	rvWaits(t, w, "writer before the reader's RUnlock")
	wcancel()
	if r := <-w; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("LockContext = %v; want context.Canceled", r.err)
	}
	awaitChildren(t, obs, path, 0) // no orphan
	// The lost reader is still in its critical section: a TryLock is refused, and leaves nothing.
	if _, err := rw.TryLockContext(ctx); !errors.Is(err, dsync.ErrWouldBlock) {
		t.Fatalf("TryLockContext with a lost reader not RUnlocked = %v; want ErrWouldBlock", err)
	}
	awaitChildren(t, obs, path, 0)
	// A second reader is let in (no writer holds or is about to).
	r2, err := rw.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 1)
	rw.RUnlock() // r2
	rw.RUnlock() // the lost one
	if r2.Err() == nil {
		t.Fatal("RUnlock did not end the newest read hold")
	}
	awaitChildren(t, obs, path, 0)
	held, err := rw.LockContext(ctx)
	if err != nil || held.Err() != nil {
		t.Fatalf("LockContext after every RUnlock: %v", err)
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}
