package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// r77CreateAndFlush makes p through other, then reads it through h: every
// event of h's session before that read has been read.
func r77CreateAndFlush(t *testing.T, ctx context.Context, h Handle, other *zk.Conn, p string) {
	t.Helper()
	if _, err := other.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var there bool
	if err := h.Do(ctx, func(c *zk.Conn) (err error) { there, _, err = c.Exists(p); return err }); err != nil || !there {
		t.Fatalf("Exists = %v, %v", there, err)
	}
}

// TestReviewR77CreatedWResent: a CreatedW whose watched exists is lost with
// its connection (swallowed, then the connection closed) is run again by
// Do on the next one. Once it returns, the watch is carried as plain, the
// Watch must fire at the creation, and the record must go once it has (no
// record left per path).
func TestReviewR77CreatedWResent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	p := root + "/p"
	swallowed := make(chan int32, 1)
	d.setHook(func(n int, b []byte) int {
		if n == 1 && r70Names(b, opExists, p) {
			if _, watch := watchKeyOf(opExists, b[12:]); watch {
				select {
				case swallowed <- int32(binary.BigEndian.Uint32(b[4:8])):
					return r70Swallow
				default:
				}
			}
		}
		return r70Pass
	})
	t.Cleanup(func() { d.setHook(nil) })
	res := make(chan error, 1)
	var w *Watch
	go func() {
		var err error
		w, err = r76Created(ctx, h, p)
		res <- err
	}()
	<-swallowed
	d.conn(1).Conn.Close()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	x := r77Record(h, p)
	if x == nil || x.out != 0 || !x.armed || !x.plain {
		t.Fatalf("record after CreatedW returned: %+v", x)
	}
	r77CreateAndFlush(t, ctx, h, other, p)
	select {
	case ev := <-w.C():
		if ev.Type != zk.EventNodeCreated {
			t.Errorf("fired %v", ev.Type)
		}
	default:
		t.Fatal("the Watch did not fire at the creation")
	}
	if x := r77Record(h, p); x != nil {
		t.Errorf("record left after the event: %+v", x)
	}
	if n := zktest.ClientWatchTable(t, h.Conn())[zktest.ClientWatch{Path: p, Kind: zktest.ExistWatch}]; n != 0 {
		t.Errorf("go-zookeeper holds %d exists watches at %s", n, p)
	}
}

// TestReviewR77CreatedWCanceledBalanced: a CreatedW whose ctx ends while its
// read without a watch is out returns ctx's error; its op goes on (Do
// returned early) and sets the watch for nobody. No request is left
// counted, and the record must go at the creation.
func TestReviewR77CreatedWCanceledBalanced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	p := root + "/p"
	plain, watches := make(chan int32, 1), make(chan int32, 4)
	d.setHook(r76ExistsAt(p, plain, watches))
	t.Cleanup(func() { d.setHook(nil) })
	c1 := d.conn(1)
	c1.pause(true)
	cctx, ccancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := r76Created(cctx, h, p)
		res <- err
	}()
	x1 := <-plain
	c1.awaitReply(t, x1)
	ccancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("CreatedW = %v", err)
	}
	c1.pause(false)
	<-watches // the op went on and set a watch
	// its reply read: a read after it
	if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(root); return err }); err != nil {
		t.Fatal(err)
	}
	awaitGoroutines(t, "op done", func(gs [][]byte) bool {
		for _, g := range gs {
			if bytes.Contains(g, []byte("zkconn.Handle.CreatedW")) {
				return false
			}
		}
		return true
	})
	x := r77Record(h, p)
	t.Logf("record after the canceled CreatedW's op: %+v", x)
	if x == nil || x.out != 0 {
		t.Fatalf("unbalanced: %+v", x)
	}
	r77CreateAndFlush(t, ctx, h, other, p)
	if x := r77Record(h, p); x != nil {
		t.Errorf("record left after the event: %+v", x)
	}
}
