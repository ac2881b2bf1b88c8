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

// Review round 46: dsync and real Curator 5.4.0 sharing a semaphore whose
// maximum is a shared count, a SemaphoreMutex, a MultiLock, and
// Weighted.Participants' reading of a Curator head, while the dsync side's
// network faults at an exact request. No defect was found; these tests pin
// what was checked.

// r46ReadFaults are the faults struck at a read: it changes nothing, so
// Cut, Lose and Drop differ there only in how long the client waits before
// the connection goes and the read is sent again; Lose stands for them.
var r46ReadFaults = []zktest.Action{zktest.Lose}

// r46HoldSem starts a Curator client taking one lease of the semaphore at
// path whose maximum is the SharedCount at count, and returns once it has a
// node queued; the JVM is killed when the test ends if still running.
func r46HoldSem(t *testing.T, ctx context.Context, path, count string) *curator.Holder {
	t.Helper()
	h, err := java.HoldCount(ctx, shared.Addr(), path, count)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	return h
}

// r46Lease returns the name of h's lease node.
func r46Lease(h *curator.Holder) string { return h.Node()[strings.LastIndexByte(h.Node(), '/')+1:] }

// r46Counted returns, for a semaphore at path whose maximum is the count at
// path+"-max" (set to max first, through a Session of its own: the test's
// writer), a Session through a fresh proxy, the Count of that Session and a
// Weighted following it, and the writer's Count.
func r46Counted(t *testing.T, ctx context.Context, path string, max int32) (*zktest.Proxy, *zkconn.Session, *dsync.Count, *dsync.Weighted, *dsync.Count) {
	t.Helper()
	cpath := path + "-max"
	writer := dsync.NewCount(dial(t, []string{shared.Addr()}), cpath, max)
	if err := writer.Set(ctx, max); err != nil {
		t.Fatal(err)
	}
	p, s := r45Proxied(t)
	count := dsync.NewCount(s, cpath, max)
	return p, s, count, dsync.NewWeightedCount(s, path, count), writer
}

// r46Set sets c to v.
func r46Set(t *testing.T, ctx context.Context, c *dsync.Count, v int32) {
	t.Helper()
	if err := c.Set(ctx, v); err != nil {
		t.Fatal(err)
	}
}

// r46Leases fails the test unless the leases at path are exactly want (by
// name): no dsync lease beside the Curator holders.
func r46Leases(t *testing.T, obs *zk.Conn, path string, want ...string) {
	t.Helper()
	got := children(t, obs, path+"/leases")
	if len(got) != len(want) || slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, w) }) {
		t.Fatalf("leases %v; want %v", got, want)
	}
}

// TestReviewR46WeightedCountRaisedAfterFault: a semaphore whose maximum is
// a shared count of 1; a Curator client (SemaphoreV2 following the same
// SharedCount) holds the lease; a dsync Acquire becomes the head of the
// internal lock and waits for room, with its lease create (the check +
// create multi) Cut, Lost or Dropped, or its first count read, or its read
// of the count after the count's watch fired, Lost (see r46ReadFaults); a
// second Curator client queues behind dsync's lock node. The test's writer
// raises the count to 2 while both wait. dsync must then hold beside the first Curator client
// (2 of 2), the second must wait, and get its lease only after dsync's
// Release. No dsync node is left, and go-zookeeper holds at most one watch
// on the count.
func TestReviewR46WeightedCountRaisedAfterFault(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, at := range []string{"lease-create", "count-read", "count-reread"} {
		acts := r45Actions
		if at != "lease-create" {
			acts = r46ReadFaults
		}
		for _, a := range acts {
			t.Run(fmt.Sprintf("%s/%v", at, a), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				leases := path + "/leases"
				cpath := path + "-max"
				p, s, _, w, writer := r46Counted(t, ctx, path, 1)
				x := r46HoldSem(t, ctx, path, cpath)
				awaitCurator(t, ctx, x, "first Curator client")
				var f *zktest.Fault
				switch at {
				case "lease-create":
					f = p.Strike(zktest.Match{Op: zktest.OpMulti, Path: leases + "/", Prefix: true}, a)
				case "count-read":
					f = p.Strike(zktest.Match{Op: zktest.OpGetData, Path: cpath}, a)
				}
				res := make(chan error, 1)
				go func() { res <- w.Acquire(ctx, 1) }()
				if f != nil {
					zktest.AwaitStruck(t, f)
				}
				awaitClientWatch(t, connOf(t, s), leases, res) // waiting for room
				y := r46HoldSem(t, ctx, path, cpath)
				awaitChildren(t, obs, path+"/locks", 2)
				if at == "count-reread" {
					f = p.Strike(zktest.Match{Op: zktest.OpGetData, Path: cpath}, a)
				}
				r46Set(t, ctx, writer, 2)
				if at == "count-reread" {
					zktest.AwaitStruck(t, f)
				}
				if err := reviewRecv(t, "dsync Acquire", res); err != nil {
					t.Fatal(err)
				}
				// The second Curator client is the head now (dsync let the
				// internal lock go as Acquire returned, so its lease may be
				// there already); its lease waits for room beside dsync's
				// and the first's.
				kids := awaitChildren(t, obs, leases, 3)
				if mine := slices.DeleteFunc(kids, func(k string) bool { return !zkconn.IsNative(k) }); len(mine) != 1 {
					t.Fatalf("dsync leases %v; want one beside the two Curator clients'", mine)
				}
				curatorWaits(t, y, "second Curator client with 2 of 2 leases held")
				w.Release(1)
				awaitCurator(t, ctx, y, "second Curator client")
				r46Leases(t, obs, path, r46Lease(x), r46Lease(y))
				releaseCurator(t, x)
				releaseCurator(t, y)
				assertEmpty(t, path)
				if n := clientWatches(t, connOf(t, s), cpath); n > 1 {
					t.Errorf("go-zookeeper holds %d watches on the count; want at most 1", n)
				}
			})
		}
	}
}

