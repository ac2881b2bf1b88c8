package dsync_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// valueCtx is the bound of one Value test: a test that hangs fails.
func valueCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// valuePath returns lockPath(t), whose persistent nodes are deleted when
// the test ends.
func valuePath(t *testing.T) string {
	t.Helper()
	obs := observer(t, shared.Addr())
	root := lockPath(t)
	t.Cleanup(func() { deleteTree(t, obs, root) })
	return root
}

// deleteTree deletes p and everything under it.
func deleteTree(t *testing.T, c *zk.Conn, p string) {
	t.Helper()
	kids, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return
	}
	if err != nil {
		t.Fatalf("Children(%s) = %v", p, err)
	}
	for _, k := range kids {
		deleteTree(t, c, p+"/"+k)
	}
	if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("Delete(%s) = %v", p, err)
	}
}

// createRaw writes data at path with c, persistent, creating missing
// parents as plain persistent nodes.
func createRaw(t *testing.T, c *zk.Conn, path string, data []byte) {
	t.Helper()
	parts := strings.Split(path[1:], "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		var d []byte
		if i == len(parts)-1 {
			d = data
		}
		if _, err := c.Create(p, d, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("Create(%s) = %v", p, err)
		}
	}
}

// valueStringCodec stores a string as its bytes; it refuses to encode "bad".
type valueStringCodec struct{}

func (valueStringCodec) Encode(s string) ([]byte, error) {
	if s == "bad" {
		return nil, errors.New("cannot encode bad")
	}
	return []byte(s), nil
}

func (valueStringCodec) Decode(b []byte) (string, error) { return string(b), nil }

func TestValueInt32Codec(t *testing.T) {
	var c dsync.Int32Codec
	for _, tc := range []struct {
		n    int32
		want []byte
	}{
		{0, []byte{0, 0, 0, 0}},
		{1, []byte{0, 0, 0, 1}},
		{42, []byte{0, 0, 0, 42}},
		{-1, []byte{0xff, 0xff, 0xff, 0xff}},
		{-7, []byte{0xff, 0xff, 0xff, 0xf9}},
		{math.MaxInt32, []byte{0x7f, 0xff, 0xff, 0xff}},
		{math.MinInt32, []byte{0x80, 0, 0, 0}},
		{0x01020304, []byte{1, 2, 3, 4}},
	} {
		b, err := c.Encode(tc.n)
		if err != nil || !bytes.Equal(b, tc.want) {
			t.Errorf("Encode(%d) = %x, %v; want %x, nil", tc.n, b, err, tc.want)
		}
		n, err := c.Decode(tc.want)
		if err != nil || n != tc.n {
			t.Errorf("Decode(%x) = %d, %v; want %d, nil", tc.want, n, err, tc.n)
		}
	}
	for _, b := range [][]byte{nil, {1, 2, 3}, {1, 2, 3, 4, 5}} {
		if _, err := c.Decode(b); err == nil || !strings.Contains(err.Error(), fmt.Sprint(len(b))) {
			t.Errorf("Decode(%x) error = %v; want one naming the length %d", b, err, len(b))
		}
	}
}

// TestValueGetCreatesWithSeed: the first Get creates a persistent node
// holding the seed; later Gets (whatever their seed) read what is there.
func TestValueGetCreatesWithSeed(t *testing.T) {
	ctx := valueCtx(t)
	sess := dial(t, []string{shared.Addr()})
	path := valuePath(t) + "/deep/count"
	got, err := dsync.NewCount(sess, path, -2).Get(ctx)
	if err != nil || got != (dsync.Versioned[int32]{Value: -2, Version: 0}) {
		t.Fatalf("Get() = %+v, %v; want {Value:-2 Version:0}, nil", got, err)
	}
	sess.Close() // a persistent node outlives its creator's session
	obs := observer(t, shared.Addr())
	data, st, err := obs.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0xff, 0xff, 0xff, 0xfe}; !bytes.Equal(data, want) {
		t.Errorf("node data = %x; want %x", data, want)
	}
	if st.EphemeralOwner != 0 {
		t.Errorf("node ephemeralOwner = %#x; want 0 (persistent)", st.EphemeralOwner)
	}

	other := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 99)
	got, err = other.Get(ctx)
	if err != nil || got != (dsync.Versioned[int32]{Value: -2, Version: 0}) {
		t.Fatalf("Get() with another seed = %+v, %v; want {Value:-2 Version:0}, nil", got, err)
	}
}

