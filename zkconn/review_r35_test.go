package zkconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 35: the tap's reply order check, give-ups among the deletes
// under way (Deletes), AwaitSent.

// r35Wire returns the wire of s's current client.
func r35Wire(s *Session) *wire {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.wire
}

// r35Workload runs a mix of every kind of request go-zookeeper sends
// (create, getData/exists/getChildren with and without watches, setData,
// multi, sync, delete, setAuth) from several goroutines on h's connection
// until the deadline, so that pings, setAuth replies (answered out of turn)
// and notifications interleave with replies. Every request must succeed.
func r35Workload(t *testing.T, h Handle, root string, until time.Time, auth bool) {
	t.Helper()
	c := h.Conn()
	acl := zk.WorldACL(zk.PermAll)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for g := range 6 {
		wg.Go(func() {
			for i := 0; time.Now().Before(until); i++ {
				p, err := c.Create(fmt.Sprintf("%s/g%d-", root, g), []byte("x"), zk.FlagEphemeral|zk.FlagSequence, acl)
				if err != nil {
					fail(fmt.Errorf("create: %w", err))
					return
				}
				if _, _, _, err := c.GetW(p); err != nil {
					fail(fmt.Errorf("getW: %w", err))
					return
				}
				if _, _, _, err := c.ExistsW(p + "-none"); err != nil {
					fail(fmt.Errorf("existsW: %w", err))
					return
				}
				if _, _, _, err := c.ChildrenW(root); err != nil {
					fail(fmt.Errorf("childrenW: %w", err))
					return
				}
				if _, err := c.Set(p, []byte("y"), -1); err != nil {
					fail(fmt.Errorf("set: %w", err))
					return
				}
				if _, err := c.Sync(root); err != nil {
					fail(fmt.Errorf("sync: %w", err))
					return
				}
				if _, err := c.Multi(&zk.CheckVersionRequest{Path: p, Version: -1},
					&zk.CreateRequest{Path: p + "-m", Acl: acl}, &zk.DeleteRequest{Path: p + "-m", Version: -1}); err != nil {
					fail(fmt.Errorf("multi: %w", err))
					return
				}
				if _, _, err := c.Get(root); err != nil {
					fail(fmt.Errorf("get: %w", err))
					return
				}
				if auth && i%5 == g {
					if err := c.AddAuth("digest", []byte(fmt.Sprintf("r35-%d:pw", g))); err != nil {
						fail(fmt.Errorf("addAuth: %w", err))
						return
					}
				}
				if i%3 == 0 { // leave some nodes (and their watches) behind for a while
					continue
				}
				if err := c.Delete(p, -1); err != nil {
					fail(fmt.Errorf("delete: %w", err))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request failed on a healthy server: %v", err)
	}
}

// r35NoClose runs the workload on a Session dialed to addr for three ping
// intervals and more and checks that the Session stayed on its first
// connection: no reply on a healthy server comes out of turn.
func r35NoClose(t *testing.T, addr string, opts ...Option) {
	s := dial(t, []string{addr}, append(opts, WithSessionTimeout(2*time.Second), WithDigestAuth("r35", "pw"))...) // a ping every 2/3 s
	sub := s.Subscribe()
	defer sub.Stop()
	h := current(t, s)
	root := testRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	r35Workload(t, h, root, time.Now().Add(3*time.Second), true)
	if n := r35Wire(s).dialed.Load(); n != 1 {
		t.Errorf("%d connections dialed on a healthy server; want 1 (a reply was taken for out of turn)", n)
	}
	for {
		select {
		case ev := <-sub.C():
			if ev.State == StateSuspended {
				t.Errorf("suspended on a healthy server: %+v", ev)
			}
			continue
		default:
		}
		break
	}
}

// TestReviewR35NoSpuriousCloseStandalone: every kind of request, pings and
// setAuth (answered at once, out of turn) on a standalone ZooKeeper 3.8:
// the tap never takes a reply for one out of turn (passes).
func TestReviewR35NoSpuriousCloseStandalone(t *testing.T) {
	r35NoClose(t, shared.Addr())
}

// TestReviewR35NoSpuriousCloseTLS: the same on a secure port, which
// ZooKeeper serves with Netty, whose replies from the request pipeline go
// through the channel's event loop (passes).
func TestReviewR35NoSpuriousCloseTLS(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTLS())
	r35NoClose(t, srv.SecureAddr(), WithTLS(srv.TLSConfig()))
}

// TestReviewR35NoSpuriousCloseEnsemble: the same on an ensemble's follower
// (reads served locally, writes and syncs through the leader, per-session
// order kept by the CommitProcessor) and on its leader (passes).
func TestReviewR35NoSpuriousCloseEnsemble(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("follower", func(t *testing.T) { r35NoClose(t, e.Server((leader+1)%e.Len()).Addr()) })
	t.Run("leader", func(t *testing.T) { r35NoClose(t, e.Server(leader).Addr()) })
}

// TestReviewR35NoSpuriousCloseAcrossReconnect: with credentials and many
// watches set (go-zookeeper sends them again in several setWatches parts,
// each once the one before is answered, with other requests between), a
// cut connection is followed by exactly one more: nothing the reconnect
// sends (setAuth, setWatches parts, queued requests) is answered out of
// turn (passes).
func TestReviewR35NoSpuriousCloseAcrossReconnect(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(4*time.Second), WithDigestAuth("r35", "pw"))
	sub := s.Subscribe()
	defer sub.Stop()
	h := current(t, s)
	root := testRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	c := h.Conn()
	if err := c.AddAuth("digest", []byte("r35b:pw")); err != nil {
		t.Fatal(err)
	}
	// More than 128 KiB of watched paths: two setWatches parts at least.
	long := strings.Repeat("w", 200)
	for i := range 800 {
		if _, _, _, err := c.ExistsW(fmt.Sprintf("%s/%s-%d", root, long, i)); err != nil {
			t.Fatal(err)
		}
	}
	p.Cut()
	await(t, sub, StateSuspended, time.Minute)
	await(t, sub, StateReconnected, time.Minute)
	r35Workload(t, current(t, s), root, time.Now().Add(2*time.Second), true)
	if n := r35Wire(s).dialed.Load(); n != 2 {
		t.Errorf("%d connections dialed after one cut; want 2", n)
	}
}

// r35GiveUp starts CreateProtected under root through a proxy whose create
// reply is swallowed, and cancels its ctx once the create is applied: the
// create is given up in flight. It returns once CreateProtected has
// returned context.Canceled.
func r35GiveUp(t *testing.T, p *zktest.Proxy, h Handle, root string) {
	t.Helper()
	f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: root + "/", Prefix: true}, zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := h.CreateProtected(ctx, root, "lock-", nil)
		res <- err
	}()
	zktest.AwaitStruck(t, f)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateProtected = %v; want context.Canceled", err)
	}
}

