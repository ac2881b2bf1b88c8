package zkconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestReviewR77ExistsWTakenPlainForCreatedWThatFound: a CreatedW at p reads
// no node (its read without a watch), then p is made before its exists with
// a watch is written: that one answers that p is there, and CreatedW
// returns there, with no Watch (it wants nothing). Its reply is held
// (go-zookeeper has not read it) while an ExistsW caller's exists at p is
// written, and p deleted before it is applied: it answers that p is not
// there and sets an exists watch, which wire.watching took for CreatedW's
// (plain) while one of CreatedW's was out, as round 76's fix counted them
// (8ab9d49). The ExistsW caller then calls Unwatch: nobody wants
// the watch, and the next connection's setWatches must leave it out
// (keepWanted): else the server holds it for nobody for as long as the
// session lives, until p is made. The control: the same without CreatedW.
func TestReviewR77ExistsWTakenPlainForCreatedWThatFound(t *testing.T) {
	for _, withCreatedW := range []bool{true, false} {
		t.Run(map[bool]string{true: "CreatedW", false: "alone"}[withCreatedW], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, h, other, root, _ := r70Session(t)
			p := root + "/p"
			acl := zk.WorldACL(zk.PermAll)
			var (
				k       atomic.Int32
				carried atomic.Bool
			)
			r1, r2 := make(chan int32, 1), make(chan int32, 1)
			var x1 atomic.Int32
			d.setHook(func(n int, b []byte) int {
				switch {
				case n == 1 && r70Names(b, opExists, p):
					if _, watch := watchKeyOf(opExists, b[12:]); !watch {
						return r70Pass
					}
					xid := int32(binary.BigEndian.Uint32(b[4:8]))
					switch i := k.Add(1); {
					case withCreatedW && i == 1: // CreatedW's
						if _, err := other.Create(p, nil, 0, acl); err != nil {
							t.Error(err)
						}
						d.conn(1).pause(true) // its reply stays unread
						x1.Store(xid)
						r1 <- xid
					case !withCreatedW && i == 1, i == 2: // ExistsW's
						if withCreatedW {
							d.conn(1).awaitReply(t, x1.Load()) // applied, p there
							if err := other.Delete(p, -1); err != nil {
								t.Error(err)
							}
						}
						r2 <- xid
					}
				case n == 2 && r70Op(b) == opSetWatches:
					if ends, ok := swLists(b); ok && bytes.Contains(b[ends[0]:ends[1]], juteString(p)) {
						carried.Store(true)
					}
				}
				return r70Pass
			})
			t.Cleanup(func() { d.setHook(nil) })
			c1 := d.conn(1)
			type cres struct {
				there bool
				w     *Watch
				err   error
			}
			created := make(chan cres, 1)
			if withCreatedW {
				go func() {
					there, w, err := h.CreatedW(ctx, p)
					created <- cres{there, w, err}
				}()
				<-r1
			}
			type eres struct {
				there bool
				x     *ExistsWatch
				err   error
			}
			exists := make(chan eres, 1)
			go func() {
				there, x, err := h.ExistsW(ctx, p)
				exists <- eres{there, x, err}
			}()
			x2 := <-r2
			if withCreatedW {
				c1.awaitReply(t, x2)
				c1.pause(false)
				cr := <-created
				if cr.err != nil || !cr.there || cr.w != nil {
					t.Fatalf("CreatedW = %v, %v, %v; want the node there, no Watch", cr.there, cr.w, cr.err)
				}
			}
			er := <-exists
			if er.err != nil || er.there {
				t.Fatalf("ExistsW = %v, %v; want no node", er.there, er.err)
			}
			t.Logf("record before Unwatch: %+v", r77Record(h, p))
			er.x.Unwatch() // nobody wants the exists watch at p now
			c1.Conn.Close()
			settled(t, ctx, h, root)
			if carried.Load() {
				t.Errorf("the setWatches on connection 2 carries the exists watch at %s, which nobody wants (ExistsW's caller called Unwatch; CreatedW found the node and returned no Watch): the server holds it for nobody until %s is made", p, p)
			}
			if x := r77Record(h, p); x != nil {
				t.Logf("record after the reconnect: %+v", *x)
			}
		})
	}
}

// r77Record returns a copy of the wire's exists record at p (nil if none).
func r77Record(h Handle, p string) *existsWatches {
	w := h.gen.c.wire
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.exists[p]; x != nil {
		c := *x
		return &c
	}
	return nil
}
