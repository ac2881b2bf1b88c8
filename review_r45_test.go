package dsync_test

import (
	"context"
	"errors"
	"fmt"
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

// Review round 45: dsync and real Curator 5.4.0 sharing one lock while the
// dsync side's network faults at an exact request. No defect was found;
// these tests pin what was checked.

// r45Start returns a test's context (bounded: two minutes), its lock path
// and an observer.
func r45Start(t *testing.T) (context.Context, string, *zk.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, lockPath(t), observer(t, shared.Addr())
}

// r45Proxied returns a Session through a fresh proxy, with a session
// timeout long enough that no ping closes a connection whose reply was
// dropped before the test's next step does.
func r45Proxied(t *testing.T) (*zktest.Proxy, *zkconn.Session) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	return p, dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(10*time.Second))
}

// r45Only returns the single child of path that is not in others.
func r45Only(t *testing.T, obs *zk.Conn, path string, n int, others ...string) string {
	t.Helper()
	kids := slices.DeleteFunc(awaitChildren(t, obs, path, n), func(k string) bool { return slices.Contains(others, k) })
	if len(kids) != 1 {
		t.Fatalf("children of %s besides %v = %v; want one", path, others, kids)
	}
	return kids[0]
}

var r45Actions = []zktest.Action{zktest.Cut, zktest.Lose, zktest.Drop}

// TestReviewR45MutexReleaseFaultCuratorBehind: a dsync Mutex holder (first
// at creation, so its release is a plain delete; or one that waited behind
// a Curator holder, so its release is the handoff multi) with a Curator
// InterProcessMutex waiting behind it. Its release's delete is Cut (not
// applied, sent again after the reconnect), Lost or Dropped (applied, the
// reply never read). Curator must get the lock only after the dsync hold
// context ended, exactly once; a LockContext of the same Mutex right after
// must queue behind Curator (not overtake it, not hold beside it), and
// every dsync node must be gone at the end.
func TestReviewR45MutexReleaseFaultCuratorBehind(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, waited := range []bool{false, true} {
		for _, a := range r45Actions {
			t.Run(fmt.Sprintf("%v/waited=%v", a, waited), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				p, s := r45Proxied(t)
				m := dsync.NewMutex(s, path)
				var ahead *curator.Holder
				if waited {
					ahead = holdCurator(t, ctx, curator.Mutex, path)
					awaitCurator(t, ctx, ahead, "first Curator holder")
				}
				res := lockRW(ctx, m.LockContext)
				if waited {
					awaitChildren(t, obs, path, 2)
					releaseCurator(t, ahead)
				}
				held := awaitLocked(t, res, "dsync LockContext")
				node := path + "/" + awaitChildren(t, obs, path, 1)[0]
				behind := holdCurator(t, ctx, curator.Mutex, path)
				curatorWaits(t, behind, "Curator behind the dsync holder")
				f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, a)
				m.Unlock()
				zktest.AwaitStruck(t, f)
				if held.Err() == nil {
					t.Fatal("hold context live after Unlock")
				}
				awaitCurator(t, ctx, behind, "Curator behind the dsync holder")
				res2 := lockRW(ctx, m.LockContext)
				mine := r45Only(t, obs, path, 2, strings.TrimPrefix(behind.Node(), path+"/"))
				if !zkconn.IsNative(mine) {
					t.Fatalf("second node %s is not dsync's", mine)
				}
				ps, err := m.Participants(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(ps) != 2 || ps[0].Path != behind.Node() || ps[1].Node != mine {
					t.Errorf("Participants = %v; want Curator's %s first, then dsync's %s", ps, behind.Node(), mine)
				}
				goWaits(t, res2, "dsync LockContext while Curator holds")
				releaseCurator(t, behind)
				awaitLocked(t, res2, "dsync LockContext after Curator")
				m.Unlock()
				awaitChildren(t, obs, path, 0)
			})
		}
	}
}

