package zkconn

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// r76ExistsAt returns a hook that sends the xid of each exists request at
// p written on connection 1 to watches if it sets a watch, else to plain
// (dropped if plain is full).
func r76ExistsAt(p string, plain, watches chan<- int32) func(n int, b []byte) int {
	return func(n int, b []byte) int {
		if n == 1 && r70Names(b, opExists, p) {
			xid := int32(binary.BigEndian.Uint32(b[4:8]))
			if _, watch := watchKeyOf(opExists, b[12:]); watch {
				watches <- xid
			} else {
				select {
				case plain <- xid:
				default:
				}
			}
		}
		return r70Pass
	}
}

// r76Created is h.CreatedW(ctx, p) for a p with no node.
func r76Created(ctx context.Context, h Handle, p string) (*Watch, error) {
	there, w, err := h.CreatedW(ctx, p)
	if err == nil && there {
		return nil, errors.New("node there")
	}
	return w, err
}

// r76FiresAtCreation makes p through other after a reconnect of h's
// session, and fails unless w fires: a read through h that sees the node
// comes after the event of any watch the server held for it.
func r76FiresAtCreation(t *testing.T, ctx context.Context, d *r70Dialer, h Handle, other *zk.Conn, p string, w *Watch) {
	t.Helper()
	d.conn(1).Conn.Close()
	settled(t, ctx, h, p) // go-zookeeper has sent its watches again
	r77CreateAndFlush(t, ctx, h, other, p)
	select {
	case <-w.C():
	default:
		t.Fatalf("the Watch did not fire, although %s was made after its read, the session alive", p)
	}
}

// TestReviewR76CreatedWTakenForExistsW: a CreatedW whose exists request
// that sets the watch is written while a caller of ExistsW at the same
// path has its request out was taken for ExistsW's (wire.watching: not
// plain). Once that caller called Unwatch, no caller was counted and the
// record was not plain: the next connection's setWatches left the exists
// watch out (keepWanted), and the CreatedW's Watch never fired when the
// node was made, although the session lived. The control: CreatedW alone.
func TestReviewR76CreatedWTakenForExistsW(t *testing.T) {
	for _, withExistsW := range []bool{true, false} {
		t.Run(map[bool]string{true: "ExistsW", false: "alone"}[withExistsW], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, h, other, root, _ := r70Session(t)
			p := root + "/p"
			plain, watches := make(chan int32, 1), make(chan int32, 4)
			d.setHook(r76ExistsAt(p, plain, watches))
			t.Cleanup(func() { d.setHook(nil) })
			c1 := d.conn(1)
			type result struct {
				w   *Watch
				err error
			}
			cres := make(chan result, 1)
			if withExistsW {
				// CreatedW's read without a watch waits for its reply
				// while ExistsW's request goes out.
				c1.pause(true)
			}
			go func() {
				w, err := r76Created(ctx, h, p)
				cres <- result{w, err}
			}()
			if withExistsW {
				x1 := <-plain
				type existsW struct {
					x   *ExistsWatch
					err error
				}
				eres := make(chan existsW, 1)
				go func() {
					_, x, err := h.ExistsW(ctx, p)
					eres <- existsW{x, err}
				}()
				<-watches // ExistsW's request written: it is out
				c1.passThrough(t, x1)
				<-watches // CreatedW's, written while ExistsW's is out
				c1.pause(false)
				er := <-eres
				if er.err != nil {
					t.Fatal(er.err)
				}
				er.x.Unwatch() // the ExistsW caller no longer wants its watch
			}
			cr := <-cres
			if cr.err != nil {
				t.Fatal(cr.err)
			}
			defer cr.w.Stop()
			r76FiresAtCreation(t, ctx, d, h, other, p, cr.w)
		})
	}
}

// TestReviewR76CreatedWSharesUnwatched: an ExistsW caller's watch, then
// Unwatch (no caller, not plain); a CreatedW shares it (one exists request
// with a watch in all), then a reconnect: the watch must be carried on,
// and the Watch fire at the creation.
func TestReviewR76CreatedWSharesUnwatched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	p := root + "/p"
	watches := make(chan int32, 4)
	d.setHook(r76ExistsAt(p, make(chan int32), watches))
	t.Cleanup(func() { d.setHook(nil) })
	_, x, err := h.ExistsW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	x.Unwatch()
	w, err := r76Created(ctx, h, p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if n := len(watches); n != 1 {
		t.Fatalf("%d exists requests with a watch; want 1 (shared)", n)
	}
	r76FiresAtCreation(t, ctx, d, h, other, p, w)
}