// TestReviewR35CloseDuringGiveUp: a protected create is given up in flight
// (its reply swallowed on a live connection) and the Session is closed at
// once, while the request's goroutine, which the Session's WaitGroup
// counts, still waits for that reply and would then wait for its cleanup
// to settle. Close must not deadlock on it, and leaves no delete under way
// recorded (passes; goleak checks the goroutines at the end).
func TestReviewR35CloseDuringGiveUp(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(30*time.Second)) // no ping for 10 s
	h := current(t, s)
	root := testRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	r35GiveUp(t, p, h, root)
	if d := h.Deleting(root); len(d) != 1 {
		t.Fatalf("Deleting(%s) = %v right after the give-up; want its prefix", root, d)
	}
	r35CloseLeavesNothing(t, s)
}

// TestReviewR35GiveUpForgotten: a give-up's record goes once its cleanup
// has settled (the next reply, a ping's, comes out of turn, the create
// fails, forgetProtected deletes the node): wire.pending is empty and the
// node gone, on a session that lives on (passes).
func TestReviewR35GiveUpForgotten(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(3*time.Second))
	h := current(t, s)
	root := testRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	r35GiveUp(t, p, h, root)
	d := h.Deleting(root)
	if len(d) != 1 {
		t.Fatalf("Deleting(%s) = %v; want the give-up", root, d)
	}
	for _, ch := range d {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("the give-up never settled")
		}
	}
	w := r35Wire(s)
	w.mu.Lock()
	n := len(w.pending)
	w.mu.Unlock()
	if n != 0 {
		t.Errorf("wire.pending = %d entries after the give-up settled; want none", n)
	}
	noChildren(t, zktest.Observer(t, shared.Addr()), root, "after the give-up settled")
}

