package dsync_test

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Hold sweep: every write request of each primitive held in the network
// (zktest.Hold) past its session's give-up, and delivered for that session
// after the client went on on its next one.

// hsLose black-holes p until s gives its ZooKeeper session up, then heals
// p: the held connection keeps that session alive at the server.
func hsLose(t *testing.T, p *zktest.Proxy, s *zkconn.Session) {
	t.Helper()
	sub := s.Subscribe()
	defer sub.Stop()
	p.BlackHole()
	awaitState(t, sub, zkconn.StateLost)
	p.Heal()
}

// hsRelease delivers f's held request.
func hsRelease(t *testing.T, ctx context.Context, f *zktest.Fault) {
	t.Helper()
	if err := f.Release(ctx); err != nil {
		t.Fatalf("Release of the held request = %v", err)
	}
}

// hsLive reports whether held (a hold context) is still live.
func hsLive(held context.Context) bool { return held != nil && held.Err() == nil }

// An hsLocker is a Mutex or an RWMutex's write side.
type hsLocker interface {
	LockContext(context.Context) (context.Context, error)
	Unlock()
}

// hsLastIn starts c's LockContext on path, waits until path has n children
// (c's the last), checks that c waits, calls release, and checks that c
// then holds alone; c unlocks, and nothing is left under path.
func hsLastIn(t *testing.T, ctx context.Context, obs *zk.Conn, path string, c hsLocker, n int, release func()) {
	t.Helper()
	res := make(chan error, 1)
	go func() { _, err := c.LockContext(ctx); res <- err }()
	awaitChildren(t, obs, path, n)
	hsNone(t, "c's LockContext", res)
	release()
	if err := reviewRecv(t, "c's LockContext", res); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Fatalf("c holds with %v under the path", kids)
	}
	c.Unlock()
	awaitChildren(t, obs, path, 0)
}

// hsRequeued holds the lock-node create of lock (a's LockContext or
// RLockContext on path, through p, on the Session s) while first holds,
// until s gives its session up; it returns a's hold, taken on the next
// session once a queued behind first and first let go (release), and the
// held create.
func hsRequeued(t *testing.T, ctx context.Context, obs *zk.Conn, path string, p *zktest.Proxy, s *zkconn.Session,
	lock func(context.Context) (context.Context, error), release func()) (context.Context, *zktest.Fault) {
	t.Helper()
	f := p.Strike(createOf(path), zktest.Hold)
	t.Cleanup(f.Disarm)
	type r struct {
		held context.Context
		err  error
	}
	res := make(chan r, 1)
	go func() { h, err := lock(ctx); res <- r{h, err} }()
	r38Struck(t, f, res)
	hsLose(t, p, s)
	awaitChildren(t, obs, path, 2) // first's, a's on its next session
	release()
	got := reviewRecv(t, "a's lock", res)
	if got.err != nil {
		t.Fatal(got.err)
	}
	return got.held, f
}

// hsAsync runs f on a goroutine.
func hsAsync(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}
