package dsync_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR71RevokeHoldersLongHeadName: RevokeHolders on a mutex at a
// 4096-byte path (which dsync takes) whose head is another client's node
// with a longer name than dsync's or Curator's asks that head: it refused
// with ErrBadPath, the node path (found by listing) being longer than
// Revoke takes from a caller, and asked no one.
func TestReviewR71RevokeHoldersLongHeadName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base, path := lockPath(t), longestPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	for _, p := range []string{base, path} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	head := path + "/" + strings.Repeat("x", 80) + "-lock-0000000001"
	if _, err := obs.Create(head, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ps, err := dsync.RevokeHolders(ctx, s, path)
	if data, _, _ := obs.Get(head); err != nil || len(ps) != 1 || ps[0].Path != head || string(data) != "__REVOKE__" {
		t.Errorf("RevokeHolders (a head of %d bytes) = %v, %v, its data %q; want it asked", len(head), ps, err, data)
	}
	for _, p := range []string{head, path, base} {
		if err := obs.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
}

// r71Requeued waits until W's node is a new one (third in line), and
// follows it.
func (l *r66Line) r71Requeued(t *testing.T, ctx context.Context) {
	t.Helper()
	var kids []string
	for {
		ks, _, ch, err := l.obs.ChildrenW(l.path)
		if err != nil {
			t.Fatal(err)
		}
		if kids = orderedNames(ks); len(kids) == 3 && l.path+"/"+kids[2] != l.nodeW {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("W never queued again: %v", kids)
		}
	}
	l.nodeW = l.path + "/" + kids[2]
	l.idW = mustSessionOf(t, l.obs, l.nodeW)
}

// r71SessionLost: W (deep, following X and X's signal) takes X's signal back
// (a revocation request into X: the prune); with atTakeBack set, a second
// request's take-back multi is black-holed and W's session is lost with it
// out; otherwise the session is lost while W waits after the take-back.
// W's LockContext goes on with a new session and node; A → X → W hold in
// turn, and once all released no node and no watch is left under the path.
func r71SessionLost(t *testing.T, atTakeBack bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := r66Mutexes(t, ctx, false, zkconn.WithSessionTimeout(4*time.Second))
	l.write(t, ctx, zktest.Pass, zktest.Pass)
	awaitWatch(t, shared, l.nodeX+".handoff", l.idW)
	sub := l.sw.Subscribe()
	defer sub.Stop()
	if atTakeBack {
		f := l.p.Strike(zktest.Match{Op: zktest.OpMulti, Path: l.nodeX + ".handoff"}, zktest.BlackHole)
		if err := dsync.Revoke(ctx, l.sa, l.nodeX); err != nil {
			t.Fatal(err)
		}
		zktest.AwaitStruck(t, f)
	}
	l.p.BlackHole() // new connections too, until the session is lost
	for lost := false; !lost; {
		select {
		case ev := <-sub.C():
			lost = ev.State == zkconn.StateLost
		case <-ctx.Done():
			t.Fatal("session never lost")
		}
	}
	l.p.Heal()
	l.r71Requeued(t, ctx)
	awaitWatch(t, shared, l.nodeX+".handoff", l.idW)
	awaitWatch(t, shared, l.nodeX, l.idW)
	l.waiting(t, ctx)
	l.inTurn(t, ctx)
}

func TestReviewR71SessionLostMidWait(t *testing.T) {
	t.Parallel()
	r71SessionLost(t, false)
}

func TestReviewR71SessionLostAtTakeBack(t *testing.T) {
	t.Parallel()
	r71SessionLost(t, true)
}

// TestReviewR71DeleteSignalsTooLarge: a guaranteed delete whose signals
// make its transaction larger than ZooKeeper takes (130 signals at 4167-byte
// paths, as a 4096-byte lock's) deletes the node alone; a Signal that large
// fails with ErrTooLarge; the session stays up throughout.
func TestReviewR71DeleteSignalsTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base, path := lockPath(t), longestPath(t)
	obs := observer(t, shared.Addr())
	s := dial(t, []string{shared.Addr()})
	for _, p := range []string{base, path} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := path + "/" + zkconn.ProtectedName("__WRIT__-2147483648")
	if err := h.Do(ctx, func(c *zk.Conn) error {
		_, err := c.Create(node, nil, zk.FlagEphemeral, s.ACL())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var sigs []string
	for range 130 {
		sigs = append(sigs, path+"/"+zkconn.ProtectedName("__WRIT__-2147483648")+".handoff")
	}
	if err := h.Signal(ctx, node, sigs...); !errors.Is(err, zkconn.ErrTooLarge) {
		t.Errorf("Signal of %d signals = %v; want ErrTooLarge", len(sigs), err)
	}
	_, settled := h.Delete(node, sigs...)
	<-settled
	if ok, _, err := obs.Exists(node); ok || err != nil {
		t.Errorf("node left after Delete with oversized signals: %v %v", ok, err)
	}
	if st := s.State(); st != zkconn.StateConnected {
		t.Errorf("state %v", st)
	}
	if h.Err() != nil {
		t.Errorf("handle: %v", h.Err())
	}
	obs.Delete(path, -1)
	obs.Delete(base, -1)
}
