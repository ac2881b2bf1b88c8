package zkconn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// r80Holder blocks the connect request of every connection after the
// first until released, so that changes can be made while the session's
// connection is down.
type r80Holder struct {
	mu      sync.Mutex
	seen    map[int]bool
	gate    chan struct{}
	blocked chan int
}

func (r *r80Holder) hook(n int, b []byte) int {
	r.mu.Lock()
	first := !r.seen[n]
	r.seen[n] = true
	gate := r.gate
	r.mu.Unlock()
	if first && n > 1 && gate != nil {
		r.blocked <- n
		<-gate
	}
	return r70Pass
}

// down drops the connection, runs f while the next connect is held, and
// lets it through.
func (r *r80Holder) down(t *testing.T, ctx context.Context, d *r70Dialer, h Handle, root string, f func()) {
	t.Helper()
	r.mu.Lock()
	r.gate = make(chan struct{})
	gate := r.gate
	r.mu.Unlock()
	d.dropLast()
	select {
	case <-r.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnect")
	}
	f()
	r.mu.Lock()
	r.gate = nil
	r.mu.Unlock()
	close(gate)
	settled(t, ctx, h, root)
}

// TestReviewR80MixedKindsOnePath: at one path, a raw child watch (as
// Weighted sets), Watches of GetW and ChildrenW (the second of each kind
// sharing), and CreatedW at a missing path (shared too). A write fires
// only the data Watches, a change of children only the child Watches,
// also when made while the connection is down (setWatches tells them); a
// creation and a deletion in quick succession fire every CreatedW Watch.
// At the end no Watch and no exists record count is left.
func TestReviewR80MixedKindsOnePath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, h, other, root, _ := r70Session(t)
	hold := &r80Holder{seen: map[int]bool{}, blocked: make(chan int, 4)}
	d.setHook(hold.hook)
	t.Cleanup(func() { d.setHook(nil) })
	acl := zk.WorldACL(zk.PermAll)
	p := root + "/p"
	if _, err := other.Create(p, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists(root); return err }); err != nil {
			t.Fatal(err)
		}
	}
	fired := func(w *Watch) (zk.EventType, bool) {
		select {
		case ev := <-w.C():
			return ev.Type, true
		default:
			return 0, false
		}
	}
	var all []*Watch
	t.Cleanup(func() {
		for _, w := range all {
			w.Stop()
		}
	})
	getW := func() *Watch {
		t.Helper()
		_, _, w, err := h.GetW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, w)
		return w
	}
	childW := func() *Watch {
		t.Helper()
		_, _, w, err := h.ChildrenW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, w)
		return w
	}
	table := func(k zktest.WatchKind) int {
		return zktest.ClientWatchTable(t, h.Conn())[zktest.ClientWatch{Path: p, Kind: k}]
	}
	expect := func(what string, w *Watch, want zk.EventType, ok bool) {
		t.Helper()
		got, did := fired(w)
		if did != ok || (ok && got != want) {
			t.Errorf("%s: fired %v (%v); want %v (%v)", what, did, got, ok, want)
		}
	}

	// A raw child watch first, as Weighted's list sets.
	var raw <-chan zk.Event
	if err := h.Do(ctx, func(c *zk.Conn) (err error) { _, _, raw, err = c.ChildrenW(p); return err }); err != nil {
		t.Fatal(err)
	}
	c1, c2 := childW(), childW()
	g1, g2 := getW(), getW()
	if n, m := table(zktest.ChildWatch), table(zktest.DataWatch); n != 1 || m != 1 {
		t.Logf("go-zookeeper holds %d child, %d data channels at p (sharing: 1, 1)", n, m)
	}
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	flush()
	expect("g1 after a write", g1, zk.EventNodeDataChanged, true)
	expect("g2 after a write", g2, zk.EventNodeDataChanged, true)
	expect("c1 after a write", c1, 0, false)
	expect("c2 after a write", c2, 0, false)
	if _, err := other.Create(p+"/c", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	flush()
	expect("c1 after a child", c1, zk.EventNodeChildrenChanged, true)
	expect("c2 after a child", c2, zk.EventNodeChildrenChanged, true)
	select {
	case <-raw:
	default:
		t.Error("raw child watch did not fire")
	}

	// A change of children while down: only child Watches.
	c3, g3 := childW(), getW()
	c3b, g3b := childW(), getW() // shared
	hold.down(t, ctx, d, h, root, func() {
		if _, err := other.Create(p+"/d", nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	})
	expect("c3 after a child while down", c3, zk.EventNodeChildrenChanged, true)
	expect("c3b after a child while down", c3b, zk.EventNodeChildrenChanged, true)
	expect("g3 after a child while down", g3, 0, false)
	expect("g3b after a child while down", g3b, 0, false)

	// Shared again on the new connection, then a write while down: only
	// data Watches; then the children change: the child Watches.
	c4, g4 := childW(), getW()
	c4b, g4b := childW(), getW()
	hold.down(t, ctx, d, h, root, func() {
		if _, err := other.Set(p, []byte("y"), -1); err != nil {
			t.Fatal(err)
		}
	})
	for _, w := range []*Watch{g3, g3b, g4, g4b} {
		expect("data Watch after a write while down", w, zk.EventNodeDataChanged, true)
	}
	expect("c4 after a write while down", c4, 0, false)
	expect("c4b after a write while down", c4b, 0, false)
	c5 := childW() // shared with c4's, carried
	if err := other.Delete(p+"/c", -1); err != nil {
		t.Fatal(err)
	}
	flush()
	for _, w := range []*Watch{c4, c4b, c5} {
		expect("child Watch after a child left", w, zk.EventNodeChildrenChanged, true)
	}

	// CreatedW at a missing path: a creation and deletion in quick
	// succession while connected, then the same while down.
	q := root + "/q"
	created := func() *Watch {
		t.Helper()
		there, w, err := h.CreatedW(ctx, q)
		if err != nil || there {
			t.Fatalf("CreatedW = %v, %v", there, err)
		}
		all = append(all, w)
		return w
	}
	x1, x2 := created(), created()
	if _, err := other.Create(q, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(q, -1); err != nil {
		t.Fatal(err)
	}
	flush()
	expect("x1 after made and deleted", x1, zk.EventNodeCreated, true)
	expect("x2 after made and deleted", x2, zk.EventNodeCreated, true)
	x3, x4 := created(), created()
	hold.down(t, ctx, d, h, root, func() {})
	x5 := created() // after the reconnect: shares only if set on this one
	if _, err := other.Create(q, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(q, -1); err != nil {
		t.Fatal(err)
	}
	flush()
	for _, w := range []*Watch{x3, x4, x5} {
		expect("CreatedW Watch after made and deleted (after a reconnect)", w, zk.EventNodeCreated, true)
	}

	// Delete p: every child and data Watch left fires.
	g6, c6 := getW(), childW()
	for _, c := range []string{p + "/d"} {
		if err := other.Delete(c, -1); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	expect("c6 after a child left", c6, zk.EventNodeChildrenChanged, true)
	c7 := childW()
	if err := other.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	flush()
	expect("g6 after deletion", g6, zk.EventNodeDeleted, true)
	expect("c7 after deletion", c7, zk.EventNodeDeleted, true)

	for _, w := range all {
		w.Stop()
	}
	if n := watchCount(h); n != 0 {
		t.Errorf("%d Watches left", n)
	}
	tab := zktest.ClientWatchTable(t, h.Conn())
	for k, n := range tab {
		if k.Path == p || k.Path == q {
			t.Errorf("go-zookeeper holds %d at %+v", n, k)
		}
	}
	w := h.gen.c.wire
	w.mu.Lock()
	for path, x := range w.exists {
		t.Logf("exists record %s: %+v", path, *x)
		if x.out != 0 || x.callers != 0 || x.armed {
			t.Errorf("exists record at %s left: %+v", path, *x)
		}
	}
	for k, n := range w.carried.on {
		if k.path == p || k.path == q {
			t.Errorf("carried record %+v on %d left", k, n)
		}
	}
	w.mu.Unlock()
}