// TestReviewR45MutexCreateFaultWhileCuratorReleases: a Curator holder; a
// dsync LockContext whose create is Lost or Dropped (applied, reply never
// read: the node is recovered after the reconnect) or Cut (created again
// after it); a second Curator client queues behind dsync's node; the first
// Curator holder releases while dsync recovers. dsync must hold, alone,
// with one node; the Curator waiter gets in only after dsync's Unlock.
func TestReviewR45MutexCreateFaultWhileCuratorReleases(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, a := range r45Actions {
		t.Run(a.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			p, s := r45Proxied(t)
			m := dsync.NewMutex(s, path)
			first := holdCurator(t, ctx, curator.Mutex, path)
			awaitCurator(t, ctx, first, "first Curator holder")
			fnode := strings.TrimPrefix(first.Node(), path+"/")
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path + "/", Prefix: true}, a)
			res := lockRW(ctx, m.LockContext)
			zktest.AwaitStruck(t, f)
			mine := r45Only(t, obs, path, 2, fnode)
			behind := holdCurator(t, ctx, curator.Mutex, path)
			awaitChildren(t, obs, path, 3)
			releaseCurator(t, first)
			held := awaitLocked(t, res, "dsync LockContext")
			if got := children(t, obs, path); len(got) != 2 || !slices.Contains(got, mine) {
				t.Fatalf("children %v; want dsync's %s and Curator's waiter", got, mine)
			}
			curatorWaits(t, behind, "Curator behind dsync's recovered node")
			if held.Err() != nil {
				t.Fatalf("hold lost: %v", context.Cause(held))
			}
			m.Unlock()
			awaitCurator(t, ctx, behind, "Curator waiter")
			releaseCurator(t, behind)
			awaitChildren(t, obs, path, 0)
		})
	}
}

// r45Leases returns the lease nodes under path/leases that are not in
// others, once there are n in all.
func r45Leases(t *testing.T, obs *zk.Conn, path string, n int, others ...string) []string {
	t.Helper()
	return slices.DeleteFunc(awaitChildren(t, obs, path+"/leases", n), func(k string) bool { return slices.Contains(others, k) })
}

// TestReviewR45WeightedLeaseCreateFaultCuratorHolds: max 1, a Curator
// InterProcessSemaphoreV2 holds the lease; a dsync Acquire takes the
// internal lock and its lease multi (check + create) is Cut, Lost or
// Dropped; a second Curator client queues on the internal lock behind
// dsync's node. dsync must wait for room with one lease node (recovered,
// or made again), get the lease when the Curator holder releases, while
// the second Curator client waits; that one gets it after dsync's
// Release, and nothing of dsync's is left.
func TestReviewR45WeightedLeaseCreateFaultCuratorHolds(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, a := range r45Actions {
		t.Run(a.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			leases := path + "/leases"
			p, s := r45Proxied(t)
			w := dsync.NewWeighted(s, path, 1)
			x := holdCuratorMax(t, ctx, curator.Semaphore, path, 1)
			awaitCurator(t, ctx, x, "Curator lease holder")
			xl := strings.TrimPrefix(x.Node(), leases+"/")
			f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, a)
			res := make(chan error, 1)
			go func() { res <- w.Acquire(ctx, 1) }()
			zktest.AwaitStruck(t, f)
			awaitClientWatch(t, connOf(t, s), leases, res) // waiting for room
			mine := r45Leases(t, obs, path, 2, xl)
			if len(mine) != 1 || !zkconn.IsNative(mine[0]) {
				t.Fatalf("dsync leases %v; want one", mine)
			}
			y := holdCuratorMax(t, ctx, curator.Semaphore, path, 1)
			awaitChildren(t, obs, path+"/locks", 2)
			releaseCurator(t, x)
			if err := reviewRecv(t, "dsync Acquire", res); err != nil {
				t.Fatal(err)
			}
			// The second Curator client is the head now: its lease
			// waits for room beside dsync's.
			if got := children(t, obs, leases); !slices.Contains(got, mine[0]) || slices.Contains(got, xl) {
				t.Fatalf("leases %v with dsync holding; want dsync's %s (and a waiting one)", got, mine[0])
			}
			curatorWaits(t, y, "second Curator client while dsync holds the only lease")
			w.Release(1)
			awaitCurator(t, ctx, y, "second Curator client")
			if got := children(t, obs, leases); len(got) != 1 || zkconn.IsNative(got[0]) {
				t.Fatalf("leases %v with Curator holding; want only Curator's", got)
			}
			releaseCurator(t, y)
			assertEmpty(t, path)
		})
	}
}

