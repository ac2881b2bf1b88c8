package dsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// watches returns the watches set on srv, as the sessions watching each
// path (four-letter word wchp).
func watches(t testing.TB, srv *zktest.Server) map[string][]int64 {
	t.Helper()
	m, err := srv.Watches(context.Background())
	if err != nil {
		t.Fatalf("watches: %v", err)
	}
	return m
}

// awaitWatch blocks until session id watches path on srv.
func awaitWatch(t testing.TB, srv *zktest.Server, path string, id int64) {
	t.Helper()
	awaitWatchBy(t, srv, path, func(context.Context) (int64, error) { return id, nil })
}

// awaitWatchOf blocks until sess's ZooKeeper session watches path on srv,
// and returns that session's id: the session it has at each look, so that
// a session lost and replaced on a loaded machine (the waiter then waits
// again on the next one) is followed rather than waited for in vain.
func awaitWatchOf(t testing.TB, srv *zktest.Server, path string, sess *zkconn.Session) int64 {
	t.Helper()
	return awaitWatchBy(t, srv, path, func(ctx context.Context) (int64, error) {
		h, err := sess.Current(ctx)
		if err != nil {
			return 0, err
		}
		return h.ID(), nil
	})
}

// awaitWatchBy blocks until the session id returns at a look watches path
// on srv, and returns that id; it fails the test after 30s.
func awaitWatchBy(t testing.TB, srv *zktest.Server, path string, id func(context.Context) (int64, error)) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last int64
	if err := srv.AwaitWatches(ctx, func(m map[string][]int64) bool {
		v, err := id(ctx)
		if err != nil {
			return false
		}
		last = v
		return slices.Contains(m[path], v)
	}); err != nil {
		t.Fatalf("session %#x never watched %s: %v; watches: %v", last, path, err, watches(t, srv))
	}
	return last
}

// watchesUnder returns the watched paths at or below root, leaving out the
// watches of obs (the test's observer).
func watchesUnder(t testing.TB, root string, obs *zk.Conn) []string {
	t.Helper()
	var left []string
	for p, ids := range watches(t, shared) {
		if p == root || strings.HasPrefix(p, root+"/") {
			if ids = slices.DeleteFunc(ids, func(id int64) bool { return id == obs.SessionID() }); len(ids) > 0 {
				left = append(left, p)
			}
		}
	}
	return left
}

// TestMutexDeepWaiterPredecessorLeaves: a waiter third in line whose
// predecessor leaves without having held the lock (gives up, or its session
// expires) must not take the lock on that departure: it lists again, waits
// for the holder, and takes the lock only when the holder releases. No
// watch is left behind.
func TestMutexDeepWaiterPredecessorLeaves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(cancel context.CancelFunc, p *zktest.Proxy)
	}{
		{"gives up", func(cancel context.CancelFunc, _ *zktest.Proxy) { cancel() }},
		{"expires", func(_ context.CancelFunc, p *zktest.Proxy) { p.BlackHole() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := lockPath(t)
			obs := observer(t, shared.Addr())
			proxy := zktest.NewProxy(t, shared.Addr())
			leaverSess := dial(t, []string{proxy.Addr()}, zkconn.WithSessionTimeout(2*time.Second))
			waiterSess := dial(t, []string{shared.Addr()})

			holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
			holder.Lock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			left := make(chan error, 1)
			go func() {
				_, err := dsync.NewMutex(leaverSess, path).LockContext(ctx)
				left <- err
			}()
			line := orderedNames(awaitChildren(t, obs, path, 2))
			holderNode, leaverNode := path+"/"+line[0], path+"/"+line[1]
			waiter := dsync.NewMutex(waiterSess, path)
			acquired := make(chan struct{})
			go func() {
				waiter.Lock()
				close(acquired)
			}()
			awaitChildren(t, obs, path, 3)
			awaitWatchOf(t, shared, leaverNode+".handoff", waiterSess)
			awaitWatchOf(t, shared, leaverNode, waiterSess)

			tc.leave(cancel, proxy)
			awaitChildren(t, obs, path, 2)
			awaitWatchOf(t, shared, holderNode, waiterSess) // listed again
			select {
			case <-acquired:
				t.Fatal("the waiter took the lock while the holder held it")
			default:
			}
			holder.Unlock()
			<-acquired
			waiter.Unlock()
			cancel()
			if err := <-left; !errors.Is(err, context.Canceled) {
				t.Fatalf("leaver: %v; want context.Canceled", err)
			}
			proxy.Heal()
			awaitChildren(t, obs, path, 0)
			if w := watchesUnder(t, path, obs); len(w) > 0 {
				t.Fatalf("watches left behind: %v", w)
			}
		})
	}
}

// orderedNames sorts lock node names into queue order (by sequence).
func orderedNames(names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(a[strings.LastIndex(a, "lock-"):], b[strings.LastIndex(b, "lock-"):])
	})
	return out
}

