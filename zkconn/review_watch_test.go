package zkconn

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// rwSynced returns once every event the server sent h's session before now
// has been dispatched (events come before the replies that follow them).
func rwSynced(t *testing.T, h Handle, path string) {
	t.Helper()
	if _, _, err := h.Conn().Exists(path); err != nil {
		t.Fatal(err)
	}
}

// TestReviewWatchNotifyAfterStop: Stop says "once it returns, w's event goes
// nowhere", and Notify "After Stop it does nothing". A Watch that fired
// before anyone received its event keeps that event in C through Stop:
// Notify after Stop hands it to f, and C still yields it.
//
// In hold.follow this is the interleaving rewatch: follow sets hd.own = w
// and lets hd.mu go; end marks ended, takes own = w and Stops it; follow's
// Notify then calls changed with the event. changed re-checks ended, so the
// hold itself is unharmed, but the Watch breaks its own contract.
func TestReviewWatchNotifyAfterStop(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	other := current(t, dial(t, []string{shared.Addr()})).Conn()
	ctx := context.Background()
	root := testRoot(t)
	p, err := h.CreateProtected(ctx, root, "n-", nil)
	if err != nil {
		t.Fatal(err)
	}

	// Notify after Stop, the event fired before Stop.
	_, _, w, err := h.GetW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	rwSynced(t, h, root)
	w.Stop()
	var calls atomic.Int32
	w.Notify(func(zk.Event) { calls.Add(1) })
	if n := calls.Load(); n != 0 {
		t.Errorf("Notify after Stop called its function %d time(s); its doc says it does nothing after Stop", n)
	}

	// C after Stop, the event fired before Stop.
	_, _, w, err = h.GetW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Set(p, []byte("y"), -1); err != nil {
		t.Fatal(err)
	}
	rwSynced(t, h, root)
	w.Stop()
	select {
	case ev := <-w.C():
		t.Errorf("C yielded %v after Stop; Stop's doc says w's event then goes nowhere", ev.Type)
	default:
	}
}

// TestReviewWatchStopWaitsForNotify: Stop called while the function given
// to Notify runs on the event goroutine returns only once it has returned
// (no deadlock between Watch.mu and watchSet.mu either: Stop takes them one
// after the other). Passes; covers the Stop/fire race end() relies on.
func TestReviewWatchStopWaitsForNotify(t *testing.T) {
	s := dial(t, []string{shared.Addr()})
	h := current(t, s)
	other := current(t, dial(t, []string{shared.Addr()})).Conn()
	ctx := context.Background()
	root := testRoot(t)
	p, err := h.CreateProtected(ctx, root, "n-", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, w, err := h.GetW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	w.Notify(func(zk.Event) {
		close(entered)
		<-release
		returned.Store(true)
	})
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	<-entered // f runs on go-zookeeper's receiving goroutine now
	stopped := make(chan bool)
	go func() {
		w.Stop()
		stopped <- returned.Load()
	}()
	// Another Watch set meanwhile: watchSet.mu must not wait for f. Its
	// request's reply waits for the event goroutine, so only the add is
	// checked here (GetW's add runs before the request goes out).
	added := make(chan struct{})
	go func() {
		w2 := h.gen.c.watches.add(watchKey{path: p + "-other"})
		w2.Stop()
		close(added)
	}()
	select {
	case <-added:
	case <-time.After(10 * time.Second):
		t.Fatal("watchSet.add blocked while a notified function ran")
	}
	close(release)
	if !<-stopped {
		t.Fatal("Stop returned while the notified function was still running")
	}
	rwSynced(t, h, root)
	if n := watchCount(h); n != 0 {
		t.Fatalf("%d Watches left in the set; want 0", n)
	}
}

// TestReviewWatchGetWAcrossDrop: a GetW whose request is cut, or whose reply
// is lost (applied, then the connection closed), is sent again after the
// reconnect by Do; its Watch stays registered meanwhile, so a write made
// while the connection was down is in the data read, and a write after it
// fires the Watch. Nothing is left in the set. Passes.
func TestReviewWatchGetWAcrossDrop(t *testing.T) {
	t.Parallel()
	for _, action := range []zktest.Action{zktest.Cut, zktest.Lose} {
		t.Run(action.String(), func(t *testing.T) {
			srv := zktest.Start(t)
			px := zktest.NewProxy(t, srv.Addr())
			s := dial(t, []string{px.Addr()}, WithSessionTimeout(20*time.Second))
			h := current(t, s)
			other := zktest.Observer(t, srv.Addr())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			root := testRoot(t)
			p, err := h.CreateProtected(ctx, root, "n-", nil)
			if err != nil {
				t.Fatal(err)
			}
			sub := s.Subscribe()
			defer sub.Stop()
			f := px.Strike(zktest.Match{Op: zktest.OpGetData, Path: p}, action)
			type res struct {
				data []byte
				w    *Watch
				err  error
			}
			got := make(chan res, 1)
			go func() {
				data, _, w, err := h.GetW(ctx, p)
				got <- res{data, w, err}
			}()
			zktest.AwaitStruck(t, f)
			await(t, sub, StateSuspended, 10*time.Second)
			if _, err := other.Set(p, []byte("while down"), -1); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("GetW across a %v: %v", action, r.err)
			}
			if string(r.data) != "while down" {
				// The Watch may have fired on the write instead, if the
				// retry's request was read before it: then it must
				// have fired.
				select {
				case ev := <-r.w.C():
					t.Logf("data %q, Watch fired with %v", r.data, ev.Type)
					return
				default:
					t.Fatalf("GetW read %q, and the Watch did not fire: the write while down was missed", r.data)
				}
			}
			if _, err := other.Set(p, []byte("after"), -1); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-r.w.C():
				if ev.Type != zk.EventNodeDataChanged {
					t.Fatalf("Watch after the retry: %v; want EventNodeDataChanged", ev.Type)
				}
			case <-ctx.Done():
				t.Fatal("the Watch set by the retried GetW never fired on a write")
			}
			if n := watchCount(h); n != 0 {
				t.Fatalf("%d Watches left in the set; want 0", n)
			}
		})
	}
}

// TestReviewWatchLostSessionNotifies: a notified Watch on a node that
// outlives the session (persistent) gets EventNotWatching when the session
// is lost by a partition past its timeout, and by then the Handle reports
// the loss (hold.changed builds its cause from h.Err() first). Passes.
func TestReviewWatchLostSessionNotifies(t *testing.T) {
	srv := zktest.Start(t)
	px := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{px.Addr()}, WithSessionTimeout(2*time.Second))
	h := current(t, s)
	other := zktest.Observer(t, srv.Addr())
	root := testRoot(t)
	if _, err := h.CreateProtected(context.Background(), root, "x-", nil); err != nil {
		t.Fatal(err)
	}
	p, err := other.Create(root+"/persistent-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, _, w, err := h.GetW(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		ev  zk.Event
		err error
	}
	got := make(chan seen, 2)
	w.Notify(func(ev zk.Event) { got <- seen{ev, h.Err()} })
	sub := s.Subscribe()
	defer sub.Stop()
	px.BlackHole()
	await(t, sub, StateLost, 30*time.Second)
	select {
	case sn := <-got:
		if sn.ev.Type != zk.EventNotWatching {
			t.Fatalf("on loss: %v; want EventNotWatching", sn.ev.Type)
		}
		if !errors.Is(sn.err, ErrSessionLost) {
			t.Fatalf("h.Err() as the Watch fired = %v; want ErrSessionLost", sn.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event on a Watch of a lost session")
	}
}