// TestReviewR45WeightedGiveUpFaultCuratorBehind: max 1, a Curator client
// holds the lease; a dsync Acquire holds the internal lock, its lease made,
// and waits for room; a second Curator client queues on the internal lock
// behind it. The dsync ctx ends while the delete of its lease (or of its
// internal lock node) is struck by Cut, Lose or Drop. Acquire must return
// ctx.Err() at once; its nodes must go (the deletes are guaranteed), the
// second Curator client must become the head and get the lease once the
// first releases, and never beside another holder.
func TestReviewR45WeightedGiveUpFaultCuratorBehind(t *testing.T) {
	for _, under := range []string{"/leases/", "/locks/"} {
		for _, a := range r45Actions {
			t.Run(fmt.Sprintf("%s%v", strings.Trim(under, "/"), a), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				leases := path + "/leases"
				p, s := r45Proxied(t)
				w := dsync.NewWeighted(s, path, 1)
				x := holdCuratorMax(t, ctx, curator.Semaphore, path, 1)
				awaitCurator(t, ctx, x, "Curator lease holder")
				actx, acancel := context.WithCancel(ctx)
				res := make(chan error, 1)
				go func() { res <- w.Acquire(actx, 1) }()
				awaitClientWatch(t, connOf(t, s), leases, res)
				y := holdCuratorMax(t, ctx, curator.Semaphore, path, 1)
				awaitChildren(t, obs, path+"/locks", 2)
				f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + under, Prefix: true}, a)
				acancel()
				start := time.Now()
				if err := reviewRecv(t, "dsync Acquire", res); !errors.Is(err, context.Canceled) {
					t.Fatalf("Acquire = %v; want context.Canceled", err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("Acquire returned %v after its ctx ended", d)
				}
				zktest.AwaitStruck(t, f)
				// dsync's nodes go (their deletes are guaranteed, sent
				// again after a Cut's reconnect, the lock node's maybe
				// before the lease's: the Curator head then waits on
				// the stale lease a moment longer); the second Curator
				// client is the head and waits for room with its lease.
				awaitChildren(t, obs, path+"/locks", 1)
				r45AwaitForeign(t, obs, leases, 2)
				curatorWaits(t, y, "second Curator client while the first holds")
				releaseCurator(t, x)
				awaitCurator(t, ctx, y, "second Curator client")
				releaseCurator(t, y)
				assertEmpty(t, path)
			})
		}
	}
}