// TestReviewR35DeletesOf: Of matches a node of a given-up create only by
// its whole UUID, and never a stranger's node, Curator's included (passes).
func TestReviewR35DeletesOf(t *testing.T) {
	u := newUUID()
	ch := make(chan struct{})
	d := Deletes{"/l/" + ProtectedPrefix + u + "-": ch, "/l/plain-0000000001": ch}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/l/" + ProtectedPrefix + u + "-lock-0000000003", true},
		{"/l/" + ProtectedPrefix + u + "-", true},
		{"/l/plain-0000000001", true},
		{"/l/" + ProtectedPrefix + strings.ToUpper(u) + "-lock-0000000003", false},
		{"/l/" + ProtectedPrefix + u[:35] + "0-lock-0000000003", u[35] == '0'},
		{"/l/" + ProtectedPrefix + newUUID() + "-lock-0000000003", false},
		{"/m/" + ProtectedPrefix + u + "-lock-0000000003", false},
		{"/l/x/" + ProtectedPrefix + u + "-lock-0000000003", false},
		{"/l/lock-0000000003", false},
		{"/l/" + ProtectedPrefix + u, false},
	} {
		if got := d.Of(tc.path) != nil; got != tc.want {
			t.Errorf("Of(%s) = %v; want %v", tc.path, got, tc.want)
		}
	}
	if Deletes(nil).Of("/l/"+ProtectedPrefix+u+"-lock-1") != nil {
		t.Error("nil Deletes matched")
	}
}

// TestReviewR35AuthReplySwallowedHangsDial: the reply to the setAuth the
// Session sends with WithDigestAuth is lost on a connection that stays up
// (Drop). ZooKeeper answers a setAuth as soon as it reads it, before any
// request read after it, so once a later ping is answered that reply is
// known lost; but the tap lets a non-setAuth reply pass whenever it
// answers the oldest non-setAuth request, whatever setAuth is older still:
// the connection stays up, go-zookeeper's AddAuth waits for that reply as
// long as it lasts, and the Session never comes up on a healthy server.
// Dial only ends with its ctx (Lock would wait for ever). With the loss
// taken for a reply out of turn, AddAuth fails with the connection, the
// Session sends its credentials again on the next one, and Dial returns.
func TestReviewR35AuthReplySwallowedHangsDial(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	f := p.Strike(zktest.Match{Op: zktest.OpAuth}, zktest.Drop)
	defer f.Disarm()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds the failure only
	defer cancel()
	start := time.Now()
	s, err := Dial(ctx, []string{p.Addr()}, WithSessionTimeout(3*time.Second), WithDigestAuth("r35", "pw")) // a ping each second
	select {
	case <-f.Struck():
	default:
		t.Fatal("the fault did not strike the setAuth")
	}
	if err != nil {
		t.Fatalf("Dial with its setAuth reply swallowed (pings answered all along) = %v after %v; want the Session up once the loss shows (the next ping's reply)",
			err, time.Since(start).Round(time.Millisecond))
	}
	s.Close()
}

// TestReviewR35CloseDuringGiveUpCleanup: a protected create is given up in
// flight (black-holed), then the connection goes and no server can be
// reached: the request's goroutine, counted by the Session's WaitGroup,
// runs the give-up's cleanup (forgetProtected, which waits for a
// connection) and waits for it to settle. Close ends that wait (the
// session is lost) instead of deadlocking on it, and no delete under way
// stays recorded (passes).
func TestReviewR35CloseDuringGiveUpCleanup(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(30*time.Second))
	sub := s.Subscribe()
	defer sub.Stop()
	h := current(t, s)
	root := testRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, root); err != nil {
		t.Fatal(err)
	}
	f := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: root + "/", Prefix: true}, zktest.BlackHole)
	defer f.Disarm()
	cctx, ccancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := h.CreateProtected(cctx, root, "lock-", nil)
		res <- err
	}()
	zktest.AwaitStruck(t, f)
	ccancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateProtected = %v; want context.Canceled", err)
	}
	p.Close() // the create fails with the connection; no reconnect succeeds
	await(t, sub, StateSuspended, time.Minute)
	r35CloseLeavesNothing(t, s)
}

// r35CloseLeavesNothing closes s, which must not block behind a give-up's
// cleanup, and checks that no delete under way stays recorded.
func r35CloseLeavesNothing(t *testing.T, s *Session) {
	t.Helper()
	w := r35Wire(s)
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close blocked for 20s behind a give-up's cleanup")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) != 0 {
		t.Errorf("wire.pending after Close = %v; want empty", w.pending)
	}
}