// TestValueContainerParents: the missing parents Get creates are CONTAINER
// nodes: once the value's node is deleted, the server removes them.
func TestValueContainerParents(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	srv := zktest.Start(t, zktest.WithSystemProperty("znode.container.checkIntervalMs", "100"))
	root := lockPath(t)
	path := root + "/deep/count"
	if _, err := dsync.NewCount(dial(t, []string{srv.Addr()}), path, 1).Get(ctx); err != nil {
		t.Fatal(err)
	}
	obs := observer(t, srv.Addr())
	ok, _, watch, err := obs.ExistsW(root)
	if err != nil || !ok {
		t.Fatalf("ExistsW(%s) = %v, %v; want it there", root, ok, err)
	}
	if err := obs.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on %s = %v; want it deleted", root, ev.Type)
		}
	case <-ctx.Done():
		t.Fatalf("%s not removed by the server: not a container", root)
	}
}

func TestValueSetGet(t *testing.T) {
	ctx := valueCtx(t)
	sess := dial(t, []string{shared.Addr()})
	path := valuePath(t)
	c := dsync.NewCount(sess, path, 5)
	if got, err := c.Get(ctx); err != nil || got.Value != 5 || got.Version != 0 {
		t.Fatalf("Get() = %+v, %v; want {Value:5 Version:0}", got, err)
	}
	for i, n := range []int32{7, -7, math.MinInt32} {
		if err := c.Set(ctx, n); err != nil {
			t.Fatalf("Set(%d) = %v", n, err)
		}
		want := dsync.Versioned[int32]{Value: n, Version: int32(i + 1)}
		if got, err := c.Get(ctx); err != nil || got != want {
			t.Fatalf("Get() after Set(%d) = %+v, %v; want %+v", n, got, err, want)
		}
	}

	// Set on a missing node creates it with the value, not the seed.
	s := dsync.NewValue[string](sess, path+"/fresh/string", valueStringCodec{}, "seed")
	if err := s.Set(ctx, "hello"); err != nil {
		t.Fatalf("Set(hello) on a missing node = %v", err)
	}
	if got, err := s.Get(ctx); err != nil || got.Value != "hello" || got.Version != 0 {
		t.Fatalf("Get() = %+v, %v; want {Value:hello Version:0}", got, err)
	}
	if err := s.Set(ctx, "bad"); err == nil || !strings.Contains(err.Error(), "cannot encode bad") {
		t.Fatalf("Set(bad) = %v; want the codec's error", err)
	}
	if got, err := s.Get(ctx); err != nil || got.Value != "hello" {
		t.Fatalf("Get() after a failed Set = %+v, %v; want hello", got, err)
	}
}