// TestReviewR45PartitionedHolderCuratorWaits: a dsync holder through a
// proxy, with a 2s session, and a Curator client waiting behind it (an
// InterProcessMutex behind a Mutex; an InterProcessSemaphoreV2 of 1 behind
// a Weighted lease; an InterProcessReadWriteLock reader behind an RWMutex
// writer), under either LossPolicy. The proxy black-holes the dsync
// side: its session expires on the server and Curator gets the lock. The
// dsync hold's context must have ended before Curator reports the lock
// held; after Heal, the dsync side queues behind Curator on its next
// session, gets the lock after Curator's release, and leaves nothing.
func TestReviewR45PartitionedHolderCuratorWaits(t *testing.T) {
	type prim struct {
		lock    func(ctx context.Context) (context.Context, error)
		unlock  func()
		kind    string
		max     int
		counted string // the path under which the nodes are
	}
	for _, policy := range []dsync.LossPolicy{dsync.LostOnSuspension, dsync.LostOnExpiry} {
		for _, name := range []string{"mutex", "weighted", "rwmutex"} {
			t.Run(fmt.Sprintf("%s/policy=%d", name, policy), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				p := zktest.NewProxy(t, shared.Addr())
				s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second))
				opt := dsync.WithLossPolicy(policy)
				var pr prim
				switch name {
				case "mutex":
					m := dsync.NewMutex(s, path, opt)
					pr = prim{m.LockContext, m.Unlock, curator.Mutex, 0, path}
				case "weighted":
					w := dsync.NewWeighted(s, path, 1, opt)
					var l *dsync.Lease
					pr = prim{func(ctx context.Context) (context.Context, error) {
						ls, err := w.AcquireLeases(ctx, 1)
						if err != nil {
							return nil, err
						}
						l = ls[0]
						return l.Context(), nil
					}, func() { l.Release() }, curator.Semaphore, 1, path + "/leases"}
				case "rwmutex":
					rw := dsync.NewRWMutex(s, path, opt)
					pr = prim{rw.LockContext, rw.Unlock, curator.Read, 0, path}
				}
				held, err := pr.lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				jh := holdCuratorMax(t, ctx, pr.kind, path, pr.max)
				lostAt := make(chan time.Time, 1)
				go func() { <-held.Done(); lostAt <- time.Now() }()
				p.BlackHole()
				awaitCurator(t, ctx, jh, "Curator waiter behind the partitioned holder")
				acquiredAt := time.Now()
				select {
				case at := <-lostAt:
					if at.After(acquiredAt) {
						t.Fatalf("dsync hold told of its loss at %v, after Curator held at %v", at, acquiredAt)
					}
				default:
					t.Fatalf("Curator holds while the dsync hold context is live")
				}
				if c := context.Cause(held); !errors.Is(c, dsync.ErrLockLost) {
					t.Errorf("cause %v; want ErrLockLost", c)
				}
				pr.unlock()
				p.Heal()
				res := lockRW(ctx, pr.lock)
				jn := strings.TrimPrefix(jh.Node(), pr.counted+"/")
				if name == "weighted" {
					awaitChildren(t, obs, path+"/locks", 1) // waits for room, holding the internal lock
					r45Leases(t, obs, path, 2, jn)
				} else {
					r45Only(t, obs, pr.counted, 2, jn)
				}
				goWaits(t, res, "dsync lock while Curator holds")
				releaseCurator(t, jh)
				awaitLocked(t, res, "dsync lock after Curator")
				pr.unlock()
				awaitChildren(t, obs, pr.counted, 0)
			})
		}
	}
}

