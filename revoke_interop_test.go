package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
)

// TestRevokeRWMutexHolders: RevokeHolders on a read/write lock asks the
// readers ahead of the first writer (and not the writer waiting behind them),
// and a revocable writer once it holds; each learns of it through Revoked.
func TestRevokeRWMutexHolders(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	admin := dial(t, []string{shared.Addr()})
	r1 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	r2 := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	w := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path, dsync.Revocable())
	h1, err := r1.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r2.RLockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wdone := make(chan error, 1)
	var wheld context.Context
	go func() {
		var err error
		wheld, err = w.LockContext(ctx)
		wdone <- err
	}()
	awaitChildren(t, obs, path, 3)
	asked, err := dsync.RevokeHolders(ctx, admin, path)
	if err != nil || len(asked) != 2 || !asked[0].Reader || !asked[1].Reader {
		t.Fatalf("RevokeHolders = %+v, %v; want the two readers", asked, err)
	}
	awaitClosed(t, dsync.Revoked(h1), "first reader's Revoked")
	awaitClosed(t, dsync.Revoked(h2), "second reader's Revoked")
	if h1.Err() != nil || h2.Err() != nil {
		t.Fatal("a revocation request ended a read hold")
	}
	r1.RUnlock()
	r2.RUnlock()
	if err := <-wdone; err != nil {
		t.Fatal(err)
	}
	if isClosed(dsync.Revoked(wheld)) {
		t.Fatal("the writer, asked nothing while it waited, sees a request")
	}
	asked, err = dsync.RevokeHolders(ctx, admin, path)
	if err != nil || len(asked) != 1 || asked[0].Reader {
		t.Fatalf("RevokeHolders = %+v, %v; want the writer", asked, err)
	}
	awaitClosed(t, dsync.Revoked(wheld), "writer's Revoked")
	w.Unlock()
	awaitChildren(t, obs, path, 0)
}

// TestInteropRevoke: Curator's Revoker asks a revocable dsync holder, and
// dsync's Revoke asks a Curator holder made revocable (makeRevocable), for a
// mutex and for both sides of a read/write lock.
func TestInteropRevoke(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	for _, kind := range []string{curator.Mutex, curator.Read, curator.Write} {
		t.Run(kind, func(t *testing.T) {
			path := lockPath(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			obs := observer(t, shared.Addr())
			s := dial(t, []string{shared.Addr()})
			var (
				held   context.Context
				err    error
				unlock func()
			)
			switch kind {
			case curator.Mutex:
				m := dsync.NewMutex(s, path, dsync.Revocable())
				held, err = m.LockContext(ctx)
				unlock = m.Unlock
			case curator.Read:
				rw := dsync.NewRWMutex(s, path, dsync.Revocable())
				held, err = rw.RLockContext(ctx)
				unlock = rw.RUnlock
			default:
				rw := dsync.NewRWMutex(s, path, dsync.Revocable())
				held, err = rw.LockContext(ctx)
				unlock = rw.Unlock
			}
			if err != nil {
				t.Fatal(err)
			}
			node := children(t, obs, path)[0]
			if err := java.Revoke(ctx, shared.Addr(), path+"/"+node); err != nil {
				t.Fatal(err)
			}
			awaitClosed(t, dsync.Revoked(held), "Revoked after Curator's Revoker")
			unlock()
			awaitChildren(t, obs, path, 0)

			x, err := java.HoldRevocable(ctx, kind, shared.Addr(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Kill()
			<-x.Acquired()
			asked, err := dsync.RevokeHolders(ctx, s, path)
			if err != nil || len(asked) != 1 || asked[0].Path != x.Node() {
				t.Fatalf("RevokeHolders = %+v, %v; want Curator's node %s", asked, err, x.Node())
			}
			awaitClosed(t, x.Revoked(), "Curator's revocation listener")
			if err := x.Release(); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 0)
			if err := dsync.Revoke(ctx, s, x.Node()); !errors.Is(err, dsync.ErrNoNode) {
				t.Fatalf("Revoke of a released node = %v; want ErrNoNode", err)
			}
		})
	}
}
