package dsync

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR112TwoResetsOperatorRecord: no network fault. Run A is under
// way (PATH's version advanced to V); an operator creates PATH/done. Resets
// X and Y both read V and that record; X deletes it; A records; Y's delete
// (check V) then deletes A's record, which Y never read.
func TestReviewR112TwoResetsOperatorRecord(t *testing.T) {
	srv := zktest.Start(t)
	x := newOnceFixture(t, srv, "/r112-two-resets")
	started, finish := make(chan struct{}), make(chan struct{})
	runA := make(chan error, 1)
	go func() {
		runA <- x.o.Do(x.ctx, func(context.Context) error {
			x.runs.Add(1)
			close(started)
			<-finish
			return nil
		})
	}()
	<-started
	if _, err := x.raw.Create(x.o.path+"/done", []byte("by hand"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	y := NewOnce(x.sess, x.o.path)
	read, proceed := make(chan struct{}), make(chan struct{})
	y.resetting = func() { close(read); <-proceed }
	resY := make(chan error, 1)
	go func() { resY <- y.Reset(x.ctx) }()
	<-read
	if err := NewOnce(x.sess, x.o.path).Reset(x.ctx); err != nil {
		t.Fatalf("X's Reset = %v", err)
	}
	close(finish)
	if err := <-runA; err != nil {
		t.Fatalf("A's Do = %v", err)
	}
	if done, err := x.o.Done(x.ctx); err != nil || !done {
		t.Fatalf("Done after A = %v, %v; want true", done, err)
	}
	close(proceed)
	if err := <-resY; err != nil {
		t.Fatalf("Y's Reset = %v", err)
	}
	if done, err := x.o.Done(x.ctx); err != nil || !done {
		t.Errorf("Done after Y's Reset = %v, %v; want true: Y deleted A's record, written after Y read the operator's", done, err)
	}
}
