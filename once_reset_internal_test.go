package dsync

import (
	"bytes"
	"context"
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

// TestOnceResetFenceMoved: PATH's version moves between Reset's read and its
// delete, whose check then fails. Reset reads again: with PATH's data
// changed by an operator, the record is the one it aimed at and it deletes
// it; with a record written since (the one read deleted and a run
// recorded), it deletes nothing and returns nil, as Reset does when the
// record it aimed at is gone: it does not send its delete again.
func TestOnceResetFenceMoved(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
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

// TestOnceRecordKeepsPathData: a record's transaction writes PATH's data
// back as it was, an operator's included, and advances its version.
func TestOnceRecordKeepsPathData(t *testing.T) {
	t.Parallel()
	x := newOnceFixture(t, zktest.Start(t), "/once-path-data")
	if _, err := x.raw.Create(x.o.path, []byte("operator's"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for i := range int32(2) {
		x.do(t, i+1)
		data, st, err := x.raw.Get(x.o.path)
		if err != nil || !bytes.Equal(data, []byte("operator's")) || st.Version != i+1 {
			t.Fatalf("PATH after record %d = %q, version %d, %v; want %q, version %d",
				i+1, data, st.Version, err, "operator's", i+1)
		}
		if err := x.o.Reset(x.ctx); err != nil {
			t.Fatal(err)
		}
	}
}
