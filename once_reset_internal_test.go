package dsync

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// onceFixture is a Once on a server of its own, a function that counts its
// runs, and a raw connection for what an operator does by hand.
type onceFixture struct {
	ctx  context.Context
	sess *zkconn.Session
	o    *Once
	runs atomic.Int32
	raw  *zk.Conn
}

func (x *onceFixture) f(context.Context) error { x.runs.Add(1); return nil }

// do runs x.o.Do and fails t unless f ran want times in all.
func (x *onceFixture) do(t *testing.T, want int32) {
	t.Helper()
	if err := x.o.Do(x.ctx, x.f); err != nil || x.runs.Load() != want {
		t.Fatalf("Do = %v, f ran %d times; want nil, %d", err, x.runs.Load(), want)
	}
}

func newOnceFixture(t *testing.T, srv *zktest.Server, path string) *onceFixture {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	sess, err := zkconn.Dial(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return &onceFixture{ctx: ctx, sess: sess, o: NewOnce(sess, path), raw: zktest.Observer(t, srv.Addr())}
}

// TestOncePathVersion: the fence of Reset's delete, PATH's data version,
// which a run advances before f.
func TestOncePathVersion(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	t.Run("ResetFenceMoved", func(t *testing.T) { t.Parallel(); testResetFenceMoved(t, srv) })
	t.Run("KeepsPathData", func(t *testing.T) { t.Parallel(); testKeepsPathData(t, srv) })
	t.Run("PathDataNearLimit", func(t *testing.T) { t.Parallel(); testPathDataNearLimit(t, srv) })
	t.Run("PathNotWritable", func(t *testing.T) { t.Parallel(); testPathNotWritable(t, srv) })
	t.Run("AdvanceReadsAgain", func(t *testing.T) { t.Parallel(); testAdvanceReadsAgain(t, srv) })
}

// testResetFenceMoved: PATH's version moves between Reset's read and its
// delete, whose check then fails. Reset reads again: with PATH's data
// changed by an operator, the record is the one it aimed at and it deletes
// it; with a record written since (the one read deleted and a run
// recorded), it deletes nothing and returns nil, as Reset does when the
// record it aimed at is gone: it does not send its delete again.
func testResetFenceMoved(t *testing.T, srv *zktest.Server) {
	for _, tc := range []struct {
		name   string
		move   func(t *testing.T, x *onceFixture)
		sends  int  // Reset's deletes
		record bool // a record after Reset
	}{
		{"PathDataChanged", func(t *testing.T, x *onceFixture) {
			if _, err := x.raw.Set(x.o.path, []byte("operator"), -1); err != nil {
				t.Error(err)
			}
		}, 2, false},
		{"RecordWrittenSince", func(t *testing.T, x *onceFixture) {
			other := NewOnce(x.sess, x.o.path)
			if err := other.Reset(x.ctx); err != nil {
				t.Error(err)
			}
			if err := other.Do(x.ctx, x.f); err != nil {
				t.Error(err)
			}
		}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := newOnceFixture(t, srv, "/dsync-test/once-fence-"+tc.name)
			x.do(t, 1)
			sends := 0
			x.o.resetting = func() {
				if sends++; sends == 1 {
					tc.move(t, x)
				}
			}
			if err := x.o.Reset(x.ctx); err != nil {
				t.Fatalf("Reset = %v", err)
			}
			if sends != tc.sends {
				t.Errorf("Reset sent its delete %d times; want %d", sends, tc.sends)
			}
			if done, err := x.o.Done(x.ctx); err != nil || done != tc.record {
				t.Fatalf("Done after Reset = %v, %v; want %v", done, err, tc.record)
			}
		})
	}
}

// testKeepsPathData: a run and a Reset write PATH's data back as it was,
// an operator's included, and each advances its version.
func testKeepsPathData(t *testing.T, srv *zktest.Server) {
	x := newOnceFixture(t, srv, "/once-path-data")
	if _, err := x.raw.Create(x.o.path, []byte("operator's"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	want := func(after string, version int32) {
		t.Helper()
		data, st, err := x.raw.Get(x.o.path)
		if err != nil || !bytes.Equal(data, []byte("operator's")) || st.Version != version {
			t.Fatalf("PATH after %s = %q, version %d, %v; want %q, version %d",
				after, data, st.Version, err, "operator's", version)
		}
	}
	for i := range int32(2) {
		x.do(t, i+1)
		want("a run", 2*i+1)
		if err := x.o.Reset(x.ctx); err != nil {
			t.Fatal(err)
		}
		want("a Reset", 2*i+2)
	}
}

// testPathDataNearLimit (round 111): PATH holding data near ZooKeeper's
// request limit does not make the record too large (a record that cannot
// be written would let f run at every Do): the run writes PATH's data back
// on its own, and the record does not carry it.
func testPathDataNearLimit(t *testing.T, srv *zktest.Server) {
	x := newOnceFixture(t, srv, "/once-path-big")
	if _, err := x.raw.Create(x.o.path, make([]byte, 1<<20-1-200), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	x.do(t, 1)
	x.do(t, 1)
}

// testPathNotWritable (round 111): without write permission on PATH, Do
// fails before f runs, every time, with the server's refusal.
func testPathNotWritable(t *testing.T, srv *zktest.Server) {
	x := newOnceFixture(t, srv, "/once-path-ro")
	acl := zk.WorldACL(zk.PermRead | zk.PermCreate | zk.PermDelete)
	if _, err := x.raw.Create(x.o.path, []byte("x"), 0, acl); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := x.o.Do(x.ctx, x.f); !errors.Is(err, zk.ErrNoAuth) || x.runs.Load() != 0 {
			t.Fatalf("Do = %v, f ran %d times; want zk.ErrNoAuth, f not run", err, x.runs.Load())
		}
	}
}

// testAdvanceReadsAgain: PATH written by an operator after the run read its
// stat: advance's conditional write fails, and it reads PATH again and
// writes back what the operator wrote, not what it read first. (Called
// again from f, under the run's lock, with the stat read before the
// operator's write.)
func testAdvanceReadsAgain(t *testing.T, srv *zktest.Server) {
	x := newOnceFixture(t, srv, "/once-path-moved")
	err := x.o.Do(x.ctx, func(held context.Context) error {
		_, read, err := x.raw.Get(x.o.path)
		if err != nil {
			return err
		}
		if _, err := x.raw.Set(x.o.path, []byte("operator's"), -1); err != nil {
			return err
		}
		v, err := x.o.advance(x.ctx, held.Value(holdKey{x.o.m}).(*hold), read)
		if err != nil || v != read.Version+2 {
			t.Errorf("advance = %d, %v; want %d, nil", v, err, read.Version+2)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := x.raw.Get(x.o.path); err != nil || string(data) != "operator's" {
		t.Fatalf("PATH after advance = %q, %v; want %q", data, err, "operator's")
	}
}
