package zkconn

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR77KindsSoak: GetW, ChildrenW, CreatedW (short ctxs, some
// Watches kept), ExistsW with Unwatch and raw child watches on one
// Session; another session makes, deletes, writes nodes and their
// children; the connection is dropped at random. Once quiet: no exists
// record is left with a count (out, callers), every record left is
// armed with go-zookeeper holding a watch there; every kept Watch that has
// not fired must fire on a change made now (a CreatedW's must have fired
// if its node is there).
func TestReviewR77KindsSoak(t *testing.T) {
	for seed := range 8 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { r77Soak(t, int64(seed)) })
	}
}

type r77Kept struct {
	w    *Watch
	path string
}

func r77Soak(t *testing.T, seed int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	const nodes = 12
	paths := make([]string, nodes)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/k%02d", root, i)
	}
	var (
		mu   sync.Mutex
		keep []r77Kept
	)
	defer func() {
		for _, k := range keep {
			k.w.Stop()
		}
	}()
	short := func(r *rand.Rand) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, time.Duration(r.Intn(3000))*time.Microsecond+time.Millisecond)
	}
	hold := func(r *rand.Rand, w *Watch, p string) {
		if r.Intn(2) == 0 {
			w.Stop()
			return
		}
		mu.Lock()
		keep = append(keep, r77Kept{w, p})
		mu.Unlock()
	}
	var wg, workers sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		workers.Go(func() {
			r := rand.New(rand.NewSource(seed*100 + int64(g)))
			for range 300 {
				p := paths[r.Intn(nodes)]
				c, cc := short(r)
				switch r.Intn(6) {
				case 0:
					if _, _, w, err := h.GetW(c, p); err == nil {
						hold(r, w, p)
					}
				case 1:
					if _, _, w, err := h.ChildrenW(c, p); err == nil {
						hold(r, w, p)
					}
				case 2, 3:
					if there, w, err := h.CreatedW(c, p); err == nil && !there {
						hold(r, w, p)
					}
				case 4:
					_, x, _ := h.ExistsW(c, p)
					x.Unwatch()
				case 5:
					_ = h.Do(c, func(c *zk.Conn) error { _, _, _, err := c.ChildrenW(p); return err })
				}
				cc()
			}
		})
	}
	wg.Go(func() {
		r := rand.New(rand.NewSource(seed + 99))
		acl := zk.WorldACL(zk.PermAll)
		for {
			select {
			case <-stop:
				return
			default:
			}
			p := paths[r.Intn(nodes)]
			switch r.Intn(5) {
			case 0, 1:
				if _, err := other.Create(p, nil, 0, acl); err != nil {
					other.Delete(p+"/c", -1)
					other.Delete(p, -1)
				}
			case 2:
				other.Create(p+"/c", nil, 0, acl)
			case 3:
				other.Delete(p+"/c", -1)
			default:
				other.Set(p, []byte("x"), -1)
			}
		}
	})
	wg.Go(func() {
		r := rand.New(rand.NewSource(seed + 7))
		for {
			select {
			case <-stop:
				return
			default:
			}
			for range 5 + r.Intn(20) {
				_ = h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(root); return err })
			}
			d.dropLast()
		}
	})
	workers.Wait()
	close(stop)
	wg.Wait()
	settled(t, ctx, h, root)

	table := zktest.ClientWatchTable(t, h.Conn())
	w := h.gen.c.wire
	w.mu.Lock()
	for p, x := range w.exists {
		if x.out != 0 || x.callers != 0 {
			t.Errorf("exists record at %s with counts left: %+v", p, *x)
		}
		if !x.armed {
			t.Errorf("exists record at %s not armed, nothing counted: %+v", p, *x)
		} else if table[zktest.ClientWatch{Path: p, Kind: zktest.ExistWatch}]+table[zktest.ClientWatch{Path: p, Kind: zktest.DataWatch}] == 0 {
			t.Errorf("exists record at %s armed; go-zookeeper holds no watch there: %+v", p, *x)
		}
	}
	t.Logf("%d exists records, %d connections", len(w.exists), len(d.conns))
	for cw := range table {
		if x := w.exists[cw.Path]; cw.Kind == zktest.ExistWatch && (x == nil || !x.armed) {
			t.Errorf("go-zookeeper holds an exists watch at %s; the wire's record: %+v", cw.Path, x)
		}
	}
	w.mu.Unlock()
	checkCarried(t, h, "once quiet")

	fired := func(k r77Kept) bool {
		select {
		case ev := <-k.w.C():
			k.w.c <- ev // put back
			return true
		default:
			return false
		}
	}
	flush := func() {
		if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(root); return err }); err != nil {
			t.Fatal(err)
		}
	}
	acl := zk.WorldACL(zk.PermAll)
	var pending []r77Kept
	for _, k := range keep {
		if fired(k) {
			continue
		}
		there, _, err := other.Exists(k.path)
		if err != nil {
			t.Fatal(err)
		}
		switch k.w.key.kind {
		case existWatch:
			if there {
				t.Errorf("CreatedW Watch at %s not fired; the node is there", k.path)
				continue
			}
		default:
			if !there {
				t.Errorf("Watch %+v not fired; the node is gone", k.w.key)
				continue
			}
		}
		pending = append(pending, k)
	}
	for _, p := range paths {
		if there, _, _ := other.Exists(p); !there {
			if _, err := other.Create(p, nil, 0, acl); err != nil {
				t.Fatal(err)
			}
		} else {
			other.Set(p, []byte("final"), -1)
			if _, err := other.Create(p+"/c2", nil, 0, acl); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush()
	for _, k := range pending {
		if !fired(k) {
			t.Errorf("kept Watch %+v (kind %d) did not fire on a change made after it", k.w.key, k.w.key.kind)
		}
	}
	t.Logf("%d kept, %d checked after the final changes", len(keep), len(pending))
}
