package dsync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
)

// Review round 28: RWMutex, SemaphoreMutex, Revocable/Revoke/RevokeHolders.

// TestReviewR28ParticipantsSecondDowngradeHolds pins Participants (and so
// RevokeHolders) on a write hold downgraded twice: both read nodes hold.
func TestReviewR28ParticipantsSecondDowngradeHolds(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	admin := dial(t, []string{shared.Addr()})
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	wctx, err := rw.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.RLockContext(wctx)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(kinds(rwParticipants(t, rw)))
	asked, rerr := dsync.RevokeHolders(ctx, admin, path)
	seen1, seen2 := dsync.Revoked(r1), dsync.Revoked(r2)
	var late []string
	for _, ch := range []<-chan struct{}{seen1, seen2} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			late = append(late, "a downgrade's read hold never saw the request")
		}
	}
	rw.RUnlock()
	rw.RUnlock()
	rw.Unlock()
	awaitChildren(t, obs, path, 0)
	if got != "[W R R]" || rerr != nil || len(asked) != 3 || len(late) > 0 {
		t.Fatalf("write hold downgraded twice: Participants = %s (want [W R R]); RevokeHolders asked %d (want 3), err %v; %v",
			got, len(asked), rerr, late)
	}
}

// TestReviewR28WriterWaitsForLostReaderInProcess pins in-process exclusion of
// a writer by a reader whose hold was lost untold (RLock; its node deleted):
// TryLock/Lock of the same RWMutex must wait for its RUnlock, as Mutex and
// SemaphoreMutex keep their goroutines out until the lost holder's Unlock.
func TestReviewR28WriterWaitsForLostReaderInProcess(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	rw.RLock() // goroutine A reads: no hold context, nothing tells it of a loss
	kids := awaitChildren(t, obs, path, 1)
	if err := obs.Delete(path+"/"+kids[0], -1); err != nil { // an operator, or an expiry
		t.Fatal(err)
	}
	awaitChildren(t, obs, path, 0)
	got := rw.TryLock() // goroutine B of the same process writes
	if got {
		rw.Unlock()
	}
	rw.RUnlock() // A leaves its critical section only now
	awaitChildren(t, obs, path, 0)
	if got {
		t.Fatal("TryLock succeeded while a reader of this process (RLock, its node lost, never told) had not called RUnlock: writer and reader overlap in one process")
	}
}
