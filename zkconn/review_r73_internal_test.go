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
// than the one checked, so it reads again, with a watch of its own. The
// same for ChildrenW (a child made and deleted, then node) and CreatedW
// (node made, then deleted: reading again, CreatedW sets a watch that
// must tell the next creation) (review round 76).
func TestReviewR73SharedReadSentOnNextConnection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     int32 // of the read
		fn     string
		absent bool // node is deleted first
		watch  func(ctx context.Context, h Handle, node string) (*Watch, error)
		change func(c *zk.Conn, node string) error // before node's deletion
		event  zk.EventType                        // the Watch tells change so
	}{
		{"GetW", opGetData, "Get", false,
			func(ctx context.Context, h Handle, node string) (*Watch, error) {
				_, _, w, err := h.GetW(ctx, node)
				return w, err
			},
			func(c *zk.Conn, node string) error {
				_, err := c.Set(node, []byte("written"), -1)
				return err
			},
			zk.EventNodeDataChanged},
		{"ChildrenW", opGetChildren2, "Children", false,
			func(ctx context.Context, h Handle, node string) (*Watch, error) {
				_, _, w, err := h.ChildrenW(ctx, node)
				return w, err
			},
			func(c *zk.Conn, node string) error {
				if _, err := c.Create(node+"/c", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					return err
				}
				return c.Delete(node+"/c", -1)
			},
			zk.EventNodeChildrenChanged},
		{"CreatedW", opExists, "Exists", true,
			func(ctx context.Context, h Handle, node string) (*Watch, error) {
				there, w, err := h.CreatedW(ctx, node)
				if err == nil && there {
					return nil, errors.New("node there")
				}
				return w, err
			},
			func(c *zk.Conn, node string) error {
				_, err := c.Create(node, nil, 0, zk.WorldACL(zk.PermAll))
				return err
			},
			zk.EventNodeCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, h, other, root, node := r70Session(t)
			if tc.absent {
				if err := other.Delete(node, -1); err != nil {
					t.Fatal(err)
				}
			}
			w0, err := tc.watch(ctx, h, node) // held on connection 1
			if err != nil {
				t.Fatal(err)
			}
			defer w0.Stop()

			hPath := root + "/h"
			heldH, releaseH := make(chan struct{}), make(chan struct{})
			heldSW, releaseSW := make(chan struct{}), make(chan struct{})
			openH, openSW := sync.OnceFunc(func() { close(releaseH) }), sync.OnceFunc(func() { close(releaseSW) })
			t.Cleanup(func() { d.setHook(nil); openH(); openSW() })
			var readXid atomic.Int32
			var watched atomic.Bool // a read on connection 2 set a watch at node
			var onceH, onceSW sync.Once
			d.setHook(func(n int, b []byte) int {
				switch {
				case n == 1 && r70Names(b, opExists, hPath):
					onceH.Do(func() { close(heldH) })
					<-releaseH
					return r70Fail // connection 1 drops with H
				case n == 2 && r70Names(b, tc.op, node):
					readXid.CompareAndSwap(0, int32(binary.BigEndian.Uint32(b[4:8])))
					if k, ok := watchKeyOf(tc.op, b[12:]); ok && k.path == node {
						watched.Store(true)
					}
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
			type result struct {
				w   *Watch
				err error
			}
			res := make(chan result, 1)
			go func() {
				w, err := tc.watch(ctx, h, node)
				res <- result{w, err}
			}()
			// The read without a watch, behind H (itself an Exists).
			awaitQueuedVia(t, "zkconn.Handle."+tc.name, tc.fn)
			openH()
			<-hDone
			select {
			case <-heldSW:
			case <-ctx.Done():
				t.Fatal("connection 2 never sent its setWatches")
			}
			if readXid.Load() == 0 {
				t.Fatal("the read did not go out on connection 2 ahead of its setWatches")
			}
			d.conn(2).awaitReply(t, readXid.Load()) // the server read the node
			if err := tc.change(other, node); err != nil {
				t.Fatal(err)
			}
			if err := other.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			openSW()
			r := <-res
			if r.err != nil {
				if !errors.Is(r.err, zk.ErrNoNode) {
					t.Fatalf("%s = %v; want a read, or ErrNoNode", tc.name, r.err)
				}
				return // read again after the deletion
			}
			defer r.w.Stop()
			settled(t, ctx, h, root) // any event for what came before is in
			select {
			case ev := <-r.w.C():
				if ev.Type != tc.event {
					t.Errorf("%s read before the change, then node deleted; its Watch fired %v, nothing of the change", tc.name, ev.Type)
				}
				return
			default:
			}
			if !tc.absent || !watched.Load() {
				t.Fatalf("%s's Watch never fired, although node changed after its read", tc.name)
			}
			// Read again, with a watch, after the deletion: its Watch
			// must tell the next creation.
			if err := tc.change(other, node); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-r.w.C():
				if ev.Type != tc.event {
					t.Errorf("%s read again; its Watch fired %v at the next creation", tc.name, ev.Type)
				}
			case <-ctx.Done():
				t.Fatalf("%s read again; its Watch missed the next creation", tc.name)
			}
		})
	}
}
