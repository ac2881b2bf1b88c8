package dsync_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// multiMembers returns a Mutex at path/a, a SemaphoreMutex at path/b and a
// Mutex at path/c, on s.
func multiMembers(s *zkconn.Session, path string) (a *dsync.Mutex, b *dsync.SemaphoreMutex, c *dsync.Mutex) {
	return dsync.NewMutex(s, path+"/a"), dsync.NewSemaphoreMutex(s, path+"/b"), dsync.NewMutex(s, path+"/c")
}

// awaitMultiEmpty waits until no node of multiMembers' locks is left.
func awaitMultiEmpty(t *testing.T, path string) {
	t.Helper()
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path+"/a", 0)
	awaitChildren(t, obs, path+"/b/leases", 0)
	awaitChildren(t, obs, path+"/b/locks", 0)
	awaitChildren(t, obs, path+"/c", 0)
}

// TestMultiLockNoDeadlock: MultiLocks over the same paths given in opposite
// orders, from several sessions, from goroutines sharing a MultiLock, and
// from two MultiLocks sharing members, never deadlock and never overlap
// (with each other, or with a plain Mutex on one of the paths). Curator's
// given-order acquisition deadlocks here.
func TestMultiLockNoDeadlock(t *testing.T) {
	t.Parallel()
	const cycles = 8
	path := lockPath(t)
	var (
		lockers []sync.Locker
		ctxers  []*dsync.MultiLock
	)
	for i := 0; i < 3; i++ {
		a, b, c := multiMembers(dial(t, []string{shared.Addr()}), path)
		if i%2 == 0 {
			ctxers = append(ctxers, dsync.NewMultiLock(a, b, c))
		} else {
			ctxers = append(ctxers, dsync.NewMultiLock(c, b, a))
		}
	}
	ctxers = append(ctxers, ctxers[0]) // two goroutines, one MultiLock
	a, b, c := multiMembers(dial(t, []string{shared.Addr()}), path)
	ctxers = append(ctxers, dsync.NewMultiLock(a, b, c), dsync.NewMultiLock(b, c, a)) // shared members
	lockers = append(lockers, dsync.NewMutex(dial(t, []string{shared.Addr()}), path+"/a"))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a deadlock fails, not hangs
	defer cancel()
	var (
		cs critical
		wg sync.WaitGroup
	)
	for _, ml := range ctxers {
		wg.Go(func() {
			for range cycles {
				held, err := ml.LockContext(ctx)
				if err != nil {
					t.Errorf("LockContext = %v (deadlocked?)", err)
					return
				}
				cs.run()
				if held.Err() != nil {
					t.Errorf("hold ended inside: %v", context.Cause(held))
				}
				ml.Unlock()
			}
		})
	}
	for _, l := range lockers {
		wg.Go(func() {
			for range cycles {
				l.Lock()
				cs.run()
				l.Unlock()
			}
		})
	}
	wg.Wait()
	cs.check(t, int64((len(ctxers)+len(lockers))*cycles))
	awaitMultiEmpty(t, path)
}