// TestMutexHandoffLeavesNoWatches: waiters that give up at several depths,
// with handoffs between the others, leave no watch behind. Waiter 2 gives
// up after waiter 1, whose handoff signal it was watching for: only its own
// departure can fire that watch.
func TestMutexHandoffLeavesNoWatches(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	const n = 6
	mus := make([]*dsync.Mutex, n)
	for i := range mus {
		mus[i] = dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	}
	mus[0].Lock()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, n)
	cancels := make([]context.CancelFunc, n)
	for i := 1; i < n; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		go func() {
			_, err := mus[i].LockContext(ctx)
			results <- result{i, err}
		}()
		awaitChildren(t, obs, path, i+1)
	}
	for _, i := range []int{1, 2, 4} {
		cancels[i]()
		if r := <-results; r.i != i || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("waiter %d: %v; want waiter %d canceled", r.i, r.err, i)
		}
	}
	mus[0].Unlock()
	for _, want := range []int{3, 5} {
		r := <-results
		if r.i != want || r.err != nil {
			t.Fatalf("waiter %d: %v; want waiter %d to acquire", r.i, r.err, want)
		}
		mus[r.i].Unlock()
	}
	for _, cancel := range cancels[1:] {
		cancel()
	}
	awaitChildren(t, obs, path, 0)
	if w := watchesUnder(t, path, obs); len(w) > 0 {
		t.Fatalf("watches left behind: %v", w)
	}
}

// TestMutexDeepBehindCurator: a waiter behind a node Curator made does not
// watch for a handoff signal (Curator sends none); it lists again when that
// node goes, and takes the lock after Curator's hold.
func TestMutexDeepBehindCurator(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	holder.Lock()
	javaWaiter, err := java.Hold(ctx, curator.Mutex, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer javaWaiter.Kill()
	waiterSess := dial(t, []string{shared.Addr()})
	waiter := dsync.NewMutex(waiterSess, path)
	acquired := make(chan struct{})
	go func() {
		waiter.Lock()
		close(acquired)
	}()
	javaNode := path + "/" + orderedNames(awaitChildren(t, obs, path, 3))[1]
	awaitWatchOf(t, shared, javaNode, waiterSess)
	if w := watches(t, shared)[javaNode+".handoff"]; len(w) > 0 {
		t.Fatalf("sessions %v watch for a handoff signal from Curator's node", w)
	}
	holder.Unlock()
	<-javaWaiter.Acquired()
	select {
	case <-acquired:
		t.Fatal("the waiter took the lock while Curator held it")
	default:
	}
	if err := javaWaiter.Release(); err != nil && !errors.Is(err, curator.ErrExited) {
		t.Fatal(err)
	}
	<-acquired
	waiter.Unlock()
	awaitChildren(t, obs, path, 0)
	if w := watchesUnder(t, path, obs); len(w) > 0 {
		t.Fatalf("watches left behind: %v", w)
	}
}

// TestMutexHandoffWithoutListing: a handoff costs the holder's delete and a
// notification. Neither the waiter second in line (its predecessor was
// first) nor the one third in line (its predecessor sends the handoff
// signal) sends a request between the release ahead of it and taking the
// lock.
func TestMutexHandoffWithoutListing(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	holder.Lock()
	type waiter struct {
		proxy    *zktest.Proxy
		sess     *zkconn.Session
		m        *dsync.Mutex
		acquired chan struct{}
	}
	var ws [2]waiter
	for i := range ws {
		w := &ws[i]
		w.proxy = zktest.NewProxy(t, shared.Addr())
		w.sess = dial(t, []string{w.proxy.Addr()})
		w.m = dsync.NewMutex(w.sess, path)
		w.acquired = make(chan struct{})
		go func() {
			w.m.Lock()
			close(w.acquired)
		}()
		awaitChildren(t, obs, path, i+2)
	}
	line := orderedNames(children(t, obs, path))
	for i, w := range ws {
		// Every watch a waiter sets before it waits, not only the one on
		// its predecessor: it sends them side by side (see follow), and
		// one written after that one's reply came back would be counted
		// below as a request of the handoff.
		id := sessionID(t, w.sess)
		awaitWatch(t, shared, path+"/"+line[i], id)
		awaitWatch(t, shared, path+"/"+line[i+1], id) // its own node
		if i > 0 {
			awaitWatch(t, shared, path+"/"+line[i]+".handoff", id)
		}
	}
	release := holder.Unlock
	for i, w := range ws {
		before := w.proxy.Requests()
		release()
		<-w.acquired
		if n := w.proxy.Requests() - before; n != 0 {
			t.Errorf("waiter %d in line sent %d requests between the release ahead and taking the lock; want 0", i+2, n)
		}
		release = w.m.Unlock
	}
	release()
	awaitChildren(t, obs, path, 0)
}

// TestMutexWaiterSeesWriteAhead: a write into the node ahead (Curator's
// revocation request, say) fires the waiter's watch without the node
// going: the waiter watches it again and keeps waiting.
func TestMutexWaiterSeesWriteAhead(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	holder := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	holder.Lock()
	waiterSess := dial(t, []string{shared.Addr()})
	waiter := dsync.NewMutex(waiterSess, path)
	acquired := make(chan struct{})
	go func() {
		waiter.Lock()
		close(acquired)
	}()
	holderNode := path + "/" + orderedNames(awaitChildren(t, obs, path, 2))[0]
	awaitWatchOf(t, shared, holderNode, waiterSess)
	if _, err := obs.Set(holderNode, []byte("__REVOKE__"), -1); err != nil {
		t.Fatal(err)
	}
	awaitWatchOf(t, shared, holderNode, waiterSess) // watched again
	select {
	case <-acquired:
		t.Fatal("the waiter took the lock after a write to the holder's node")
	default:
	}
	holder.Unlock()
	<-acquired
	waiter.Unlock()
	awaitChildren(t, obs, path, 0)
}
