package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
)

// TestTrackedHoldsNeedNoGoroutine: a Session holding many locks with loss
// tracking runs no goroutine per hold, and each hold still learns, alone, of
// its node's deletion, after a write to it as well (the watch set again).
func TestTrackedHoldsNeedNoGoroutine(t *testing.T) {
	const n = 200
	path := lockPath(t)
	s := dial(t, []string{shared.Addr()})
	ms, paths := make([]*dsync.Mutex, n), make([]string, n)
	for i := range ms {
		paths[i] = fmt.Sprintf("%s/l%03d", path, i)
		ms[i] = dsync.NewMutex(s, paths[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One hold first, so the Session's own goroutines are all running.
	held := make([]context.Context, n)
	var err error
	if held[0], err = ms[0].LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for i := 1; i < n; i++ {
		if held[i], err = ms[i].LockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A request's goroutine may not have ended yet as its caller returns:
	// a goroutine per hold would be n-1 more, far above this margin.
	if g := runtime.NumGoroutine() - base; g > n/10 {
		t.Fatalf("%d goroutines more for %d more tracked holds; want none per hold", g, n-1)
	}

	obs := observer(t, shared.Addr())
	node := func(i int) string {
		kids := children(t, obs, paths[i])
		if len(kids) != 1 {
			t.Fatalf("%s: children %v; want one", paths[i], kids)
		}
		return paths[i] + "/" + kids[0]
	}
	// A write, then the deletion of the same node: seen through the watch
	// set again after the write.
	p := node(7)
	if _, err := obs.Set(p, []byte("written"), -1); err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(p, 1); err != nil { // version 1: after the write
		t.Fatal(err)
	}
	awaitLost(t, held[7], "deleted")
	if err := obs.Delete(node(3), -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, held[3], "deleted")
	for i, h := range held {
		if i != 3 && i != 7 && h.Err() != nil {
			t.Fatalf("hold %d lost with the others: %v", i, context.Cause(h))
		}
	}
	for _, m := range ms {
		m.Unlock()
	}
	for _, p := range paths {
		awaitChildren(t, obs, p, 0)
	}
}

// awaitLost waits for held to end and checks that its cause wraps ErrLockLost
// and says what.
func awaitLost(t testing.TB, held context.Context, what string) {
	t.Helper()
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("hold not canceled within 30s; want lost (%s)", what)
	}
	cause := context.Cause(held)
	if !errors.Is(cause, dsync.ErrLockLost) || !strings.Contains(cause.Error(), what) {
		t.Fatalf("hold cause %v; want ErrLockLost (%s)", cause, what)
	}
}

// TestLostCauseNamesDeletion: a hold whose node someone else deleted is lost
// with a cause that wraps ErrNodeDeleted; one whose Session was closed (which
// deletes its node too) is not.
func TestLostCauseNamesDeletion(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deleted, err := dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/a").LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, []string{shared.Addr()})
	closed, err := dsync.NewMutex(s, path+"/b").LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obs := observer(t, shared.Addr())
	kids := children(t, obs, path+"/a")
	if len(kids) != 1 {
		t.Fatalf("%s/a: children %v; want one", path, kids)
	}
	if err := obs.Delete(path+"/a/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	awaitLost(t, deleted, "deleted")
	if cause := context.Cause(deleted); !errors.Is(cause, dsync.ErrNodeDeleted) {
		t.Errorf("cause of a hold whose node was deleted = %v; want it to wrap ErrNodeDeleted", cause)
	}
	s.Close()
	awaitLost(t, closed, "closed")
	if cause := context.Cause(closed); errors.Is(cause, dsync.ErrNodeDeleted) {
		t.Errorf("cause of a hold whose Session was closed = %v; want it not to wrap ErrNodeDeleted", cause)
	}
}