// TestMultiLockAllOrNone: with one member held by another session, a
// MultiLock that fails (would block, ctx canceled while waiting, deadline)
// holds none of its members and leaves no node; once that member is free it
// holds them all, and excludes others from each.
func TestMultiLockAllOrNone(t *testing.T) {
	t.Parallel()
	for _, blocked := range []string{"b", "c"} {
		t.Run(blocked, func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			other := dial(t, []string{shared.Addr()})
			var holder sync.Locker = dsync.NewMutex(other, path+"/c")
			if blocked == "b" {
				holder = dsync.NewSemaphoreMutex(other, path+"/b")
			}
			holder.Lock()
			a, b, c := multiMembers(dial(t, []string{shared.Addr()}), path)
			ml := dsync.NewMultiLock(c, a, b)
			blockedNode := map[string]string{"b": path + "/b/leases", "c": path + "/c"}[blocked]

			_, err := ml.TryLockContext(context.Background())
			if !errors.Is(err, dsync.ErrWouldBlock) || !strings.Contains(err.Error(), path+"/"+blocked) {
				t.Fatalf("TryLockContext = %v; want ErrWouldBlock naming %s", err, path+"/"+blocked)
			}
			if ml.TryLock() {
				t.Fatal("TryLock succeeded with a member held elsewhere")
			}
			awaitChildren(t, obs, path+"/a", 0)
			awaitChildren(t, obs, blockedNode, 1)

			short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if _, err := ml.LockContext(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("LockContext(timeout) = %v; want DeadlineExceeded", err)
			}

			awaitChildren(t, obs, path+"/a", 0) // the attempts' deletes are done
			awaitChildren(t, obs, path+"/b/locks", 0)
			awaitChildren(t, obs, blockedNode, 1)

			// Canceled while it holds a (and b) and waits for the blocked one.
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := ml.LockContext(ctx)
				errc <- err
			}()
			if blocked == "b" {
				awaitChildren(t, obs, path+"/b/locks", 1) // in the internal lock, waiting for the lease
			} else {
				awaitChildren(t, obs, path+"/c", 2)
			}
			awaitChildren(t, obs, path+"/a", 1)
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("LockContext canceled while waiting = %v; want context.Canceled", err)
			}
			awaitChildren(t, obs, path+"/a", 0)
			awaitChildren(t, obs, path+"/b/locks", 0)
			awaitChildren(t, obs, blockedNode, 1)
			if blocked == "c" {
				awaitChildren(t, obs, path+"/b/leases", 0)
			}

			holder.Unlock()
			held, err := ml.LockContext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if a.TryLock() || b.TryLock() || c.TryLock() {
				t.Fatal("a member locked (in this process) while the MultiLock holds it")
			}
			if _, err := ml.TryLockContext(context.Background()); err != dsync.ErrWouldBlock {
				t.Fatalf("TryLockContext while the MultiLock holds = %v; want ErrWouldBlock", err)
			}
			a2, b2, c2 := multiMembers(other, path)
			if a2.TryLock() || b2.TryLock() || c2.TryLock() {
				t.Fatal("a member's path locked by another session while the MultiLock holds it")
			}
			if a.Token() == 0 || b.Token() == 0 || c.Token() == 0 {
				t.Fatalf("member tokens %d, %d, %d while held; want > 0", a.Token(), b.Token(), c.Token())
			}
			ml.Unlock()
			if cause := context.Cause(held); !errors.Is(cause, context.Canceled) {
				t.Fatalf("cause after Unlock = %v; want context.Canceled", cause)
			}
			awaitMultiEmpty(t, path)
		})
	}
}

// TestMultiLockMemberLost: a member's node deleted by someone else ends the
// MultiLock's hold with that member's cause; Unlock still releases them all.
func TestMultiLockMemberLost(t *testing.T) {
	t.Parallel()
	for _, member := range []string{"a", "b/leases"} {
		t.Run(strings.ReplaceAll(member, "/", "_"), func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			a, b, c := multiMembers(dial(t, []string{shared.Addr()}), path)
			ml := dsync.NewMultiLock(a, b, c)
			type key struct{}
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Minute)
			held, err := ml.LockContext(ctx)
			cancel() // bounds the wait only
			if err != nil {
				t.Fatal(err)
			}
			if held.Value(key{}) != "v" || held.Err() != nil {
				t.Fatalf("hold context: value %v, err %v; want ctx's value and alive", held.Value(key{}), held.Err())
			}
			if _, ok := held.Deadline(); ok {
				t.Fatal("hold context has ctx's deadline")
			}
			kids := children(t, obs, path+"/"+member)
			if len(kids) != 1 {
				t.Fatalf("children of %s = %v; want one", member, kids)
			}
			node := path + "/" + member + "/" + kids[0]
			if err := obs.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			<-held.Done()
			if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) || !strings.Contains(cause.Error(), node) {
				t.Fatalf("cause = %v; want ErrLockLost naming %s", cause, node)
			}
			ml.Unlock() // returns normally after a loss
			awaitMultiEmpty(t, path)
			if _, err := ml.TryLockContext(context.Background()); err != nil {
				t.Fatalf("TryLockContext after a lost hold = %v", err)
			}
			ml.Unlock()
			awaitMultiEmpty(t, path)
		})
	}
}