// TestReviewR46WeightedCountLoweredWhileWaiting: a count of 2, two Curator
// clients hold a lease each; a dsync Acquire waits for room as the head of
// the internal lock, a third Curator client queues behind it. The count is
// lowered to 1, by dsync's own Count (the Weighted's, on its Session) or by
// the test's writer, and dsync's read of the count after its watch fired is
// Lost (see r46ReadFaults). When the first Curator client releases, dsync must
// go on waiting (its lease and the second's: 2 above 1), its watch on the
// leases set again; it must get the lease only once the second releases
// too (1 of 1); the third then waits until dsync's Release. The promise
// checked: a grant is decided against the count as read after the listing
// it counts (a lowered count applies to every grant from then on; leases
// held are not taken back).
func TestReviewR46WeightedCountLoweredWhileWaiting(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, by := range []string{"own", "writer"} {
		for _, a := range r46ReadFaults {
			t.Run(fmt.Sprintf("%s/%v", by, a), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				leases := path + "/leases"
				cpath := path + "-max"
				p, s, count, w, writer := r46Counted(t, ctx, path, 2)
				x1 := r46HoldSem(t, ctx, path, cpath)
				awaitCurator(t, ctx, x1, "first Curator client")
				x2 := r46HoldSem(t, ctx, path, cpath)
				awaitCurator(t, ctx, x2, "second Curator client")
				res := make(chan error, 1)
				go func() { res <- w.Acquire(ctx, 1) }()
				awaitClientWatch(t, connOf(t, s), leases, res)
				y := r46HoldSem(t, ctx, path, cpath)
				awaitChildren(t, obs, path+"/locks", 2)
				f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: cpath}, a)
				if by == "writer" {
					r46Set(t, ctx, writer, 1)
				} else if err := count.Set(ctx, 1); err != nil {
					// The count's watch fires before the write's reply
					// comes; the fault on the read it prompts may close
					// the connection before that reply is read: its
					// outcome is unknown, as Set documents.
					if !errors.Is(err, dsync.ErrOutcomeUnknown) {
						t.Fatal(err)
					}
					if v, err := writer.Get(ctx); err != nil || v.Value != 1 {
						t.Fatalf("count %v, %v after a write of 1 with an unknown outcome; want 1", v, err)
					}
				}
				zktest.AwaitStruck(t, f)
				// The release fires dsync's watch: it lists the leases
				// (served: relisted), and, finding no room, lists them
				// again with a watch (served: rewatched).
				relisted := p.Strike(zktest.Match{Path: leases}, zktest.Pass)
				rewatched := p.Strike(zktest.Match{Path: leases}, zktest.Pass)
				releaseCurator(t, x1)
				r38Struck(t, relisted, res)
				r38Struck(t, rewatched, res)
				releaseCurator(t, x2)
				if err := reviewRecv(t, "dsync Acquire", res); err != nil {
					t.Fatal(err)
				}
				awaitChildren(t, obs, leases, 2) // dsync's, and the third's waiting
				curatorWaits(t, y, "third Curator client with dsync holding 1 of 1")
				w.Release(1)
				awaitCurator(t, ctx, y, "third Curator client")
				r46Leases(t, obs, path, r46Lease(y))
				releaseCurator(t, y)
				assertEmpty(t, path)
			})
		}
	}
}