// TestValueCompareAndSet: of two writers that read the same version, only
// the first write lands; the second learns of the conflict.
func TestValueCompareAndSet(t *testing.T) {
	ctx := valueCtx(t)
	path := valuePath(t)
	a := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 10)
	b := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 10)
	va, err := a.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if va != vb {
		t.Fatalf("a read %+v, b read %+v; want the same", va, vb)
	}
	if ok, err := a.CompareAndSet(ctx, va, 11); !ok || err != nil {
		t.Fatalf("a.CompareAndSet(%+v, 11) = %v, %v; want true, nil", va, ok, err)
	}
	if ok, err := b.CompareAndSet(ctx, vb, 12); ok || err != nil {
		t.Fatalf("b.CompareAndSet(stale %+v, 12) = %v, %v; want false, nil", vb, ok, err)
	}
	want := dsync.Versioned[int32]{Value: 11, Version: 1}
	if got, err := b.Get(ctx); err != nil || got != want {
		t.Fatalf("Get() after the conflict = %+v, %v; want %+v", got, err, want)
	}
	// With a fresh read the second writer gets through.
	vb, _ = b.Get(ctx)
	if ok, err := b.CompareAndSet(ctx, vb, 12); !ok || err != nil {
		t.Fatalf("b.CompareAndSet(%+v, 12) = %v, %v; want true, nil", vb, ok, err)
	}
	want = dsync.Versioned[int32]{Value: 12, Version: 2}
	if got, err := a.Get(ctx); err != nil || got != want {
		t.Fatalf("Get() = %+v, %v; want %+v", got, err, want)
	}

	if ok, err := a.CompareAndSet(ctx, dsync.Versioned[int32]{Version: -1}, 0); ok || err == nil {
		t.Fatalf("CompareAndSet(version -1) = %v, %v; want false and an error", ok, err)
	}
	obs := observer(t, shared.Addr())
	if err := obs.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.CompareAndSet(ctx, want, 13); ok || err != nil {
		t.Fatalf("CompareAndSet on a deleted node = %v, %v; want false, nil", ok, err)
	}
	if ok, _, _ := obs.Exists(path); ok {
		t.Fatalf("CompareAndSet on a deleted node created it")
	}
}

// TestValueWatch: the watcher sees the initial value, then each value
// another Session sets, in order. The next value is set only once the
// previous one has been seen, so none coalesce.
func TestValueWatch(t *testing.T) {
	ctx := valueCtx(t)
	path := valuePath(t)
	w := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 100)
	setter := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 100)
	want := dsync.Versioned[int32]{Value: 100, Version: 0}
	for got, err := range w.Watch(ctx) {
		if err != nil {
			t.Fatalf("Watch yielded error %v; want %+v", err, want)
		}
		if got != want {
			t.Fatalf("Watch yielded %+v; want %+v", got, want)
		}
		if want.Version == 5 {
			break
		}
		want = dsync.Versioned[int32]{Value: want.Value + 1, Version: want.Version + 1}
		if err := setter.Set(ctx, want.Value); err != nil {
			t.Fatalf("Set(%d) = %v", want.Value, err)
		}
	}
	if want.Version != 5 {
		t.Fatalf("Watch ended at %+v; want it to reach version 5", want)
	}

	// Watching the same path again starts from the current value.
	for got, err := range w.Watch(ctx) {
		if err != nil || got.Value != 105 {
			t.Fatalf("second Watch yielded %+v, %v; want 105", got, err)
		}
		break
	}
}

