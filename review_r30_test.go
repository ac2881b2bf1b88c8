package dsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 30: the in-process exclusion of RWMutex readers and writers
// (Mutex.admit, RWMutex.awaitNoReads, keep's refusal, the retake loop).

// TestReviewR30SuspendedDuringNodeReadAfterWait: a tracked write hold lost (LostOnSuspension) while awaitNoReads reads its node must not be handed out.
func TestReviewR30SuspendedDuringNodeReadAfterWait(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	rw := dsync.NewRWMutex(s, path)
	r29LostReader(t, ctx, obs, rw, path)
	w, wnode := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
	// The writer's own getData watch on its node is set: the next getData
	// of that node is the read after the wait.
	awaitWatch(t, shared, wnode, sessionID(t, s))
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: wnode}, zktest.Cut) // the read after the wait
	rw.RUnlock()
	<-f.Struck()
	held := rvHeld(t, w, "writer")
	if held.Err() != nil {
		t.Fatalf("LockContext handed out a hold lost before it returned: %v", context.Cause(held))
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}