// TestReviewR45DowngradeFaultCuratorWriterBehind: a dsync RWMutex write
// holder with a Curator 5.4 writer queued behind it; the downgrade's
// transaction (the read node's create, with the touch of the write node) is
// Cut, Lost or Dropped. Under LostOnSuspension the connection's drop loses
// the write hold, and so ends the downgrade's ctx (derived from the write
// hold's context): the downgrade must fail with it, leave no read node
// behind (a Lost or Dropped create was applied), and after Unlock the
// Curator writer gets in. Under LostOnExpiry the downgrade rides the drop
// out and succeeds; after the write Unlock, the Curator writer must wait
// for the read hold's RUnlock. No dsync node is left.
func TestReviewR45DowngradeFaultCuratorWriterBehind(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, policy := range []dsync.LossPolicy{dsync.LostOnSuspension, dsync.LostOnExpiry} {
		for _, a := range r45Actions {
			t.Run(fmt.Sprintf("%v/policy=%d", a, policy), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				p, s := r45Proxied(t)
				rw := dsync.NewRWMutex(s, path, dsync.WithLossPolicy(policy))
				wctx, err := rw.LockContext(ctx)
				if err != nil {
					t.Fatal(err)
				}
				jw := holdCurator(t, ctx, curator.Write, path)
				awaitChildren(t, obs, path, 2)
				f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/", Prefix: true}, a)
				dctx, dcancel := context.WithTimeout(wctx, 20*time.Second) // a downgrade: the write hold's context
				defer dcancel()
				start := time.Now()
				rctx, err := rw.RLockContext(dctx)
				zktest.AwaitStruck(t, f)
				if policy == dsync.LostOnSuspension {
					if err == nil {
						t.Fatalf("downgrade succeeded with the write hold lost (%v)", context.Cause(wctx))
					}
					if wctx.Err() == nil {
						t.Fatalf("downgrade = %v with the write hold live", err)
					}
					rw.Unlock()
					awaitCurator(t, ctx, jw, "Curator writer")
					if got := children(t, obs, path); len(got) != 1 {
						t.Errorf("children %v with Curator's writer holding; want it alone", got)
					}
					releaseCurator(t, jw)
					awaitChildren(t, obs, path, 0)
					return
				}
				if err != nil {
					t.Fatalf("downgrade = %v after %v", err, time.Since(start))
				}
				awaitChildren(t, obs, path, 3)
				rw.Unlock()
				awaitChildren(t, obs, path, 2)
				// Curator's writer lists again and follows the read node.
				awaitWatch(t, shared, path+"/"+r45Only(t, obs, path, 2, jwNode(t, obs, path)), jwSession(t, obs, path))
				curatorWaits(t, jw, "Curator writer while the downgrade's read hold is held")
				if rctx.Err() != nil {
					t.Fatalf("read hold lost: %v", context.Cause(rctx))
				}
				rw.RUnlock()
				awaitCurator(t, ctx, jw, "Curator writer")
				releaseCurator(t, jw)
				awaitChildren(t, obs, path, 0)
			})
		}
	}
}

// jwNode returns the name of the one Curator (non-native) child of path.
func jwNode(t *testing.T, obs *zk.Conn, path string) string {
	t.Helper()
	for _, k := range children(t, obs, path) {
		if !zkconn.IsNative(k) {
			return k
		}
	}
	t.Fatalf("no Curator node under %s", path)
	return ""
}

// jwSession returns the session owning the one Curator child of path.
func jwSession(t *testing.T, obs *zk.Conn, path string) int64 {
	t.Helper()
	_, st, err := obs.Get(path + "/" + jwNode(t, obs, path))
	if err != nil {
		t.Fatal(err)
	}
	return st.EphemeralOwner
}

// TestReviewR45ElectionResignFaultLatchBehind: a dsync Election leads with
// a Curator LeaderLatch behind it; Resign's delete is Cut, Lost or
// Dropped. Resign must return within its ctx (nil once the delete is
// applied), the latch must lead only after the leadership context ended,
// and a new Campaign of the same Election must wait behind the latch and
// lead after it resigns, leaving nothing.
func TestReviewR45ElectionResignFaultLatchBehind(t *testing.T) {
	for _, a := range r45Actions {
		t.Run(a.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			p, s := r45Proxied(t)
			e := dsync.NewElection(s, path)
			led, err := e.Campaign(ctx, "go")
			if err != nil {
				t.Fatal(err)
			}
			node := e.Key()
			l, err := java.Lead(ctx, curator.Latch, shared.Addr(), path, "java")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Kill)
			awaitChildren(t, obs, path, 2)
			f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: node}, a)
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			defer rcancel()
			start := time.Now()
			rerr := e.Resign(rctx)
			if d := time.Since(start); d > 3*time.Second+500*time.Millisecond {
				t.Errorf("Resign took %v with a 3s ctx", d)
			}
			if rerr != nil && !errors.Is(rerr, context.DeadlineExceeded) {
				t.Errorf("Resign = %v", rerr)
			}
			zktest.AwaitStruck(t, f)
			if led.Err() == nil {
				t.Fatal("leadership context live after Resign")
			}
			ev, err := l.Next(ctx)
			if err != nil || !ev.Leader {
				t.Fatalf("latch: %v, %v; want leader", ev, err)
			}
			res := make(chan error, 1)
			go func() {
				_, err := e.Campaign(ctx, "go")
				res <- err
			}()
			awaitChildren(t, obs, path, 2)
			if ld, err := e.Leader(ctx); err != nil || string(ld.Data) != "java" {
				t.Fatalf("Leader = %v, %v; want java", ld, err)
			}
			select {
			case err := <-res:
				t.Fatalf("Campaign = %v while the latch leads", err)
			default:
			}
			if err := l.Resign(); err != nil {
				t.Fatal(err)
			}
			if err := reviewRecv(t, "Campaign", res); err != nil {
				t.Fatal(err)
			}
			if err := e.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			awaitChildren(t, obs, path, 0)
		})
	}
}

