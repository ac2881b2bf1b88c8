package zkconn

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// r72Table returns go-zookeeper's data and child watches on c (see
// zktest.ClientWatchTable), as the wire keys them.
func r72Table(t *testing.T, c *zk.Conn) map[watchKey]int {
	out := map[watchKey]int{}
	for w, n := range zktest.ClientWatchTable(t, c) {
		if w.Kind != zktest.ExistWatch {
			out[watchKey{w.Path, watchKind(w.Kind)}] = n
		}
	}
	return out
}

// checkCarried fails the test unless the wire's record of carried
// watches holds exactly go-zookeeper's data and child watches on h's
// connection, and its stale count is the number of them recorded on
// another connection than the current one. Call it once h is quiet.
func checkCarried(t *testing.T, h Handle, when string) {
	t.Helper()
	table := r72Table(t, h.Conn())
	w := h.gen.c.wire
	w.mu.Lock()
	c := w.carried
	on := maps.Clone(c.on)
	w.mu.Unlock()
	stale := 0
	for k, n := range on {
		if _, ok := table[k]; !ok {
			t.Errorf("%s: the wire records %+v (on %d); go-zookeeper holds none", when, k, n)
		}
		if n != c.cur {
			stale++
		}
	}
	for k := range table {
		if _, ok := on[k]; !ok {
			t.Errorf("%s: go-zookeeper holds %+v; the wire has no record of it", when, k)
		}
	}
	if stale != c.stale {
		t.Errorf("%s: stale = %d; %d of %d recorded are not on connection %d", when, c.stale, stale, len(on), c.cur)
	}
	t.Logf("%s: %d recorded, %d stale, cur %d, floor %d", when, len(on), c.stale, c.cur, c.floor)
}