// TestReviewR46WeightedCountReleaseFault: a count of 1; dsync holds the
// lease, a Curator client (following the same SharedCount) waits for room
// as the head; dsync's Release has its delete Cut, Lost or Dropped. The
// Curator client must get the lease only once dsync's node is gone; a dsync
// Acquire right after must wait (Curator holds 1 of 1) and, when the
// test's writer raises the count to 2, hold beside it. Nothing is left.
func TestReviewR46WeightedCountReleaseFault(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, a := range r45Actions {
		t.Run(a.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			leases := path + "/leases"
			p, s, _, w, writer := r46Counted(t, ctx, path, 1)
			if err := w.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			y := r46HoldSem(t, ctx, path, path+"-max")
			awaitChildren(t, obs, leases, 2)
			curatorWaits(t, y, "Curator client while dsync holds 1 of 1")
			f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: leases + "/", Prefix: true}, a)
			w.Release(1)
			zktest.AwaitStruck(t, f)
			awaitCurator(t, ctx, y, "Curator client")
			r46Leases(t, obs, path, r46Lease(y))
			res := make(chan error, 1)
			go func() { res <- w.Acquire(ctx, 1) }()
			awaitClientWatch(t, connOf(t, s), leases, res)
			r46Set(t, ctx, writer, 2)
			if err := reviewRecv(t, "dsync Acquire", res); err != nil {
				t.Fatal(err)
			}
			if mine := r45Leases(t, obs, path, 2, r46Lease(y)); len(mine) != 1 || !zkconn.IsNative(mine[0]) {
				t.Fatalf("dsync leases %v; want one", mine)
			}
			w.Release(1)
			releaseCurator(t, y)
			assertEmpty(t, path)
		})
	}
}

// An r46Point is a request of the dsync side a fault strikes: op on a path
// below the test's path (under, with Prefix).
type r46Point struct {
	name  string
	op    zktest.Op
	under string
}

// match returns the Match of pt below path.
func (pt r46Point) match(path string) zktest.Match {
	return zktest.Match{Op: pt.op, Path: path + pt.under, Prefix: true}
}

// TestReviewR46SemaphoreMutexFaultCuratorAround: a Curator
// InterProcessSemaphoreMutex holds; a dsync SemaphoreMutex (LostOnExpiry,
// so that a dropped connection does not end its hold and the order of
// holders is fixed) has its internal lock node's create, its lease create,
// its internal lock node's delete (right after the grant) or its lease's
// delete (Unlock) Cut, Lost or Dropped; a second Curator client queues
// behind dsync's lock node. dsync must get the lock when the first
// releases, with one lease node, while the second waits with its lease;
// the second must hold only once dsync's lease is gone, alone. Nothing of
// dsync's is left.
func TestReviewR46SemaphoreMutexFaultCuratorAround(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, pt := range []r46Point{
		{"lock-create", zktest.OpCreate, "/locks/"},
		{"lease-create", zktest.OpCreate, "/leases/"},
		{"lock-delete", zktest.OpDelete, "/locks/"},
		{"lease-delete", zktest.OpDelete, "/leases/"},
	} {
		for _, a := range r45Actions {
			t.Run(fmt.Sprintf("%s/%v", pt.name, a), func(t *testing.T) {
				ctx, path, obs := r45Start(t)
				leases := path + "/leases"
				p, s := r45Proxied(t)
				m := dsync.NewSemaphoreMutex(s, path, dsync.WithLossPolicy(dsync.LostOnExpiry))
				x := holdCurator(t, ctx, curator.SemaphoreMutex, path)
				awaitCurator(t, ctx, x, "first Curator holder")
				var f *zktest.Fault
				if pt.name != "lease-delete" {
					f = p.Strike(pt.match(path), a)
				}
				res := lockRW(ctx, m.LockContext)
				if pt.op == zktest.OpCreate {
					zktest.AwaitStruck(t, f)
				}
				mine := r45Leases(t, obs, path, 2, strings.TrimPrefix(x.Node(), leases+"/"))
				if len(mine) != 1 || !zkconn.IsNative(mine[0]) {
					t.Fatalf("dsync leases %v; want one", mine)
				}
				y := holdCurator(t, ctx, curator.SemaphoreMutex, path)
				awaitChildren(t, obs, path+"/locks", 2)
				releaseCurator(t, x)
				held := awaitLocked(t, res, "dsync LockContext")
				if pt.name == "lock-delete" {
					zktest.AwaitStruck(t, f)
				}
				// The second Curator client is the head once dsync's lock
				// node is gone, and waits with its lease.
				awaitChildren(t, obs, path+"/locks", 1)
				if got := awaitChildren(t, obs, leases, 2); !slices.Contains(got, mine[0]) {
					t.Fatalf("leases %v with dsync holding; want its %s", got, mine[0])
				}
				curatorWaits(t, y, "second Curator client while dsync holds")
				if held.Err() != nil {
					t.Fatalf("hold lost: %v", context.Cause(held))
				}
				if pt.name == "lease-delete" {
					f = p.Strike(pt.match(path), a)
				}
				m.Unlock()
				if pt.name == "lease-delete" {
					zktest.AwaitStruck(t, f)
				}
				awaitCurator(t, ctx, y, "second Curator client")
				r46Leases(t, obs, path, strings.TrimPrefix(y.Node(), leases+"/"))
				releaseCurator(t, y)
				assertEmpty(t, path)
			})
		}
	}
}

