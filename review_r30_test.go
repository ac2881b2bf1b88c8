package dsync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 30: the in-process exclusion of RWMutex readers and writers
// (Mutex.admit, RWMutex.awaitNoReads, keep's refusal, the retake loop).

// TestReviewR30SuspendedDuringNodeReadAfterWait: a tracked write hold lost
// (LostOnSuspension) while awaitNoReads reads its node must not be handed
// out.
func TestReviewR30SuspendedDuringNodeReadAfterWait(t *testing.T) {
	t.Parallel()
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()})
	rw, path, _, held := r30CutReadAfterWait(t, obs, p, s)
	if held.Err() != nil {
		t.Fatalf("LockContext handed out a hold lost before it returned: %v", context.Cause(held))
	}
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
}

// r30CutReadAfterWait makes a writer of an RWMutex on s (made with opts)
// wait for a lost reader of its process, cuts the connection (through p)
// at the read of its node after the wait, and returns the RWMutex, its
// path, the writer's node and its hold. The writer reads its node only if
// it waited: if it looks for readers only after the RUnlock (the test
// cannot see it wait), it reads nothing, and the attempt is made again on
// another path.
func r30CutReadAfterWait(t *testing.T, obs *zk.Conn, p *zktest.Proxy, s *zkconn.Session, opts ...dsync.Option) (*dsync.RWMutex, string, string, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for attempt := 1; attempt <= 5; attempt++ {
		path := fmt.Sprintf("%s/%d", lockPath(t), attempt)
		rw := dsync.NewRWMutex(s, path, opts...)
		r29LostReader(t, ctx, obs, rw, path)
		w, wnode := r29AwaitingReads(t, ctx, obs, s, rw.LockContext, path)
		// The writer's own getData watch on its node is set: the next
		// getData of that node is the read after the wait.
		awaitWatchOf(t, shared, wnode, s)
		f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: wnode}, zktest.Cut)
		rw.RUnlock()
		select {
		case <-f.Struck():
			return rw, path, wnode, rvHeld(t, w, "writer")
		case r := <-w:
			f.Disarm()
			if r.err != nil {
				t.Fatalf("attempt %d: LockContext = %v", attempt, r.err)
			}
			rw.Unlock()
			awaitChildren(t, obs, path, 0)
		}
	}
	t.Fatal("in 5 attempts the writer never waited for the lost reader")
	return nil, "", "", nil
}