// TestValueWatchCoalesces: writes made while the loop body runs are
// delivered as the latest value.
func TestValueWatchCoalesces(t *testing.T) {
	ctx := valueCtx(t)
	path := valuePath(t)
	w := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
	setter := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
	var seen []dsync.Versioned[int32]
	for got, err := range w.Watch(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, got)
		if got.Value == 3 {
			break
		}
		if len(seen) == 1 {
			for n := int32(1); n <= 3; n++ {
				if err := setter.Set(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(seen) < 2 || seen[0].Value != 0 || seen[len(seen)-1] != (dsync.Versioned[int32]{Value: 3, Version: 3}) {
		t.Fatalf("Watch yielded %+v; want {0 0} first and {3 3} last", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Version <= seen[i-1].Version {
			t.Fatalf("Watch yielded %+v; want increasing versions", seen)
		}
	}
}

// TestValueWatchCanceled: canceling the context ends the loop without an
// error; a context already done yields nothing.
func TestValueWatchCanceled(t *testing.T) {
	path := valuePath(t)
	w := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 1)
	ctx, cancel := context.WithCancel(valueCtx(t))
	defer cancel()
	type yielded struct {
		v   dsync.Versioned[int32]
		err error
	}
	out := make(chan yielded, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v, err := range w.Watch(ctx) {
			out <- yielded{v, err}
		}
	}()
	select {
	case y := <-out:
		if y.err != nil || y.v.Value != 1 {
			t.Fatalf("first yield = %+v, %v; want 1, nil", y.v, y.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Watch yielded nothing within a minute")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Watch still running a minute after cancel")
	}
	close(out)
	for y := range out {
		t.Errorf("Watch yielded %+v, %v after cancel; want nothing", y.v, y.err)
	}

	for v, err := range w.Watch(ctx) {
		t.Errorf("Watch(done ctx) yielded %+v, %v; want nothing", v, err)
	}
	if _, err := w.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(done ctx) = %v; want context.Canceled", err)
	}
	if err := w.Set(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("Set(done ctx) = %v; want context.Canceled", err)
	}
	if _, err := w.CompareAndSet(ctx, dsync.Versioned[int32]{}, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("CompareAndSet(done ctx) = %v; want context.Canceled", err)
	}
}

// TestValueDecodeError: data the codec cannot read is an error wrapping
// ErrDecode that carries the version; Watch yields it and goes on, and
// CompareAndSet can repair it.
func TestValueDecodeError(t *testing.T) {
	ctx := valueCtx(t)
	path := valuePath(t)
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, []byte{1, 2, 3})
	c := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
	got, err := c.Get(ctx)
	if !errors.Is(err, dsync.ErrDecode) || !strings.Contains(err.Error(), "3 bytes") {
		t.Fatalf("Get() of 3 bytes = %+v, %v; want ErrDecode naming 3 bytes", got, err)
	}
	if got.Version != 0 {
		t.Fatalf("Get() of 3 bytes: version %d; want 0", got.Version)
	}

	step := 0
	for got, err := range c.Watch(ctx) {
		switch step {
		case 0:
			if !errors.Is(err, dsync.ErrDecode) || got.Version != 0 {
				t.Fatalf("first yield = %+v, %v; want version 0 and ErrDecode", got, err)
			}
			if _, err := obs.Set(path, []byte{1, 2, 3, 4, 5}, -1); err != nil {
				t.Fatal(err)
			}
		case 1:
			if !errors.Is(err, dsync.ErrDecode) || got.Version != 1 || !strings.Contains(err.Error(), "5 bytes") {
				t.Fatalf("second yield = %+v, %v; want version 1 and ErrDecode naming 5 bytes", got, err)
			}
			if ok, err := c.CompareAndSet(ctx, got, 9); !ok || err != nil {
				t.Fatalf("CompareAndSet(%+v, 9) = %v, %v; want true, nil", got, ok, err)
			}
		case 2:
			if want := (dsync.Versioned[int32]{Value: 9, Version: 2}); err != nil || got != want {
				t.Fatalf("third yield = %+v, %v; want %+v, nil", got, err, want)
			}
		}
		if step++; step == 3 {
			break
		}
	}
	if step != 3 {
		t.Fatalf("Watch ended after %d yields; want 3", step)
	}
}

// valueFailingCodec cannot encode anything.
type valueFailingCodec struct{}

func (valueFailingCodec) Encode(int32) ([]byte, error) { return nil, errors.New("no encoding") }
func (valueFailingCodec) Decode([]byte) (int32, error) { return 0, nil }

// TestValueBadInput: every method reports bad input, and sends nothing.
func TestValueBadInput(t *testing.T) {
	ctx := valueCtx(t)
	sess := dial(t, []string{shared.Addr()})
	good := valuePath(t)
	for _, tc := range []struct {
		name string
		v    *dsync.Count
		want error // nil: any error
		text string
	}{
		{"nil session", dsync.NewCount(nil, good, 0), dsync.ErrNilSession, ""},
		{"empty path", dsync.NewCount(sess, "", 0), dsync.ErrBadPath, ""},
		{"relative path", dsync.NewCount(sess, "count", 0), dsync.ErrBadPath, ""},
		{"trailing slash", dsync.NewCount(sess, good+"/", 0), dsync.ErrBadPath, ""},
		{"dot-dot", dsync.NewCount(sess, good+"/../x", 0), dsync.ErrBadPath, ""},
		{"NUL", dsync.NewCount(sess, good+"/a\x00b", 0), dsync.ErrBadPath, ""},
		{"root", dsync.NewCount(sess, "/", 0), dsync.ErrBadPath, ""},
		{"nil codec", dsync.NewValue[int32](sess, good+"/nilcodec", nil, 0), nil, "nil codec"},
		{"seed not encodable", dsync.NewValue[int32](sess, good+"/badseed", valueFailingCodec{}, 0), nil, "no encoding"},
	} {
		check := func(method string, err error) {
			t.Helper()
			switch {
			case err == nil:
				t.Errorf("%s: %s = nil; want an error", tc.name, method)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("%s: %s = %v; want %v", tc.name, method, err, tc.want)
			case !strings.HasPrefix(err.Error(), "dsync: ") || !strings.Contains(err.Error(), tc.text):
				t.Errorf("%s: %s = %q; want a dsync: error mentioning %q", tc.name, method, err, tc.text)
			}
		}
		_, err := tc.v.Get(ctx)
		check("Get", err)
		check("Set", tc.v.Set(ctx, 1))
		ok, err := tc.v.CompareAndSet(ctx, dsync.Versioned[int32]{}, 1)
		if ok {
			t.Errorf("%s: CompareAndSet = true; want false", tc.name)
		}
		check("CompareAndSet", err)
		n := 0
		for _, err := range tc.v.Watch(ctx) {
			n++
			check("Watch", err)
		}
		if n != 1 {
			t.Errorf("%s: Watch yielded %d times; want once", tc.name, n)
		}
	}
	if kids := children(t, observer(t, shared.Addr()), good); len(kids) != 0 {
		t.Fatalf("bad input created %v under %s; want nothing", kids, good)
	}
}

// watchAcross starts a Count watcher through a proxy, breaks its connection
// with cut after the first value, writes 2 from another Session, heals, and
// checks that the Watch yields 2 next.
func watchAcross(t *testing.T, timeout time.Duration, cut func(*zktest.Proxy, *zkconn.Subscription)) *zkconn.Subscription {
	ctx := valueCtx(t)
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(timeout))
	sub := s.Subscribe()
	t.Cleanup(sub.Stop)
	w := dsync.NewCount(s, path, 1)
	setter := dsync.NewCount(dial(t, []string{srv.Addr()}), path, 1)
	step := 0
	for got, err := range w.Watch(ctx) {
		if err != nil {
			t.Fatalf("Watch yielded %v", err)
		}
		switch step {
		case 0:
			if got.Value != 1 {
				t.Fatalf("first yield %+v; want 1", got)
			}
			cut(p, sub)
			if err := setter.Set(ctx, 2); err != nil {
				t.Fatal(err)
			}
			p.Heal()
		case 1:
			if want := (dsync.Versioned[int32]{Value: 2, Version: 1}); got != want {
				t.Fatalf("yield after the break = %+v; want %+v", got, want)
			}
		}
		if step++; step == 2 {
			break
		}
	}
	return sub
}

// TestValueWatchAcrossSuspension: a value written while the watcher is cut
// off is yielded once the connection is back, on the same session.
func TestValueWatchAcrossSuspension(t *testing.T) {
	t.Parallel()
	sub := watchAcross(t, 20*time.Second, func(p *zktest.Proxy, sub *zkconn.Subscription) {
		p.BlackHole()
		p.Cut()
		awaitState(t, sub, zkconn.StateSuspended)
	})
	awaitState(t, sub, zkconn.StateReconnected)
}

// TestValueWatchAcrossSessionLoss: the watcher's session is lost while a
// value is written; the Watch carries on with the next session and yields it.
func TestValueWatchAcrossSessionLoss(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	watchAcross(t, 2*time.Second, func(p *zktest.Proxy, sub *zkconn.Subscription) {
		p.BlackHole()
		awaitState(t, sub, zkconn.StateLost)
	})
}

// awaitState reads sub until the Session reaches want.
func awaitState(t *testing.T, sub *zkconn.Subscription, want zkconn.State) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev := <-sub.C():
			if ev.State == want {
				return
			}
		case <-timeout:
			t.Fatalf("Session not %v within a minute", want)
		}
	}
}