// r46Held fails the test unless path's only child is node (a full path).
func r46Held(t *testing.T, obs *zk.Conn, path, node string) {
	t.Helper()
	if got := children(t, obs, path); len(got) != 1 || path+"/"+got[0] != node {
		t.Fatalf("children of %s %v; want %s alone", path, got, node)
	}
}

// TestReviewR46MultiLockFaultCuratorMultiAround: a Curator
// InterProcessMultiLock holds paths a and b; a dsync MultiLock of two
// Mutexes on them (given out of order: it takes them by path) waits at a.
// When Curator releases, dsync takes a, and its create at b is Cut, Lost
// or Dropped; or dsync holds and its Unlock's delete at b (released
// first) or at a is. Under LostOnSuspension the drop of the connection
// loses a while b is taken, and LockContext starts again; under
// LostOnExpiry the create is recovered. Either way dsync must hold both
// with one node each, a second Curator MultiLock waiting behind it at a;
// that one must hold both only after dsync's Unlock, alone; nothing of
// dsync's is left.
func TestReviewR46MultiLockFaultCuratorMultiAround(t *testing.T) {
	t.Parallel() // after the rest of the package: no timing is asserted
	for _, policy := range []dsync.LossPolicy{dsync.LostOnSuspension, dsync.LostOnExpiry} {
		for _, pt := range []r46Point{
			{"create-b", zktest.OpCreate, "/b/"},
			{"delete-b", zktest.OpDelete, "/b/"},
			{"delete-a", zktest.OpDelete, "/a/"},
		} {
			for _, act := range r45Actions {
				t.Run(fmt.Sprintf("%s/%v/policy=%d", pt.name, act, policy), func(t *testing.T) {
					ctx, path, obs := r45Start(t)
					a, b := path+"/a", path+"/b"
					p, s := r45Proxied(t)
					opt := dsync.WithLossPolicy(policy)
					ml := dsync.NewMultiLock(dsync.NewMutex(s, b, opt), dsync.NewMutex(s, a, opt))
					x := holdCurator(t, ctx, curator.Multi, a+","+b)
					awaitCurator(t, ctx, x, "first Curator MultiLock")
					var f *zktest.Fault
					if pt.op == zktest.OpCreate {
						f = p.Strike(pt.match(path), act)
					}
					res := lockRW(ctx, ml.LockContext)
					awaitChildren(t, obs, a, 2)
					releaseCurator(t, x)
					if f != nil {
						zktest.AwaitStruck(t, f)
					}
					held := awaitLocked(t, res, "dsync MultiLock")
					for _, q := range []string{a, b} {
						if got := children(t, obs, q); len(got) != 1 || !zkconn.IsNative(got[0]) {
							t.Fatalf("children of %s %v with dsync holding; want one of dsync's", q, got)
						}
					}
					y := holdCurator(t, ctx, curator.Multi, a+","+b)
					awaitChildren(t, obs, a, 2)
					curatorWaits(t, y, "second Curator MultiLock while dsync holds")
					if held.Err() != nil {
						t.Fatalf("hold lost: %v", context.Cause(held))
					}
					if pt.op == zktest.OpDelete {
						f = p.Strike(pt.match(path), act)
					}
					ml.Unlock()
					if pt.op == zktest.OpDelete {
						zktest.AwaitStruck(t, f)
					}
					if held.Err() == nil {
						t.Fatal("hold context live after Unlock")
					}
					awaitCurator(t, ctx, y, "second Curator MultiLock")
					r46Held(t, obs, a, y.Nodes()[0])
					r46Held(t, obs, b, y.Nodes()[1])
					releaseCurator(t, y)
					awaitChildren(t, obs, a, 0)
					awaitChildren(t, obs, b, 0)
				})
			}
		}
	}
}

