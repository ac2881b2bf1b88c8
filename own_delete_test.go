package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// The Try calls' wait for their session's own deletes under way
// (queue.past, Weighted.grant): a node this session is deleting, listed
// ahead of the Try's own node because its delete has not reached the server
// yet, does not make the Try fail; the Try waits for that delete, once, and
// lists again. In use the state comes from a delete sent again after a
// reconnect or a create given up in flight, where the delete almost always
// lands before the Try lists. These tests make it on purpose: a node of the
// session with its delete started (zkconn.Handle.DeleteAfter) and held back
// until the Try's listing has reached the server.

// An ownTry is a Try call of one primitive at path, and where the node
// ahead of it goes.
type ownTry struct {
	name   string
	parent string // under path: where the node ahead goes, and the Try lists
	marker string // that node's name, before its sequence number
	try    func(ctx context.Context, s *zkconn.Session, path string) (release func(), err error)
}

var ownTries = []ownTry{
	{"Mutex", "", "lock-", func(ctx context.Context, s *zkconn.Session, path string) (func(), error) {
		m := dsync.NewMutex(s, path)
		_, err := m.TryLockContext(ctx)
		return m.Unlock, err
	}},
	{"RWMutex writer behind a read node", "", "__READ__", func(ctx context.Context, s *zkconn.Session, path string) (func(), error) {
		rw := dsync.NewRWMutex(s, path)
		_, err := rw.TryLockContext(ctx)
		return rw.Unlock, err
	}},
	{"RWMutex reader behind a write node", "", "__WRIT__", func(ctx context.Context, s *zkconn.Session, path string) (func(), error) {
		rw := dsync.NewRWMutex(s, path)
		_, err := rw.TryRLockContext(ctx)
		return rw.RUnlock, err
	}},
	{"Weighted", "/leases", "lease-", func(ctx context.Context, s *zkconn.Session, path string) (func(), error) {
		w := dsync.NewWeighted(s, path, 1)
		ls, err := w.TryAcquireLeases(ctx, 1)
		if err != nil {
			return nil, err
		}
		return ls[0].Release, nil
	}},
}

type tryResult struct {
	release func()
	err     error
}

// startOwnTry makes, in a Session through a proxy, a node named tc.marker
// at path+tc.parent, starts its delete held back until the returned open
// is called, then starts tc's Try. It returns once the server has answered
// the Try's first listing of path+tc.parent, the one it decides on: served
// before the delete, it shows the node. settled closes when the delete is
// settled.
func startOwnTry(t *testing.T, tc ownTry, path string) (p *zktest.Proxy, res <-chan tryResult, open func(), settled <-chan struct{}) {
	t.Helper()
	p = zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), reviewBound)
	t.Cleanup(cancel)
	h, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node, err := h.CreateProtected(ctx, path+tc.parent, tc.marker, nil)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	_, settled = h.DeleteAfter(func() { <-gate }, node)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate) // a test that failed early: let the delete go
		}
	})
	listed := p.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path + tc.parent}, zktest.Pass)
	out := make(chan tryResult, 1)
	go func() {
		release, err := tc.try(ctx, s, path)
		out <- tryResult{release, err}
	}()
	select {
	case <-listed.Struck():
	case r := <-out:
		t.Fatalf("the Try returned (%v) before it listed %s", r.err, path+tc.parent)
	case <-ctx.Done():
		t.Fatalf("the Try did not list %s within %v", path+tc.parent, reviewBound)
	}
	return p, out, func() { close(gate) }, settled
}

// TestTryWaitsForOwnDeleteUnderWay: the Try waits for the delete, which
// removes the node, and then succeeds; it leaves no node behind.
func TestTryWaitsForOwnDeleteUnderWay(t *testing.T) {
	for _, tc := range ownTries {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs := observer(t, shared.Addr())
			path := lockPath(t)
			_, res, open, settled := startOwnTry(t, tc, path)
			open()
			r := reviewRecv(t, "the Try", res)
			if r.err != nil {
				t.Fatalf("Try = %v; want success once the session's own node ahead is deleted", r.err)
			}
			reviewRecv(t, "the held-back delete", settled)
			r.release()
			awaitChildren(t, obs, path+tc.parent, 0)
		})
	}
}

// TestTryOwnDeleteRefusedNoSpin: the delete the Try waits for settles
// refused (the parent's ACL forbids deletes), the node still there: the Try
// lists once more and fails with ErrWouldBlock, instead of waiting on the
// settled delete again and listing again and again until its ctx ends.
func TestTryOwnDeleteRefusedNoSpin(t *testing.T) {
	for _, tc := range ownTries {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs := observer(t, shared.Addr())
			path := lockPath(t)
			if tc.parent == "" {
				rfNoDeleteParent(t, obs, path)
			} else {
				refusingLeases(t, obs, path)
			}
			p, res, open, settled := startOwnTry(t, tc, path)
			before := p.Requests()
			open()
			r := reviewRecv(t, "the Try", res)
			if !errors.Is(r.err, dsync.ErrWouldBlock) {
				t.Fatalf("Try = %v once its own delete of the node ahead settled refused; want ErrWouldBlock", r.err)
			}
			reviewRecv(t, "the refused delete", settled)
			// The refused delete, one listing, and the Try's own nodes
			// given back.
			if n := p.Requests() - before; n > 8 {
				t.Fatalf("%d requests after the delete went out: the Try listed again and again", n)
			}
		})
	}
}