// TestCountInteropCurator: Curator's SharedCount and dsync's Count read each
// other's writes on one path.
func TestCountInteropCurator(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	root := valuePath(t)
	path := root + "/count"
	lines, err := java.Run(ctx, "count-set", shared.Addr(), path, "42")
	if err != nil || len(lines) != 1 || lines[0] != "ok" {
		t.Fatalf("Curator count-set 42 = %q, %v; want ok", lines, err)
	}
	c := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 0)
	if got, err := c.Get(ctx); err != nil || got.Value != 42 {
		t.Fatalf("Get() after Curator's setCount(42) = %+v, %v; want 42", got, err)
	}
	if err := c.Set(ctx, -7); err != nil {
		t.Fatalf("Set(-7) = %v", err)
	}
	lines, err = java.Run(ctx, "count-get", shared.Addr(), path)
	if err != nil || len(lines) != 1 || lines[0] != "-7" {
		t.Fatalf("Curator count-get = %q, %v; want -7", lines, err)
	}

	// A node dsync creates with its seed is what Curator reads.
	fresh := dsync.NewCount(dial(t, []string{shared.Addr()}), root+"/seeded/count", 1234)
	if _, err := fresh.Get(ctx); err != nil {
		t.Fatal(err)
	}
	lines, err = java.Run(ctx, "count-get", shared.Addr(), root+"/seeded/count")
	if err != nil || len(lines) != 1 || lines[0] != "1234" {
		t.Fatalf("Curator count-get of a dsync seed = %q, %v; want 1234", lines, err)
	}
}