// TestReviewR45RevokeHoldersFaultCuratorRevocable: a Curator
// InterProcessMutex made revocable holds, a dsync Mutex waits behind it;
// RevokeHolders through a proxy has its write of __REVOKE__ Cut (not
// applied: written again), Lost or Dropped (applied, reply never read:
// read again). It must return within its ctx: the holder as asked, or,
// after a lost reply when Curator's listener has released already (the
// node gone at the re-read), an error wrapping ErrOutcomeUnknown and
// ErrNoNode (Revoke's documented answer: it does not guess). Curator's
// listener must run and release, and the dsync waiter then gets the lock,
// never beside Curator.
func TestReviewR45RevokeHoldersFaultCuratorRevocable(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, a := range r45Actions {
		t.Run(a.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			jh, err := java.HoldRevocable(ctx, curator.Mutex, shared.Addr(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(jh.Kill)
			awaitCurator(t, ctx, jh, "revocable Curator holder")
			m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
			res := lockRW(ctx, m.LockContext)
			awaitChildren(t, obs, path, 2)
			p, s := r45Proxied(t)
			f := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: jh.Node()}, a)
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			defer rcancel()
			asked, err := dsync.RevokeHolders(rctx, s, path)
			zktest.AwaitStruck(t, f)
			switch {
			case err == nil && len(asked) == 1 && asked[0].Path == jh.Node():
			case a != zktest.Cut && len(asked) == 0 &&
				errors.Is(err, dsync.ErrOutcomeUnknown) && errors.Is(err, dsync.ErrNoNode):
				// The write was applied and its reply lost; Curator's
				// listener released at once, so the node read again
				// after the reconnect is gone: whether it was asked or
				// left by itself cannot be told, and is not guessed.
			default:
				t.Fatalf("RevokeHolders = %v, %v; want Curator's %s asked (or, after a lost reply, "+
					"outcome unknown with the node gone)", asked, err, jh.Node())
			}
			select {
			case <-jh.Revoked():
			case <-ctx.Done():
				t.Fatal("Curator's revocation listener never ran")
			}
			if err := jh.Release(); err != nil {
				t.Fatal(err)
			}
			awaitLocked(t, res, "dsync waiter after the revocation")
			m.Unlock()
			awaitChildren(t, obs, path, 0)
		})
	}
}

// r45AwaitForeign waits, with watches, until path has n children and none
// of them is dsync's.
func r45AwaitForeign(t *testing.T, obs *zk.Conn, path string, n int) {
	t.Helper()
	deadline := time.After(reviewBound)
	for {
		kids, _, ev, err := obs.ChildrenW(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) == n && !slices.ContainsFunc(kids, zkconn.IsNative) {
			return
		}
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("children of %s stayed %v; want %d, none of dsync's", path, kids, n)
		}
	}
}
