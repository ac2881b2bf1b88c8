package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r93Pair dials a Session through two proxies, one to each of the
// ensemble's members other than except (-1: none), and returns it with the
// proxy its connection goes through (cur) and the other one.
func r93Pair(t *testing.T, e *zktest.Ensemble, except int, timeout time.Duration, opts ...zkconn.Option) (s *zkconn.Session, cur, other *zktest.Proxy) {
	t.Helper()
	var ps []*zktest.Proxy
	for i := range e.Len() {
		if i != except && len(ps) < 2 {
			ps = append(ps, zktest.NewProxy(t, e.Server(i).Addr()))
		}
	}
	s = dial(t, []string{ps[0].Addr(), ps[1].Addr()}, append(opts, zkconn.WithSessionTimeout(timeout))...)
	switch {
	case ps[0].Conns() == 1 && ps[1].Conns() == 0:
		return s, ps[0], ps[1]
	case ps[1].Conns() == 1 && ps[0].Conns() == 0:
		return s, ps[1], ps[0]
	}
	t.Fatalf("connections through the proxies: %d and %d; want one", ps[0].Conns(), ps[1].Conns())
	return
}

// r93Leader returns the ensemble's leader.
func r93Leader(t *testing.T, e *zktest.Ensemble) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// r93Until waits for sub's first transition to one of states, within d.
func r93Until(t *testing.T, sub *zkconn.Subscription, d time.Duration, states ...zkconn.State) zkconn.Event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev := <-sub.C():
			for _, st := range states {
				if ev.State == st {
					return ev
				}
			}
		case <-timeout:
			t.Fatalf("none of %v within %v", states, d)
		}
	}
}

// r93Await waits within d for err from got and fails the test if it is
// not nil, or with msg if none comes.
func r93Await(t *testing.T, got <-chan error, d time.Duration, msg string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		t.Fatal(msg)
	}
}

// r93NoWatches waits until no server of e holds a watch on a path under
// root whose name contains part.
func r93NoWatches(t *testing.T, e *zktest.Ensemble, root, part string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i := range e.Len() {
		var last map[string][]int64
		err := e.Server(i).AwaitWatches(ctx, func(m map[string][]int64) bool {
			last = m
			for p := range m {
				if strings.HasPrefix(p, root+"/") && strings.Contains(p, part) {
					return false
				}
			}
			return true
		})
		if err != nil {
			var left []string
			for p, ids := range last {
				if strings.HasPrefix(p, root+"/") && strings.Contains(p, part) {
					left = append(left, fmt.Sprintf("%s %#x", p, ids))
				}
			}
			t.Fatalf("server %d still holds watches under %s: %v", i, root, left)
		}
	}
}