// TestReviewR72MirrorFuzz: random watched reads, writes by another session,
// connection drops and lost setWatches parts (go-zookeeper's part limit is
// lowered to 150 bytes, so a reconnect sends many). At every setWatches
// written, carried.go's invariant holds and the frame is relative to no
// later than the floor. At the end, after a clean reconnect, the wire's
// record of data and child watches is go-zookeeper's table, the server
// holds each data watch, every watch not fired has its node unchanged
// since its read, and every one fires on a last write. The seed is logged
// (R72SEED runs one again); R72ITERS, R72LIMIT and R72PATHS change the
// run's size.
func TestReviewR72MirrorFuzz(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("R72SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	limit := 150
	if s := os.Getenv("R72LIMIT"); s != "" {
		limit, _ = strconv.Atoi(s)
	}
	f := reflect.ValueOf(h.Conn()).Elem().FieldByName("setWatchLimit")
	if f.Kind() != reflect.Int {
		t.Fatal("go-zookeeper's Conn has no setWatchLimit: update the test")
	}
	*(*int)(unsafe.Pointer(f.UnsafeAddr())) = limit
	np := 6
	if s := os.Getenv("R72PATHS"); s != "" {
		np, _ = strconv.Atoi(s)
	}
	paths := make([]string, np)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/p%d", root, i)
		other.Create(paths[i], nil, 0, zk.WorldACL(zk.PermAll))
	}
	var mu sync.Mutex // swallow, bad, hookRng
	swallow := 0
	hookRng := rand.New(rand.NewSource(seed + 2))
	var bad []string
	wr := h.gen.c.wire
	d.setHook(func(n int, b []byte) int {
		if r70Op(b) != opSetWatches {
			return r70Pass
		}
		wr.mu.Lock()
		c := &wr.carried
		st := 0
		for _, m := range c.on {
			if m != c.cur {
				st++
			}
		}
		var msg string
		if st != c.stale || (st > 0 && relZxid(b) > c.floor) {
			msg = fmt.Sprintf("at a setWatches on %d: %d stale, counter %d, floor %#x, relative %#x", n, st, c.stale, c.floor, relZxid(b))
		}
		wr.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		if msg != "" {
			bad = append(bad, msg)
		}
		if swallow > 0 && hookRng.Intn(2) == 0 {
			swallow--
			return r70Swallow
		}
		return r70Pass
	})
	iters := 400
	if s := os.Getenv("R72ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// writer
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewSource(seed + 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			p := paths[r.Intn(np)]
			switch r.Intn(5) {
			case 0, 1:
				other.Set(p, []byte("x"), -1)
			case 2:
				other.Delete(p+"/c", -1)
				other.Delete(p, -1)
			case 3:
				other.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			case 4:
				other.Create(p+"/c", nil, 0, zk.WorldACL(zk.PermAll))
			}
		}
	}()
	// readers
	var rmu sync.Mutex
	var reads []r72Read
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed + 10 + int64(g)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := paths[r.Intn(np)]
				c := h.Conn()
				var rd r72Read
				var err error
				rd.path = p
				switch rd.kind = r.Intn(3); rd.kind {
				case 0:
					_, rd.st, rd.ch, err = c.GetW(p)
				case 1:
					_, rd.st, rd.ch, err = c.ExistsW(p)
				case 2:
					_, rd.st, rd.ch, err = c.ChildrenW(p)
				}
				if err == nil {
					rmu.Lock()
					reads = append(reads, rd)
					rmu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < iters; i++ {
		switch rng.Intn(10) {
		case 0:
			d.dropLast()
		case 1:
			mu.Lock()
			swallow = 1 + rng.Intn(2)
			mu.Unlock()
		}
		// some progress between actions
		h.Conn().Exists(root)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	swallow = 0
	mu.Unlock()
	d.setHook(nil)
	mu.Lock()
	for _, s := range bad {
		t.Error(s)
	}
	mu.Unlock()
	// A clean reconnect: every watch carried again.
	d.dropLast()
	settled(t, ctx, h, root)
	checkCarried(t, h, fmt.Sprintf("%d connections", len(d.conns)))
	table := r72Table(t, h.Conn())
	sw, err := shared.Watches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range table {
		if k.kind == dataWatch && !slices.Contains(sw[k.path], h.ID()) {
			t.Errorf("go-zookeeper holds %v; the server holds no watch of the session there", k)
		}
	}
	// Every watch set and not fired: its node unchanged since its read.
	missed := 0
	for _, rd := range reads {
		select {
		case <-rd.ch:
			continue
		default:
		}
		ok, st, err := other.Exists(rd.path)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rd.kind == 1 && rd.st.Mzxid == 0: // exist watch: no node then
			if ok {
				t.Logf("exist watch at %s unfired, node there (czxid %#x)", rd.path, st.Czxid)
			}
		case !ok:
			missed++
			t.Errorf("%s watch (kind %d) read mzxid %#x pzxid %#x: node deleted since, never fired", rd.path, rd.kind, rd.st.Mzxid, rd.st.Pzxid)
		case rd.kind == 2 && st.Pzxid != rd.st.Pzxid:
			missed++
			t.Errorf("child watch %s read pzxid %#x, now %#x: never fired", rd.path, rd.st.Pzxid, st.Pzxid)
		case rd.kind != 2 && st.Mzxid != rd.st.Mzxid:
			missed++
			t.Errorf("data watch %s (kind %d) read mzxid %#x, now %#x: never fired", rd.path, rd.kind, rd.st.Mzxid, st.Mzxid)
		}
	}
	t.Logf("%d reads, %d missed", len(reads), missed)
	// Write every node watched: every watch must fire.
	for k := range table {
		if k.kind == childWatch {
			other.Create(k.path+"/zz", nil, 0, zk.WorldACL(zk.PermAll))
		} else {
			other.Set(k.path, []byte("last"), -1)
		}
	}
	settled(t, ctx, h, root) // the events of the writes read
	after := r72Table(t, h.Conn())
	for k := range table {
		if _, ok := after[k]; ok {
			t.Errorf("go-zookeeper's watch %v never fired, though its node was written", k)
		}
	}
}

type r72Read struct {
	kind int
	path string
	st   *zk.Stat
	ch   <-chan zk.Event
}