// lossy returns a Count at a fresh path on its own server, used by a Session
// that goes through a proxy (for request-level faults), and a Count at the
// same path on another Session that goes straight to the server. The node
// exists, holding 1 at version 0, unless missing is set: then only its
// parent does.
func lossy(t *testing.T, missing bool) (p *zktest.Proxy, a, b *dsync.Count, obs *zk.Conn, name string) {
	t.Helper()
	srv := zktest.Start(t)
	p = zktest.NewProxy(t, srv.Addr())
	name = lockPath(t) + "/count"
	// A session timeout long enough that the client does not give up on a
	// connection by itself while a test holds its reply back.
	a = dsync.NewCount(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second)), name, 1)
	b = dsync.NewCount(dial(t, []string{srv.Addr()}), name, 1)
	obs = observer(t, srv.Addr())
	if missing {
		createRaw(t, obs, path.Dir(name), nil)
	} else if _, err := b.Get(valueCtx(t)); err != nil {
		t.Fatal(err)
	}
	return p, a, b, obs, name
}

// assertNode fails unless the node at path holds the int32 want at version.
func assertNode(t *testing.T, obs *zk.Conn, path string, want, version int32) {
	t.Helper()
	data, st, err := obs.Get(path)
	if err != nil {
		t.Fatalf("Get(%s) = %v", path, err)
	}
	got, err := dsync.Int32Codec{}.Decode(data)
	if err != nil || got != want || st.Version != version {
		t.Fatalf("%s holds %d (%v) at version %d; want %d at version %d", path, got, err, st.Version, want, version)
	}
}

// assertUnknown fails unless err says the outcome of a write is unknown,
// with its cause.
func assertUnknown(t *testing.T, what string, err error, cause error) {
	t.Helper()
	if !errors.Is(err, dsync.ErrOutcomeUnknown) || !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "dsync: ") {
		t.Fatalf("%s = %v; want a dsync: error wrapping ErrOutcomeUnknown and %v", what, err, cause)
	}
}

// strikeWrite arms fault action on the first request m matches, runs write
// on a goroutine and, once the fault has struck, runs meanwhile (which ends
// with whatever lets the write return); it returns write's error.
func strikeWrite(p *zktest.Proxy, m zktest.Match, action zktest.Action, write func() error, meanwhile func()) error {
	f := p.Strike(m, action)
	got := make(chan error, 1)
	go func() { got <- write() }()
	<-f.Struck()
	meanwhile()
	return <-got
}

