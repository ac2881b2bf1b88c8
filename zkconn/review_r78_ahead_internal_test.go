package zkconn

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestReviewR78CreatedWAheadOfSetWatches: an ExistsW caller's watch at p
// (not plain), then Unwatch. A CreatedW's exists with a watch is queued
// while the connection's writer is stuck; the connection fails, and on
// the next one the request goes out ahead of that connection's setWatches
// (which leaves p's watch out: no caller, not plain, and the request is
// answered on it). keep then sees absent == cur and marks it plain. After
// one more reconnect the watch must be carried, and the Watch fire at the
// creation.
func TestReviewR78CreatedWAheadOfSetWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, h, other, root, node := r70Session(t)
	p := root + "/p"
	_, x, err := h.ExistsW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	x.Unwatch()
	// Carried from connection 1: not held on 2 (its setWatches left it
	// out), so CreatedW does not share it and sets a watch of its own.
	d.dropLast()
	settled(t, ctx, h, p)
	gate, blocked := make(chan struct{}), make(chan struct{}, 1)
	plainSeen := make(chan int32, 1)
	var (
		mu    sync.Mutex
		order []string // on connection 3
	)
	d.setHook(func(n int, b []byte) int {
		op := r70Op(b)
		if n == 3 && (op == opSetWatches || r70Names(b, opExists, p)) {
			mu.Lock()
			if op == opSetWatches {
				order = append(order, "setWatches")
			} else if _, w := watchKeyOf(opExists, b[12:]); w {
				order = append(order, "existsW")
			} else {
				order = append(order, "exists")
			}
			mu.Unlock()
		}
		if n == 2 && r70Names(b, opGetData, node) {
			blocked <- struct{}{}
			<-gate
			return r70Fail
		}
		if n == 2 && r70Names(b, opExists, p) {
			if _, w := watchKeyOf(opExists, b[12:]); !w {
				select {
				case plainSeen <- int32(binary.BigEndian.Uint32(b[4:8])):
				default:
				}
			}
		}
		return r70Pass
	})
	t.Cleanup(func() { d.setHook(nil) })
	c1 := d.conn(2)
	c1.pause(true)
	type result struct {
		w   *Watch
		err error
	}
	res := make(chan result, 1)
	go func() {
		w, err := r76Created(ctx, h, p)
		res <- result{w, err}
	}()
	x1 := <-plainSeen
	bres := make(chan error, 1)
	go func() {
		bres <- h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Get(node); return err })
	}()
	<-blocked
	c1.passThrough(t, x1) // CreatedW's plain exists answered: its ExistsW is queued
	awaitQueued(t, "ExistsW")
	close(gate)
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.w.Stop()
	t.Logf("blocker: %v", <-bres) // r70Fail's bare net.ErrClosed: not transient to Do
	mu.Lock()
	t.Logf("on connection 3: %v", order)
	mu.Unlock()
	t.Logf("record: %+v", r77Record(h, p))
	d.dropLast()
	settled(t, ctx, h, p)
	r77CreateAndFlush(t, ctx, h, other, p)
	select {
	case <-r.w.C():
	default:
		t.Fatal("the Watch did not fire at the creation")
	}
}
