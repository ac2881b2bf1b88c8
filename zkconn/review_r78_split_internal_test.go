package zkconn

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR78ReplySplitAfterLength: the reply to a watched read arrives
// up to its length prefix only, then the connection drops before the body
// comes. go-zookeeper fails the request and never adds the watch; the
// caller's ctx ended meanwhile, so Do does not run it again. The wire must
// not have armed a record for it (tap.Read runs an arm when go-zookeeper
// reaches the frame's offset, but scan queues it only for a whole frame):
// its record matches go-zookeeper's table (checkCarried; for an exists, an
// armed record only where go-zookeeper holds an exists watch).
func TestReviewR78ReplySplitAfterLength(t *testing.T) {
	for _, kind := range []string{"GetW", "CreatedW"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, h, _, root, node := r70Session(t)
			path, op := node, int32(opGetData)
			if kind == "CreatedW" {
				path, op = root+"/p", opExists
			}
			xids := make(chan int32, 1)
			d.setHook(func(n int, b []byte) int {
				if n == 1 && r70Names(b, op, path) {
					if _, w := watchKeyOf(op, b[12:]); w {
						select {
						case xids <- int32(binary.BigEndian.Uint32(b[4:8])):
							d.conn(1).pause(true) // before the reply can come
						default:
						}
					}
				}
				return r70Pass
			})
			t.Cleanup(func() { d.setHook(nil) })
			c1 := d.conn(1)
			cctx, ccancel := context.WithCancel(ctx)
			res := make(chan error, 1)
			go func() {
				var err error
				if kind == "GetW" {
					_, _, _, err = h.GetW(cctx, path)
				} else {
					_, err = r76Created(cctx, h, path)
				}
				res <- err
			}()
			xid := <-xids
			start, _ := c1.awaitReply(t, xid)
			c1.giveUpTo(t, start+4) // the length only
			ccancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("%s = %v", kind, err)
			}
			c1.Conn.Close() // still paused: the body is never given
			settled(t, ctx, h, root)
			x := r77Record(h, path)
			t.Logf("exists record: %+v", x)
			held := zktest.ClientWatchTable(t, h.Conn())[zktest.ClientWatch{Path: path, Kind: zktest.ExistWatch}]
			if x != nil && x.armed != (held > 0) {
				t.Errorf("exists record at %s: %+v; go-zookeeper holds %d exists watches there", path, *x, held)
			}
			checkCarried(t, h, "after the split reply")
			d.dropLast()
			settled(t, ctx, h, root)
			checkCarried(t, h, "one reconnect later")
		})
	}
}
