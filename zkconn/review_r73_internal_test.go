package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestReviewR73StaleSharedWatchOnLiveLink: go-zookeeper holds a data watch
// at node from connection 1, and carries it to a later connection in
// setWatches parts (many watches: more than 128 KB), node's in a part after
// the first. While that connection is up (the Session reconnected, its
// Suspended channel open) a GetW reads node between two parts: it reads
// without a watch (the mirror says go-zookeeper holds one), although the
// server holds none on this connection yet. Node is then written and
// deleted, and only then does node's part reach the server: it reports the
// deletion and nothing of the write. The GetW's Watch fires with
// NodeDeleted although the node was written after its read while its
// connection stayed up: follow's rule for a writer behind a writer
// (queue.go: "Once link has dropped, a writer behind a writer lists
// again") counts on a Watch from GetW set on the connection up at the
// read, and a downgrade (a write, then the writer's deletion) passes as a
// plain unlock.
func TestReviewR73StaleSharedWatchOnLiveLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, node := r70Session(t)
	// 400 watches of about 1 KB each: four parts or so.
	watchMany(t, ctx, h, other, root, 400, 1000)
	_, _, w, err := h.GetW(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// On each connection after the first: a first part carrying node
	// fails the connection (the next sends its watches in another order);
	// else the first part waits for releaseFirst, and the part carrying
	// node for releaseNode.
	nodeBytes := juteString(node)
	firstHeld, releaseFirst := make(chan int, 1), make(chan struct{})
	nodeHeld, releaseNode := make(chan struct{}), make(chan struct{})
	var (
		mu     sync.Mutex
		parts  = map[int]int{}
		chosen int
		once   sync.Once
	)
	openFirst := sync.OnceFunc(func() { close(releaseFirst) })
	openNode := sync.OnceFunc(func() { close(releaseNode) })
	t.Cleanup(func() { d.setHook(nil); openFirst(); openNode() })
	d.setHook(func(n int, b []byte) int {
		if n < 2 || r70Op(b) != opSetWatches {
			return r70Pass
		}
		has := bytes.Contains(b[12:], nodeBytes)
		mu.Lock()
		parts[n]++
		part, c := parts[n], chosen
		if part == 1 && !has && c == 0 {
			chosen = n
		}
		c = chosen
		mu.Unlock()
		switch {
		case part == 1 && has && c == 0:
			return r70Fail // try the next connection
		case n != c:
			return r70Pass
		case part == 1:
			firstHeld <- n
			<-releaseFirst
		case has:
			once.Do(func() { close(nodeHeld) })
			<-releaseNode
		}
		return r70Pass
	})
	d.conn(1).Conn.Close()
	var n int
	select {
	case n = <-firstHeld:
	case <-ctx.Done():
		t.Fatal("no connection sent a first setWatches part without node")
	}

	// The Session is up on connection n (reconnected at its connect
	// response, before go-zookeeper sent its watches).
	link := h.Refresh().Suspended()
	select {
	case <-link:
		t.Fatal("no connection up while connection n sends its watches")
	default:
	}
	res := goGetW(ctx, h, node)
	awaitQueued(t, "Get", "GetW") // behind the first part, ahead of the next
	openFirst()
	r := <-res
	if r.err != nil {
		t.Fatalf("GetW = %v", r.err)
	}
	defer r.w.Stop()
	select {
	case <-nodeHeld:
	case <-ctx.Done():
		t.Fatal("connection n never sent node's part")
	}
	st, err := other.Set(node, []byte("written"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	openNode()
	select {
	case ev := <-r.w.C():
		select {
		case <-link:
			t.Fatalf("connection %d dropped before the Watch fired: inconclusive", n)
		default:
			if ev.Type != zk.EventNodeDataChanged {
				t.Errorf("GetW read version %d on connection %d; node written (version %d) then deleted while that connection stayed up; its Watch fired %v, nothing of the write", r.st.Version, n, st.Version, ev.Type)
			}
		}
	case <-ctx.Done():
		t.Fatal("the GetW's Watch never fired")
	}
}

// TestReviewR73SharedReadSentOnNextConnection: GetW finds the watch at node
// held on connection 1 and reads without one, but its read, queued behind
// a write the connection is slow to take, goes out on connection 2 after
// connection 1 drops, ahead of connection 2's setWatches. Node is written
// and deleted before that setWatches reaches the server, which then
// reports the deletion alone. GetW must not return that read with a Watch
// that tells nothing of the write: the reply came on another connection
// than the one checked, so it reads again, with a watch of its own.
func TestReviewR73SharedReadSentOnNextConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, node := r70Session(t)
	_, _, w0, err := h.GetW(ctx, node) // held on connection 1
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Stop()

	hPath := root + "/h"
	heldH, releaseH := make(chan struct{}), make(chan struct{})
	heldSW, releaseSW := make(chan struct{}), make(chan struct{})
	openH, openSW := sync.OnceFunc(func() { close(releaseH) }), sync.OnceFunc(func() { close(releaseSW) })
	t.Cleanup(func() { d.setHook(nil); openH(); openSW() })
	var getXid atomic.Int32
	var onceH, onceSW sync.Once
	d.setHook(func(n int, b []byte) int {
		switch {
		case n == 1 && r70Names(b, opExists, hPath):
			onceH.Do(func() { close(heldH) })
			<-releaseH
			return r70Fail // connection 1 drops with H
		case n == 2 && r70Names(b, opGetData, node):
			getXid.CompareAndSwap(0, int32(binary.BigEndian.Uint32(b[4:8])))
		case n == 2 && r70Op(b) == opSetWatches:
			onceSW.Do(func() { close(heldSW) })
			<-releaseSW
		}
		return r70Pass
	})
	hDone := make(chan struct{})
	go func() {
		defer close(hDone)
		h.Conn().Exists(hPath) // fails with connection 1
	}()
	<-heldH
	res := goGetW(ctx, h, node)
	awaitQueued(t, "Get") // the read without a watch, behind H
	openH()
	<-hDone
	select {
	case <-heldSW:
	case <-ctx.Done():
		t.Fatal("connection 2 never sent its setWatches")
	}
	if getXid.Load() == 0 {
		t.Fatal("the read did not go out on connection 2 ahead of its setWatches")
	}
	d.conn(2).awaitReply(t, getXid.Load()) // the server read the node
	st, err := other.Set(node, []byte("written"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	openSW()
	r := <-res
	if r.err != nil {
		if !errors.Is(r.err, zk.ErrNoNode) {
			t.Fatalf("GetW = %v; want a read, or ErrNoNode", r.err)
		}
		return // read again after the deletion
	}
	defer r.w.Stop()
	select {
	case ev := <-r.w.C():
		if r.st.Version < st.Version && ev.Type != zk.EventNodeDataChanged {
			t.Errorf("GetW read version %d; node written (version %d) then deleted; its Watch fired %v, nothing of the write", r.st.Version, st.Version, ev.Type)
		}
	case <-ctx.Done():
		t.Fatal("the GetW's Watch never fired")
	}
}