// TestReviewR46MultiLockCtxEndsAtSecondCreate: a Curator InterProcessMutex
// holds b; a dsync MultiLock of a and b takes a, and its create at b is
// Cut, Lost, Dropped or black-holed; its ctx ends then. LockContext must
// return context.Canceled within 2s, having given a back; its node at b,
// if the create was applied, must go too (the deletes are guaranteed,
// after the reconnect): a Curator MultiLock queued at a must hold both
// once b's holder releases, with no dsync node beside it.
func TestReviewR46MultiLockCtxEndsAtSecondCreate(t *testing.T) {
	for _, act := range append(r45Actions, zktest.BlackHole) {
		t.Run(act.String(), func(t *testing.T) {
			ctx, path, obs := r45Start(t)
			a, b := path+"/a", path+"/b"
			p, s := r45Proxied(t)
			ml := dsync.NewMultiLock(dsync.NewMutex(s, a), dsync.NewMutex(s, b))
			z := holdCurator(t, ctx, curator.Mutex, b)
			awaitCurator(t, ctx, z, "Curator holder of b")
			f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: b + "/", Prefix: true}, act)
			lctx, cancel := context.WithCancel(ctx)
			res := lockRW(lctx, ml.LockContext)
			zktest.AwaitStruck(t, f)
			cancel()
			start := time.Now()
			if r := reviewRecv(t, "MultiLock.LockContext", res); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("LockContext = %v; want context.Canceled", r.err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("LockContext returned %v after its ctx ended", d)
			}
			y := holdCurator(t, ctx, curator.Multi, a+","+b)
			releaseCurator(t, z)
			awaitCurator(t, ctx, y, "Curator MultiLock")
			r45AwaitForeign(t, obs, a, 1)
			r45AwaitForeign(t, obs, b, 1)
			r46Held(t, obs, a, y.Nodes()[0])
			r46Held(t, obs, b, y.Nodes()[1])
			releaseCurator(t, y)
			awaitChildren(t, obs, a, 0)
			awaitChildren(t, obs, b, 0)
		})
	}
}

