package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// manyWatches sets 600 exists watches for h's session on long paths, so
// that go-zookeeper sets them again on a new connection in several
// setWatches requests (of 128 KiB at most, each sent once the one before
// it is answered, while the Session's callers' requests go out too).
func manyWatches(t *testing.T, h Handle) {
	t.Helper()
	prefix := testRoot(t) + "/elsewhere/" + strings.Repeat("x", 900)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < 600; i += 8 {
				if _, _, _, err := h.Conn().ExistsW(fmt.Sprintf("%s%d", prefix, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// awaitSetWatchesSent returns once go-zookeeper has sent every setWatches
// request and read its reply: its goroutine that sends them has ended.
func awaitSetWatchesSent(t *testing.T) {
	t.Helper()
	awaitGoroutines(t, "the setWatches sent", func(gs [][]byte) bool {
		return !slices.ContainsFunc(gs, func(g []byte) bool { return bytes.Contains(g, []byte("zk.(*Conn).sendSetWatches.func")) })
	})
}

// awaitGoroutines returns once ok holds of the process's goroutines (their
// stacks, as runtime.Stack writes them). Nothing tells when, so it looks
// every few milliseconds, for up to 30 s.
func awaitGoroutines(t *testing.T, what string, ok func(gs [][]byte) bool) {
	t.Helper()
	buf := make([]byte, 1<<22)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ok(bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n"))) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

// relZxid returns the zxid a setWatches request b's watches are relative
// to: go-zookeeper's last zxid when it made b.
func relZxid(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[12:20])) }

// setWatchesRound is one attempt of the tests below: x1, a signal watch
// of h's session at sig, is wanted across a reconnect, and go-zookeeper's
// first setWatches on the new connection g does not carry it (else the
// round is over, and it reports false). g's gate is shut.
func setWatchesRound(t *testing.T, ctx context.Context, gs *gated, h Handle, other Handle, nodeO, sig string) (*ExistsWatch, *gateConn, bool) {
	t.Helper()
	x1 := mustExistsW(t, ctx, h, sig)
	g := gs.redial(t)
	g.until(t, "the first setWatches part", func() bool { return len(g.sw) > 0 })
	g.mu.Lock()
	inFirst := bytes.Contains(g.sw[0], juteString(sig))
	g.mu.Unlock()
	if inFirst {
		t.Logf("%s in the first part; again", sig)
		g.open()
		awaitServerWatch(t, sig, h.ID()) // the part has been applied
		if err := other.Signal(ctx, nodeO, sig); err != nil {
			t.Fatal(err)
		}
		signaled(t, ctx, x1)
		return nil, nil, false
	}
	return x1, g, true
}

// rewatchAndSignal sets x2 at sig on h's connection g (its reply waits
// behind the first setWatches part's, held at g's gate), then sends the
// signal, whose event comes behind it.
func rewatchAndSignal(t *testing.T, ctx context.Context, h, other Handle, g *gateConn, nodeO, sig string) <-chan *ExistsWatch {
	t.Helper()
	res := goExistsW(t, ctx, h, sig)
	// The server watches sig for h: x2 has been applied (x1's watch went
	// with the old connection, and the part carrying sig is not out yet).
	awaitServerWatch(t, sig, h.ID())
	if err := other.Signal(ctx, nodeO, sig); err != nil {
		t.Fatal(err)
	}
	g.await(t, func(frames [][]byte) bool {
		return slices.ContainsFunc(frames, func(f []byte) bool { return notifies(f, int32(zk.EventNodeCreated), sig) })
	})
	return res
}

// takeSignal takes the signal's event on x1 and on x2 (from res).
func takeSignal(t *testing.T, ctx context.Context, x1 *ExistsWatch, res <-chan *ExistsWatch) {
	t.Helper()
	var x2 *ExistsWatch
	select {
	case x2 = <-res:
	case <-ctx.Done():
		t.Fatal("x2's ExistsW never returned")
	}
	if x2 == nil || x2.C == nil {
		t.Fatal("x2 set no watch")
	}
	signaled(t, ctx, x1)
	signaled(t, ctx, x2)
}

// signaled takes the signal's event on x, whose caller then calls Unwatch.
func signaled(t *testing.T, ctx context.Context, x *ExistsWatch) {
	t.Helper()
	select {
	case ev := <-x.C:
		if ev.Type != zk.EventNodeCreated {
			t.Fatalf("event %v at %s; want the signal", ev, x.Path)
		}
	case <-ctx.Done():
		t.Fatalf("no signal at %s", x.Path)
	}
	x.Unwatch()
}

// TestReviewSetWatchesPartAfterSignal: a caller holding an exists watch
// x1 on a signal path across a reconnect sets it again on the new
// connection (x2: in dsync, follow of the same predecessor again once a
// write into it fires its data watch), the signal is sent, the server
// fires x2's watch, and the callers take the event and call Unwatch. The
// setWatches part that carried the path went out after the server fired:
// ZooKeeper set the exists watch once more, after its only event, for
// nobody (go-zookeeper had forgotten it, and the signal path is never
// created again), for as long as the connection lived. A setWatches now
// carries no watch a request on its connection has set already
// (wire.carriedLocked).
//
// The first part's reply is held (a slow reading goroutine) while x2 goes
// out, the signal is sent and its event comes behind it, so that the parts
// after the first go out after the event.
func TestReviewSetWatchesPartAfterSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gs := gatedSession(t)
	h := current(t, gs.Session)
	other, nodeO := signalNode(t, ctx)
	manyWatches(t, h)
	gs.shutAtSetWatches(true)

	for round := range 10 {
		sig := fmt.Sprintf("%s.s%d", nodeO, round)
		x1, g, ok := setWatchesRound(t, ctx, gs, h, other, nodeO, sig)
		if !ok {
			continue
		}
		h = current(t, gs.Session)
		res := rewatchAndSignal(t, ctx, h, other, g, nodeO, sig)
		g.open()
		takeSignal(t, ctx, x1, res)
		awaitSetWatchesSent(t)
		m, err := shared.Watches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(m[sig], h.ID()) {
			t.Errorf("both callers took the signal's event and called Unwatch, and the signal path is never created again, "+
				"but the server watches %s for session %#x (set again by a later setWatches part): leaked for as long as the connection lives", sig, h.ID())
		}
		return
	}
	t.Fatal("the signal path was in the first setWatches part ten times")
}

// TestReviewSetWatchesPartOnNextConnection: go-zookeeper queues each
// setWatches part once the one before it is answered. A part queued while
// its sending goroutine is busy writing another request, when that
// connection breaks, is not failed (with more than one server listed, as
// an ensemble's are): it goes out first on the next connection, and the
// rest of that old list after it. In TestReviewSetWatchesPartAfterSignal's
// course of events (the signal fired the watch x2 set again), the next
// connection's tap knew nothing of x2's request, made on the one before:
// the old part set the exists watch again for nobody. A setWatches now
// carries only watches go-zookeeper holds (wire.carriedLocked).
//
// The old connection's sending goroutine is kept busy by holding the write
// of a plain exists (a slow socket) while the replies are read.
func TestReviewSetWatchesPartOnNextConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gs := gatedSession(t, shared.Addr(), shared.Addr())
	h := current(t, gs.Session)
	other, nodeO := signalNode(t, ctx)
	manyWatches(t, h)

	for round := range 10 {
		gs.shutAtSetWatches(true)
		sig := fmt.Sprintf("%s.s%d", nodeO, round)
		x1, g, ok := setWatchesRound(t, ctx, gs, h, other, nodeO, sig)
		if !ok {
			continue
		}
		g.mu.Lock()
		oldZxid := relZxid(g.sw[0])
		g.mu.Unlock()
		// A write, so that the next connection's own parts are made
		// relative to a later zxid than the old connection's.
		if err := other.Signal(ctx, nodeO, nodeO+".z"); err != nil {
			t.Fatal(err)
		}
		h = current(t, gs.Session)
		res := rewatchAndSignal(t, ctx, h, other, g, nodeO, sig)

		heldW, releaseW := g.holdWrite(opExists, nodeO+".marker")
		go h.Conn().Exists(nodeO + ".marker") //nolint:errcheck // fails with its connection
		select {
		case <-heldW:
		case <-ctx.Done():
			t.Fatal("the marker exists was never written")
		}
		// Replies flow: the first part's (go-zookeeper queues the next,
		// behind the held write), x2's, the signal's event.
		g.open()
		takeSignal(t, ctx, x1, res)

		// The connection breaks under the held write.
		gs.shutAtSetWatches(false)
		n := gs.count()
		g.Conn.Close()
		close(releaseW)
		g2 := gs.dialedAfter(t, n)
		awaitSetWatchesSent(t)
		g2.mu.Lock()
		carried := slices.ContainsFunc(g2.sw, func(b []byte) bool { return relZxid(b) == oldZxid })
		g2.mu.Unlock()
		if !carried {
			t.Logf("round %d: no part queued as the connection broke; again", round)
			continue
		}
		m, err := shared.Watches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(m[sig], h.ID()) {
			t.Errorf("both callers took the signal's event and called Unwatch, and the signal path is never created again, "+
				"but the server watches %s for session %#x: the old connection's setWatches parts went out on the next one, "+
				"and set it again: leaked for as long as the connection lives", sig, h.ID())
		}
		return
	}
	t.Fatal("ten rounds, and none struck its course of events")
}

// TestReviewSetWatchesNodeMadeWhileDown: W1, a plain exists
// watch (as Handle.CreatedW sets for election.go's Observe while the
// election's path does not exist), waits for its path P to appear. The connection
// drops; P is created meanwhile; on the new connection another exists
// request at P (a second Observe of the same Session, whose ChildrenW saw
// no path yet) goes out before go-zookeeper's setWatches, and is answered
// "there" (a data watch). carriedLocked left P out of the setWatches, as
// a request on the connection had set a watch there, so the server never
// sent W1 the NodeCreated it sends for an exists watch set again on a node
// made since. W1 waited for an event that comes only when P's data changes
// or P is deleted: an election root is neither while it has members, so
// that Observe never reported a leader. Only an answer that no node is
// there stands for go-zookeeper's exists watch now (existsWatches.on).
//
// Wire order on the new connection: connect, exists(sig) [the queued
// request, answered "there"], getData, setWatches without sig.
func TestReviewSetWatchesNodeMadeWhileDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gs := gatedSession(t, shared.Addr(), shared.Addr()) // two listed: the queued exists waits for the next connection
	h := current(t, gs.Session)
	other, nodeO := signalNode(t, ctx)
	sig := nodeO + ".s"

	// W1: a plain exists watch at sig, which does not exist.
	var w1 <-chan zk.Event
	if err := h.Do(ctx, func(c *zk.Conn) (err error) {
		var there bool
		there, _, w1, err = c.ExistsW(sig)
		if there {
			t.Error("setup: sig there")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// A getData of nodeO whose Write waits: go-zookeeper's sending
	// goroutine is held on it, and the second exists queues behind it.
	g := gs.last()
	held, release := g.holdWrite(opGetData, nodeO)
	go h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Get(nodeO); return err })
	<-held
	res := make(chan bool, 1)
	go func() {
		var there bool
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			there, _, _, err = c.ExistsW(sig)
			return err
		})
		if err != nil {
			t.Error(err)
		}
		res <- there
	}()
	// The second exists is in go-zookeeper's send queue: its caller has
	// queued it (it is past queueRequest) and waits for the reply.
	awaitQueued(t, "ExistsW")

	// sig is created while h's connection is down: the server's event on
	// the old connection is never read.
	g.gate()
	if err := other.Do(ctx, func(c *zk.Conn) error {
		_, err := c.Create(sig, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer other.Do(context.Background(), func(c *zk.Conn) error { return c.Delete(sig, -1) })
	n := gs.count()
	g.Conn.Close()
	close(release)
	g2 := gs.dialedAfter(t, n)
	if there := <-res; !there {
		t.Fatal("setup: the second exists did not see sig")
	}
	g2.await(t, func(frames [][]byte) bool { return slices.ContainsFunc(frames, g2.answersSW) }) // the setWatches applied
	g2.mu.Lock()
	carried := slices.ContainsFunc(g2.sw, func(b []byte) bool { return bytes.Contains(b, juteString(sig)) })
	g2.mu.Unlock()
	t.Logf("go-zookeeper's setWatches on the new connection named %s: %v", sig, carried)
	select {
	case ev := <-w1:
		if ev.Type != zk.EventNodeCreated {
			t.Errorf("W1: event %v; want %v", ev, zk.EventNodeCreated)
		}
	case <-ctx.Done():
		t.Errorf("W1, a plain exists watch at %s held across the reconnect, never fired: %s was created while the connection was down, and the setWatches left the watch out", sig, sig)
	}
}