// casOnce is a CompareAndSet whose true result is an error.
func casOnce(ctx context.Context, c *dsync.Count, prev dsync.Versioned[int32], x int32) func() error {
	return func() error {
		ok, err := c.CompareAndSet(ctx, prev, x)
		if ok {
			return fmt.Errorf("CompareAndSet(%+v, %d) = true, %v", prev, x, err)
		}
		return err
	}
}

// TestValueCompareAndSetLostWriteNotClaimed pins a compare-and-set that
// reported a write that never happened: A's write is lost with its
// connection, B writes the same value over the same version, and A, which
// used to send its write again, got BadVersion, found its value at the next
// version and reported true.
func TestValueCompareAndSetLostWriteNotClaimed(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	p, a, b, obs, path := lossy(t, false)
	v0 := dsync.Versioned[int32]{Value: 1, Version: 0}
	// A's write goes out and never arrives.
	err := strikeWrite(p, zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.BlackHole, casOnce(ctx, a, v0, 6), func() {
		if ok, err := b.CompareAndSet(ctx, v0, 6); !ok || err != nil {
			t.Errorf("b.CompareAndSet(%+v, 6) = %v, %v; want true, nil", v0, ok, err)
		}
		p.Heal()
	})
	assertUnknown(t, "a.CompareAndSet with its write lost", err, zk.ErrConnectionClosed)
	assertNode(t, obs, path, 6, 1)
}

// TestValueCompareAndSetLostReplyNotDenied pins a compare-and-set that
// reported false for a write that was applied: its reply was lost, another
// write followed, and the write sent again got BadVersion.
func TestValueCompareAndSetLostReplyNotDenied(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	p, a, _, obs, path := lossy(t, false)
	v0 := dsync.Versioned[int32]{Value: 1, Version: 0}
	// A's write is applied; its reply is held back.
	err := strikeWrite(p, zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Drop, casOnce(ctx, a, v0, 6), func() {
		assertNode(t, obs, path, 6, 1)
		if _, err := obs.Set(path, []byte{0, 0, 0, 7}, 1); err != nil {
			t.Error(err)
		}
		p.Cut()
	})
	assertUnknown(t, "a.CompareAndSet with its reply lost", err, zk.ErrConnectionClosed)
	assertNode(t, obs, path, 7, 2)
}

// TestValueSetLostReplyNotRepeated pins a Set applied twice: its reply was
// lost, a compare-and-set landed over it, and Set sent its write again,
// undoing that compare-and-set.
func TestValueSetLostReplyNotRepeated(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	p, a, b, obs, path := lossy(t, false)
	set := func() error { return a.Set(ctx, 6) }
	err := strikeWrite(p, zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Drop, set, func() {
		v1 := dsync.Versioned[int32]{Value: 6, Version: 1}
		if ok, err := b.CompareAndSet(ctx, v1, 7); !ok || err != nil {
			t.Errorf("b.CompareAndSet(%+v, 7) = %v, %v; want true, nil", v1, ok, err)
		}
		p.Cut()
	})
	assertUnknown(t, "a.Set with its reply lost", err, zk.ErrConnectionClosed)
	assertNode(t, obs, path, 7, 2)
}

// TestValueSetLostCreateNotRepeated pins the same for the create of a
// missing node: Set sent the create again, found the node, and wrote over
// it, so one Set made two versions.
func TestValueSetLostCreateNotRepeated(t *testing.T) {
	t.Parallel()
	ctx := valueCtx(t)
	p, a, _, obs, path := lossy(t, true)
	set := func() error { return a.Set(ctx, 6) }
	err := strikeWrite(p, zktest.Match{Op: zktest.OpCreate, Path: path}, zktest.Lose, set, func() {})
	assertUnknown(t, "a.Set with its create's reply lost", err, zk.ErrConnectionClosed)
	assertNode(t, obs, path, 6, 0)
}