// TestMultiLockBadInput: bad members are an error of every call, before
// anything is sent to ZooKeeper, and a panic of Lock.
func TestMultiLockBadInput(t *testing.T) {
	path := lockPath(t)
	s := dial(t, []string{shared.Addr()})
	good := dsync.NewMutex(s, path+"/0") // sorts first: taken first if nothing checked
	for _, tt := range []struct {
		name string
		ml   *dsync.MultiLock
		want error
	}{
		{"none", dsync.NewMultiLock(), dsync.ErrBadMember},
		{"zero", &dsync.MultiLock{}, dsync.ErrBadMember},
		{"nil", dsync.NewMultiLock(good, nil), dsync.ErrBadMember},
		{"nil *Mutex", dsync.NewMultiLock(good, (*dsync.Mutex)(nil)), dsync.ErrBadMember},
		{"sync.Mutex", dsync.NewMultiLock(good, &sync.Mutex{}), dsync.ErrBadMember},
		{"same Mutex twice", dsync.NewMultiLock(dsync.NewMutex(s, path+"/a"), good, good), dsync.ErrBadMember},
		{"one path twice", dsync.NewMultiLock(good, dsync.NewMutex(s, path+"/a"), dsync.NewSemaphoreMutex(s, path+"/a")), dsync.ErrBadMember},
		{"bad path", dsync.NewMultiLock(good, dsync.NewMutex(s, path+"/a/")), dsync.ErrBadPath},
		{"bad SemaphoreMutex path", dsync.NewMultiLock(good, dsync.NewSemaphoreMutex(s, "relative")), dsync.ErrBadPath},
		{"nil session", dsync.NewMultiLock(good, dsync.NewSemaphoreMutex(nil, path+"/a")), dsync.ErrNilSession},
	} {
		if _, err := tt.ml.LockContext(context.Background()); !errors.Is(err, tt.want) {
			t.Errorf("%s: LockContext = %v; want %v", tt.name, err, tt.want)
		}
		if _, err := tt.ml.TryLockContext(context.Background()); !errors.Is(err, tt.want) {
			t.Errorf("%s: TryLockContext = %v; want %v", tt.name, err, tt.want)
		}
		if tt.ml.TryLock() {
			t.Errorf("%s: TryLock succeeded", tt.name)
		}
		expectPanic(t, "dsync: Lock: ", tt.ml.Lock)
		expectPanic(t, "dsync: unlock of unlocked multilock", tt.ml.Unlock)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dsync.NewMultiLock(good, dsync.NewMutex(s, path+"/a")).LockContext(done); !errors.Is(err, context.Canceled) {
		t.Errorf("LockContext(canceled) = %v; want context.Canceled", err)
	}
	if ok, _, err := observer(t, shared.Addr()).Exists(path); err != nil || ok {
		t.Fatalf("Exists(%s) = %v, %v; want nothing written", path, ok, err)
	}
}

// TestMultiLockUnlock: Unlock of an unlocked MultiLock panics; a member
// unlocked behind the MultiLock's back makes its Unlock panic, but only
// after the other members are released.
func TestMultiLockUnlock(t *testing.T) {
	path := lockPath(t)
	a, b, c := multiMembers(dial(t, []string{shared.Addr()}), path)
	ml := dsync.NewMultiLock(a, b, c)
	expectPanic(t, "dsync: unlock of unlocked multilock", ml.Unlock)
	ml.Lock()
	ml.Unlock()
	expectPanic(t, "dsync: unlock of unlocked multilock", ml.Unlock)

	ml.Lock()
	b.Unlock() // misuse
	expectPanic(t, "dsync: unlock of unlocked mutex", ml.Unlock)
	awaitMultiEmpty(t, path)
	for _, l := range []interface{ TryLock() bool }{a, b, c} {
		if !l.TryLock() {
			t.Fatal("a member still held after the MultiLock's Unlock panicked")
		}
	}
	a.Unlock()
	b.Unlock()
	c.Unlock()
}
