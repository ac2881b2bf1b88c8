package zkconn

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestReviewR75MirrorSoak: many GetW, ExistsW and ChildrenW callers on one
// Session, nodes written, deleted and made again by another session, and
// the connection dropped at random. Once all is quiet, the wire's record of
// go-zookeeper's data and child watches must equal go-zookeeper's table,
// its stale count must match, and a GetW on every node (sharing or not)
// must fire on a write made after it.
func TestReviewR75MirrorSoak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	const nodes = 40
	paths := make([]string, nodes)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/m%02d", root, i)
		if _, err := other.Create(paths[i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		keep []*Watch
	)
	defer func() {
		for _, w := range keep {
			w.Stop()
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(g)))
			for range 400 {
				p := paths[r.Intn(nodes)]
				switch r.Intn(6) {
				case 0, 1, 2:
					c, cancel := context.WithTimeout(ctx, time.Duration(r.Intn(3000))*time.Microsecond+time.Millisecond)
					_, _, w, err := h.GetW(c, p)
					cancel()
					if err == nil {
						if r.Intn(2) == 0 {
							w.Stop()
						} else {
							mu.Lock()
							keep = append(keep, w)
							mu.Unlock()
						}
					}
				case 3:
					_, x, _ := h.ExistsW(ctx, p)
					x.Unwatch()
				case 4:
					_ = h.Do(ctx, func(c *zk.Conn) error { _, _, _, err := c.ChildrenW(p); return err })
				case 5:
					_ = h.Do(ctx, func(c *zk.Conn) error { _, _, _, err := c.GetW(p); return err })
				}
			}
		})
	}
	wg.Go(func() {
		r := rand.New(rand.NewSource(99))
		for range 80 {
			p := paths[r.Intn(nodes)]
			switch r.Intn(4) {
			case 0:
				if other.Delete(p, -1) == nil {
					other.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
				}
			case 1:
				other.Create(p+"/c", nil, 0, zk.WorldACL(zk.PermAll))
				other.Delete(p+"/c", -1)
			default:
				other.Set(p, []byte("x"), -1)
			}
		}
	})
	wg.Go(func() {
		r := rand.New(rand.NewSource(7))
		for range 25 {
			// wait for some ops through h, then drop the connection up
			for range 5 + r.Intn(20) {
				_ = h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(root); return err })
			}
			d.dropLast()
		}
	})
	wg.Wait()
	settled(t, ctx, h, root)

	checkCarried(t, h, fmt.Sprintf("after the soak, %d connections", len(d.conns)))

	// Every node: a GetW, then a write; the write's event must come
	// before the reply to a later request on the connection.
	var ws []*Watch
	for _, p := range paths {
		_, _, w, err := h.GetW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	for _, p := range paths {
		if _, err := other.Set(p, []byte("final"), -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Do(ctx, func(c *zk.Conn) error { _, err := c.Sync(root); return err }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(root); return err }); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		select {
		case <-w.C():
		default:
			t.Errorf("GetW on %s: no event for a write made after it", paths[i])
		}
		w.Stop()
	}
	checkCarried(t, h, "at the end")
}
