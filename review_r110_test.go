package dsync_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR110OnceReadEndsOnClose (review round 110): Record with a
// context that is never done (its op runs inline in Handle.call) has its
// read black-holed; the session is given up (Once.read goes round to the
// next session, which the black hole keeps from coming), then the Session
// is closed: Record returns ErrClosed rather than looping or waiting for
// ever.
func TestReviewR110OnceReadEndsOnClose(t *testing.T) {
	ctx, path, _ := r45Start(t)
	if err := dsync.NewOnce(dial(t, []string{shared.Addr()}), path).Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, inline := range []bool{true, false} {
		p, s := r89Short(t)
		sub := s.Subscribe()
		o := dsync.NewOnce(s, path)
		f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/done"}, zktest.BlackHole)
		res := make(chan error, 1)
		cctx := context.Background()
		if !inline {
			var cancel context.CancelFunc
			cctx, cancel = context.WithCancel(cctx)
			defer cancel()
		}
		go func() {
			_, _, err := o.Record(cctx)
			res <- err
		}()
		r38Struck(t, f, res)
		p.BlackHole()
		awaitState(t, sub, zkconn.StateLost)
		sub.Stop()
		s.Close()
		err := reviewRecv(t, "Record", res)
		if !errors.Is(err, zkconn.ErrClosed) {
			t.Fatalf("inline %v: Record after Close = %v; want ErrClosed", inline, err)
		}
		f.Disarm()
		p.Heal()
	}
}