// deadlineCtx is a context whose deadline passes when expire is called.
type deadlineCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx(parent context.Context) *deadlineCtx {
	return &deadlineCtx{Context: parent, done: make(chan struct{})}
}

func (c *deadlineCtx) expire()                     { c.once.Do(func() { close(c.done) }) }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestValueWriteCtxDoneInFlight pins writes that, when ctx ended while they
// were on their way, returned ctx.Err() alone, as if nothing had been
// written: they return at once, and their errors say the outcome is unknown
// and wrap ctx.Err().
func TestValueWriteCtxDoneInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, c *dsync.Count) error
		end   func() (context.Context, func())
		cause error
	}{
		{
			name:  "Set canceled",
			write: func(ctx context.Context, c *dsync.Count) error { return c.Set(ctx, 6) },
			end: func() (context.Context, func()) {
				return context.WithCancel(context.Background())
			},
			cause: context.Canceled,
		},
		{
			name: "CompareAndSet past its deadline",
			write: func(ctx context.Context, c *dsync.Count) error {
				return casOnce(ctx, c, dsync.Versioned[int32]{Value: 1, Version: 0}, 6)()
			},
			end: func() (context.Context, func()) {
				ctx := newDeadlineCtx(context.Background())
				return ctx, ctx.expire
			},
			cause: context.DeadlineExceeded,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, a, _, obs, path := lossy(t, false)
			ctx, end := tc.end()
			defer end()
			// The write is applied; its reply is held back.
			write := func() error { return tc.write(ctx, a) }
			err := strikeWrite(p, zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Drop, write, end)
			assertUnknown(t, tc.name+" in flight", err, tc.cause)
			assertNode(t, obs, path, 6, 1)
			p.Cut() // the write ends in the background
		})
	}
}

// TestValueWatchOneWatch pins a watch leak: each Watch loop that ended
// (broken out of, or its ctx done) left its watch behind in go-zookeeper
// until the node changed: 1,000 loops, 1,000 watch channels. The loops of a
// Value share one watch.
func TestValueWatchOneWatch(t *testing.T) {
	const loops = 200
	ctx := valueCtx(t)
	path := valuePath(t)
	s := dial(t, []string{shared.Addr()})
	c := dsync.NewCount(s, path, 1)
	conn := connOf(t, s)
	for i := 0; i < loops; i++ {
		for _, err := range c.Watch(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if n := clientWatches(t, conn, path); n != 1 {
		t.Fatalf("after %d Watch loops broken out of, go-zookeeper holds %d watches on the node; want 1", loops, n)
	}

	// Loops at once share the watch, and all see a change.
	const watchers = 5
	seen := make(chan int32, 2*watchers)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < watchers; i++ {
		wg.Go(func() {
			for v, err := range c.Watch(wctx) {
				if err != nil {
					t.Error(err)
					return
				}
				seen <- v.Value
			}
		})
	}
	for i := 0; i < watchers; i++ {
		if v := <-seen; v != 1 {
			t.Fatalf("a Watch loop yielded %d first; want 1", v)
		}
	}
	if n := clientWatches(t, conn, path); n != 1 {
		t.Errorf("with %d Watch loops running, go-zookeeper holds %d watches on the node; want 1", watchers, n)
	}
	if err := dsync.NewCount(dial(t, []string{shared.Addr()}), path, 1).Set(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < watchers; i++ {
		if v := <-seen; v != 2 {
			t.Fatalf("a Watch loop yielded %d after Set(2); want 2", v)
		}
	}
	cancel()
	wg.Wait()
	if n := clientWatches(t, conn, path); n != 1 {
		t.Errorf("after the loops ended, go-zookeeper holds %d watches on the node; want 1", n)
	}
	if ids := watches(t, shared)[path]; len(ids) != 1 || ids[0] != conn.SessionID() {
		t.Errorf("the server has watches on the node of sessions %x; want one of %x", ids, conn.SessionID())
	}
}