// TestReviewR46ParticipantsUnderFaults: a semaphore whose maximum is a
// count of 1; a Curator client holds the lease, and the head of the
// internal lock waits for room with its lease: a second Curator client (the
// Curator-head heuristic: more leases than the count, the newest in the
// head's session and newer than its lock node) or a dsync Acquire of
// another Session (its leases kin of its lock node). Participants through
// a proxy has its listing of the leases, its read of a lease, its listing
// of the internal lock, its read of the head's lock node or (Curator head)
// its read of the count Lost (see r46ReadFaults). It must answer, within its
// ctx, without error: the holder's lease held, the head's marked Waiting,
// in creation order. Black-holed there, it must return
// context.DeadlineExceeded when its 1s ctx ends.
func TestReviewR46ParticipantsUnderFaults(t *testing.T) {
	for _, head := range []string{"curator", "dsync"} {
		t.Run(head, func(t *testing.T) {
			t.Parallel() // beside the other head only: this test is serial
			ctx, path, obs := r45Start(t)
			leases, locks, cpath := path+"/leases", path+"/locks", path+"-max"
			p, _, _, w, _ := r46Counted(t, ctx, path, 1)
			x := r46HoldSem(t, ctx, path, cpath)
			awaitCurator(t, ctx, x, "Curator holder")
			var y *curator.Holder
			var ow *dsync.Weighted
			res := make(chan error, 1)
			points := []struct {
				name string
				m    zktest.Match
			}{
				{"leases-list", zktest.Match{Path: leases}},
				{"lease-read", zktest.Match{Op: zktest.OpGetData, Path: leases + "/", Prefix: true}},
				{"locks-list", zktest.Match{Path: locks}},
				{"head-read", zktest.Match{Op: zktest.OpGetData, Path: locks + "/", Prefix: true}},
			}
			if head == "curator" {
				y = r46HoldSem(t, ctx, path, cpath)
				points = append(points, struct {
					name string
					m    zktest.Match
				}{"count-read", zktest.Match{Op: zktest.OpGetData, Path: cpath}})
			} else {
				hs := dial(t, []string{shared.Addr()})
				ow = dsync.NewWeightedCount(hs, path, dsync.NewCount(hs, cpath, 1))
				go func() { res <- ow.Acquire(ctx, 1) }()
				awaitClientWatch(t, connOf(t, hs), leases, res)
			}
			waiting := r45Leases(t, obs, path, 2, r46Lease(x))
			for _, pt := range points {
				for _, a := range append(r46ReadFaults, zktest.BlackHole) {
					t.Run(fmt.Sprintf("%s/%v", pt.name, a), func(t *testing.T) {
						bound := 20 * time.Second
						if a == zktest.BlackHole {
							bound = time.Second // it can only end with its ctx
							defer p.Heal()
						}
						f := p.Strike(pt.m, a)
						pctx, pcancel := context.WithTimeout(ctx, bound)
						defer pcancel()
						start := time.Now()
						ps, err := w.Participants(pctx)
						if d := time.Since(start); d > bound+500*time.Millisecond {
							t.Errorf("Participants took %v with a %v ctx", d, bound)
						}
						zktest.AwaitStruck(t, f)
						if a == zktest.BlackHole {
							if !errors.Is(err, context.DeadlineExceeded) {
								t.Fatalf("Participants = %v, %v; want context.DeadlineExceeded", ps, err)
							}
							return
						}
						if err != nil {
							t.Fatalf("Participants = %v", err)
						}
						if len(ps) != 2 || ps[0].Node != r46Lease(x) || ps[0].Waiting ||
							ps[1].Node != waiting[0] || !ps[1].Waiting {
							t.Fatalf("Participants = %+v; want %s held, then %s waiting", ps, r46Lease(x), waiting[0])
						}
					})
				}
			}
			releaseCurator(t, x)
			if y != nil {
				awaitCurator(t, ctx, y, "Curator head")
				releaseCurator(t, y)
			} else {
				if err := reviewRecv(t, "dsync Acquire", res); err != nil {
					t.Fatal(err)
				}
				ow.Release(1)
			}
			assertEmpty(t, path)
		})
	}
}

// TestReviewR46WeightedCountReadBlackHoledCtxEnds: a count of 1, a Curator
// client holds the lease; a dsync Acquire, the head of the internal lock
// with its lease made, has its first read of the count black-holed, and
// its ctx ends then; a second Curator client queues behind it. Acquire
// must return context.Canceled within 2s; its lease and lock node must go
// once the connection is given up (the deletes are guaranteed), the second
// Curator client then becomes the head, and holds only after the first
// releases, with no dsync node beside it.
func TestReviewR46WeightedCountReadBlackHoledCtxEnds(t *testing.T) {
	ctx, path, obs := r45Start(t)
	cpath := path + "-max"
	p, _, _, w, _ := r46Counted(t, ctx, path, 1)
	x := r46HoldSem(t, ctx, path, cpath)
	awaitCurator(t, ctx, x, "first Curator client")
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: cpath}, zktest.BlackHole)
	actx, acancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- w.Acquire(actx, 1) }()
	r38Struck(t, f, res)
	y := r46HoldSem(t, ctx, path, cpath)
	awaitChildren(t, obs, path+"/locks", 2)
	acancel()
	start := time.Now()
	if err := reviewRecv(t, "dsync Acquire", res); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v; want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Acquire returned %v after its ctx ended", d)
	}
	awaitChildren(t, obs, path+"/locks", 1)
	r45AwaitForeign(t, obs, path+"/leases", 2)
	curatorWaits(t, y, "second Curator client while the first holds")
	releaseCurator(t, x)
	awaitCurator(t, ctx, y, "second Curator client")
	r46Leases(t, obs, path, r46Lease(y))
	releaseCurator(t, y)
	assertEmpty(t, path)
}