// TestReviewR93Ensemble: holds, waiters and records on a 3-server
// ensemble, through failovers (one ensemble for all subtests).
func TestReviewR93Ensemble(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// A hold under LostOnExpiry, whose connection drops while the only
	// other server it knows accepts connections but never answers (a
	// partition between client and that server): its own server is
	// healthy and reachable, and the session must survive there, the hold
	// with it. go-zookeeper waits ten times two thirds of the session
	// timeout for the silent server's connect response, and the Session
	// gives the session (and the hold) up shortly before one session
	// timeout.
	t.Run("ExpiryHoldSurvivesSilentServer", func(t *testing.T) {
		path := lockPath(t)
		s, cur, other := r93Pair(t, e, -1, 6*time.Second) // back after 3s and go-zookeeper's 1s pause
		sub := s.Subscribe()
		defer sub.Stop()
		m := dsync.NewMutex(s, path, dsync.WithLossPolicy(dsync.LostOnExpiry))
		held, err := m.LockContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Unlock()
		waiter := dsync.NewMutex(dial(t, e.Addrs()), path)
		got := make(chan error, 1)
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		go func() {
			_, err := waiter.LockContext(wctx)
			if err == nil {
				waiter.Unlock()
			}
			got <- err
		}()
		obs := observer(t, e.Addrs()...)
		awaitChildren(t, obs, path, 2)
		other.BlackHole()
		// The cut comes right after a ping reply: the session is back
		// about 4s after what the server last heard, well ahead of the
		// give-up shortly before 6s (a cut anywhere in the ping cycle, up
		// to 2s later, would leave too little room on a loaded machine).
		select {
		case <-cur.BlackHoleAfterPing():
		case <-ctx.Done():
			t.Fatal("no ping reply through the proxy")
		}
		start := time.Now()
		cur.Cut()
		cur.Heal()
		ev := r93Until(t, sub, 30*time.Second, zkconn.StateReconnected, zkconn.StateLost)
		if ev.State != zkconn.StateReconnected || held.Err() != nil {
			t.Fatalf("%v %v after the cut (its server reachable all along); hold: %v", ev.State, time.Since(start).Round(time.Millisecond), context.Cause(held))
		}
		select {
		case err := <-got:
			t.Fatalf("waiter returned %v while the hold lives", err)
		default:
		}
		m.Unlock()
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		m.Lock() // for the deferred Unlock
	})

	// A waiter whose connection is partitioned just before its
	// predecessor (the holder) unlocks, and which moves to another server
	// once it finds its connection deaf: the setWatches there reports the
	// deletion, and the waiter holds.
	t.Run("WaiterWakesAfterFailover", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		ws, cur, _ := r93Pair(t, e, leader, 4*time.Second)
		holder := dsync.NewMutex(dial(t, []string{e.Server(leader).Addr()}), path)
		waiter := dsync.NewMutex(ws, path)
		if _, err := holder.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		var wheld atomic.Value
		go func() {
			h, err := waiter.LockContext(ctx)
			if err == nil {
				wheld.Store(h)
			}
			got <- err
		}()
		obs := observer(t, e.Addrs()...)
		awaitChildren(t, obs, path, 2)
		cur.BlackHole()
		holder.Unlock()
		awaitChildren(t, obs, path, 1)
		r93Await(t, got, 30*time.Second, "the waiter does not hold 30s after the lock was freed")
		if h := wheld.Load().(context.Context); h.Err() != nil {
			t.Fatalf("hold ended: %v", context.Cause(h))
		}
		waiter.Unlock()
		awaitChildren(t, obs, path, 0)
		r93NoWatches(t, e, path, "")
	})

	// A waiter second in line behind a dsync waiter: while its connection
	// is partitioned, the holder unlocks, the waiter ahead takes the lock
	// and unlocks (sending its handoff signal, which no server tells the
	// partitioned waiter of). Moved to another server, it learns of the
	// deletion, not of the signal: it lists again, holds, takes its watch
	// on the signal back, and leaves no watch behind.
	t.Run("DeepWaiterMissesHandoffSignal", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		ws, cur, _ := r93Pair(t, e, leader, 4*time.Second)
		holder := dsync.NewMutex(dial(t, []string{e.Server(leader).Addr()}), path)
		mid := dsync.NewMutex(dial(t, []string{e.Server(leader).Addr()}), path)
		waiter := dsync.NewMutex(ws, path)
		if _, err := holder.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		obs := observer(t, e.Addrs()...)
		midHeld := make(chan error, 1)
		go func() { _, err := mid.LockContext(ctx); midHeld <- err }()
		awaitChildren(t, obs, path, 2)
		got := make(chan error, 1)
		go func() {
			_, err := waiter.LockContext(ctx)
			got <- err
		}()
		awaitChildren(t, obs, path, 3)
		// Its watches are set: on mid's node and on mid's signal.
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		id := sessionID(t, ws)
		if err := e.Server(cur2member(t, e, cur)).AwaitWatches(wctx, func(m map[string][]int64) bool {
			n := 0
			for p, ids := range m {
				if strings.HasPrefix(p, path+"/") {
					for _, x := range ids {
						if x == id {
							n++
						}
					}
				}
			}
			return n >= 3 // its own node, mid's node, mid's signal
		}); err != nil {
			t.Fatal(err)
		}
		cur.BlackHole()
		holder.Unlock()
		if err := <-midHeld; err != nil {
			t.Fatal(err)
		}
		mid.Unlock()
		r93Await(t, got, 30*time.Second, "the waiter does not hold 30s after the lock was freed")
		// Its watch on mid's signal was taken back as it listed again:
		// none is left while it holds.
		r93NoWatches(t, e, path, ".handoff")
		waiter.Unlock()
		awaitChildren(t, obs, path, 0)
		r93NoWatches(t, e, path, "")
	})

	// A semaphore of 1: an acquirer's lease create is applied and its reply
	// lost (Lose) while another process holds the lease; its session moves
	// to the other server it knows, finds its lease there (after a sync),
	// waits, and holds once the holder releases. Never two leases held, and
	// nothing left.
	t.Run("WeightedLeaseCreateLostFailover", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		bs, cur, other := r93Pair(t, e, leader, 6*time.Second)
		a := dsync.NewWeighted(dial(t, []string{e.Server(leader).Addr()}), path, 1)
		b := dsync.NewWeighted(bs, path, 1)
		la, err := a.AcquireLeases(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		f := cur.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/leases/", Prefix: true}, zktest.Lose)
		got := make(chan []*dsync.Lease, 1)
		go func() {
			ls, err := b.AcquireLeases(ctx, 1)
			if err != nil {
				t.Error(err)
			}
			got <- ls
		}()
		zktest.AwaitStruck(t, f)
		obs := observer(t, e.Addrs()...)
		awaitChildren(t, obs, path+"/leases", 2)
		// b's session is on the other server now, and waits there.
		if err := other.AwaitConns(ctx, 1); err != nil {
			t.Fatalf("b's session not on the other server: %v", err)
		}
		select {
		case <-got:
			t.Fatal("b holds a lease while a's is held")
		default:
		}
		if la[0].Context().Err() != nil {
			t.Fatalf("a's lease ended: %v", context.Cause(la[0].Context()))
		}
		la[0].Release()
		var lb []*dsync.Lease
		select {
		case lb = <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("b does not hold 30s after a released")
		}
		if lb == nil {
			t.FailNow()
		}
		if k := awaitChildren(t, obs, path+"/leases", 1); k[0] != lb[0].Node() {
			t.Fatalf("leases %v; want b's %s", k, lb[0].Node())
		}
		awaitChildren(t, obs, path+"/locks", 0)
		lb[0].Release()
		awaitChildren(t, obs, path+"/leases", 0)
	})

	// A writer waits behind a writer that downgrades (a read node at its
	// place, a write to its node) and unlocks its write side while the
	// waiter's connection is partitioned: moved to another server, the
	// waiter learns of the deletion alone (setWatches reports what is
	// there now, not the write before it). It must not take the write lock
	// while the downgraded reader reads, and takes it once it leaves.
	t.Run("RWMutexDowngradeWhileWaiterPartitioned", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		ws, cur, _ := r93Pair(t, e, leader, 4*time.Second)
		first := dsync.NewRWMutex(dial(t, []string{e.Server(leader).Addr()}), path)
		waiter := dsync.NewRWMutex(ws, path)
		held, err := first.LockContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := waiter.LockContext(ctx)
			got <- err
		}()
		obs := observer(t, e.Addrs()...)
		awaitChildren(t, obs, path, 2)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		id := sessionID(t, ws)
		if err := e.Server(cur2member(t, e, cur)).AwaitWatches(wctx, func(m map[string][]int64) bool {
			n := 0
			for p, ids := range m {
				if strings.HasPrefix(p, path+"/") && !strings.HasSuffix(p, ".handoff") {
					for _, x := range ids {
						if x == id {
							n++
						}
					}
				}
			}
			return n >= 2 // its own node and the writer's
		}); err != nil {
			t.Fatal(err)
		}
		sub := ws.Subscribe()
		defer sub.Stop()
		cur.BlackHole()
		read, err := first.RLockContext(held)
		if err != nil {
			t.Fatal(err)
		}
		first.Unlock()
		awaitChildren(t, obs, path, 2) // the read node and the waiter's
		// The waiter moves to the other server (deaf after two thirds of
		// the session timeout), lists there and follows the read node.
		if ev := r93Until(t, sub, 30*time.Second, zkconn.StateReconnected, zkconn.StateLost); ev.State != zkconn.StateReconnected {
			t.Fatalf("waiter's session %v", ev.State)
		}
		awaited := make(chan error, 1)
		gone := cur2member(t, e, cur)
		go func() {
			var err error
			for i := range e.Len() {
				if i == gone || err != nil {
					continue
				}
				mode, merr := e.Server(i).Mode(wctx)
				if merr != nil || mode == "leader" {
					continue
				}
				err = e.Server(i).AwaitWatches(wctx, func(m map[string][]int64) bool {
					for p, ids := range m {
						if strings.HasPrefix(p, path+"/") && strings.Contains(p, "__READ__") && slices.Contains(ids, id) {
							return true
						}
					}
					return false
				})
			}
			awaited <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("waiter took the write lock (%v) while the downgraded reader reads (%v)", err, read.Err())
		case err := <-awaited:
			if err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-got:
			t.Fatalf("waiter took the write lock (%v) while the downgraded reader reads (%v)", err, read.Err())
		default:
		}
		first.RUnlock()
		r93Await(t, got, 30*time.Second, "the waiter does not hold 30s after the reader left")
		waiter.Unlock()
		awaitChildren(t, obs, path, 0)
	})

	// The leader stops while an Unlock's delete is swallowed (a black hole
	// at the delete: not applied, and the connection silent): the delete is
	// sent again on the next connection, once a new leader serves; the
	// waiter holds, and no node is left.
	t.Run("LeaderStopsWithUnlockDeleteOut", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		hs, cur, _ := r93Pair(t, e, leader, 8*time.Second)
		holder := dsync.NewMutex(hs, path)
		waiter := dsync.NewMutex(dial(t, e.Addrs(), zkconn.WithSessionTimeout(8*time.Second)), path)
		if _, err := holder.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := waiter.LockContext(ctx)
			got <- err
		}()
		obs := observer(t, e.Addrs()...)
		kids := awaitChildren(t, obs, path, 2)
		f := cur.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/", Prefix: true}, zktest.BlackHole)
		holder.Unlock()
		zktest.AwaitStruck(t, f)
		if err := e.Server(leader).Stop(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := e.Server(leader).Restart(); err != nil {
				t.Error(err)
			}
			if err := e.WaitQuorum(ctx); err != nil {
				t.Error(err)
			}
		}()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the waiter does not hold 60s after Unlock (nodes then: %v)", kids)
		}
		obs2 := observer(t, e.Addrs()...)
		if k := children(t, obs2, path); len(k) != 1 {
			t.Fatalf("children %v; want the waiter's alone", k)
		}
		waiter.Unlock()
		awaitChildren(t, obs2, path, 0)
	})

	// The ensemble's leader stops under an Election's leader (connected to
	// a follower) whose LossPolicy is LostOnExpiry: the follower drops its
	// clients, a new leader restarts every session's timer, the session
	// reconnects, and the leadership lasts; the other participant does not
	// lead until the first resigns. Leader reads across the failover show
	// the first.
	t.Run("ExpiryElectionAcrossLeaderStop", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		s1, _, _ := r93Pair(t, e, leader, 8*time.Second)
		sub := s1.Subscribe()
		defer sub.Stop()
		e1 := dsync.NewElection(s1, path, dsync.WithLossPolicy(dsync.LostOnExpiry))
		led, err := e1.Campaign(ctx, "one")
		if err != nil {
			t.Fatal(err)
		}
		e2 := dsync.NewElection(dial(t, e.Addrs(), zkconn.WithSessionTimeout(8*time.Second)), path)
		second := campaign(ctx, e2, "two")
		obs := observer(t, e.Addrs()...)
		awaitChildren(t, obs, path, 2)
		if err := e.Server(leader).Stop(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := e.Server(leader).Restart(); err != nil {
				t.Error(err)
			}
			if err := e.WaitQuorum(ctx); err != nil {
				t.Error(err)
			}
		}()
		r93Until(t, sub, 30*time.Second, zkconn.StateSuspended, zkconn.StateLost)
		if ev := r93Until(t, sub, 30*time.Second, zkconn.StateReconnected, zkconn.StateLost); ev.State != zkconn.StateReconnected {
			t.Fatalf("first participant's session %v", ev.State)
		}
		if led.Err() != nil {
			t.Fatalf("leadership ended across the failover: %v", context.Cause(led))
		}
		select {
		case err := <-second:
			t.Fatalf("second participant's Campaign returned %v while the first leads", err)
		default:
		}
		for _, el := range []*dsync.Election{e1, e2} {
			p, err := el.Leader(ctx)
			if err != nil || p.Path != e1.Key() {
				t.Fatalf("Leader() = %+v, %v; want %s", p, err, e1.Key())
			}
		}
		if err := e1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r93Await(t, second, 30*time.Second, "second participant does not lead 30s after the first resigned")
		if err := e2.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})

	// A Once whose record's transaction is applied and its reply lost
	// (Lose) just as the leader stops: Do decides the outcome on the next
	// server and returns nil; f ran once, and a second Do does not run it.
	t.Run("OnceRecordLostAcrossLeaderStop", func(t *testing.T) {
		path := lockPath(t)
		leader := r93Leader(t, e)
		s, cur, _ := r93Pair(t, e, leader, 8*time.Second)
		o := dsync.NewOnce(s, path)
		f := cur.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/done"}, zktest.Lose)
		var runs atomic.Int32
		stopped := make(chan error, 1)
		err := o.Do(ctx, func(context.Context) error {
			runs.Add(1)
			go func() {
				<-f.Struck()
				stopped <- e.Server(leader).Stop()
			}()
			return nil
		})
		select {
		case serr := <-stopped:
			if serr != nil {
				t.Fatal(serr)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Do = %v, and the record's transaction was never struck", err)
		}
		defer func() {
			if err := e.Server(leader).Restart(); err != nil {
				t.Error(err)
			}
			if err := e.WaitQuorum(ctx); err != nil {
				t.Error(err)
			}
		}()
		if err != nil && !errors.Is(err, dsync.ErrLockLost) {
			t.Fatalf("Do = %v", err)
		}
		other := dsync.NewOnce(dial(t, e.Addrs()), path)
		if err := other.Do(ctx, func(context.Context) error { runs.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		want := int32(1)
		if err != nil {
			want = 2 // not recorded: run again, once
		}
		if n := runs.Load(); n != want {
			t.Fatalf("f ran %d times (first Do: %v); want %d", n, err, want)
		}
	})
}

// cur2member returns the member p forwards to.
func cur2member(t *testing.T, e *zktest.Ensemble, p *zktest.Proxy) int {
	t.Helper()
	for i := range e.Len() {
		if e.Server(i).Addr() == p.Target() {
			return i
		}
	}
	t.Fatalf("proxy to %s: no such member", p.Target())
	return -1
}
