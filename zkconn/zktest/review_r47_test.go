package zktest_test

import (
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR47PassReplyDroppedStrikesAtEnd: a request struck by Pass whose
// reply the proxy drops (DropReplies) is applied, its Struck stays open (the
// reply never went on its way to the client), and closes once Heal ends the
// connection; the client's call fails closed. Pass must not strike on a
// reply that is not delivered, nor leak its expected entry.
func TestReviewR47PassReplyDroppedStrikesAtEnd(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)
	f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/pass-dropped"}, zktest.Pass)
	r.p.DropReplies()
	done := async(func() error { return create(r.c, "/pass-dropped") })
	// Wait until the server has applied it (an exists watch of the
	// observer's, set before or after the create).
	for {
		ok, _, ev, err := r.observer.ExistsW("/pass-dropped")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		select {
		case <-ev:
		case <-r.ctx.Done():
			t.Fatal("the create struck by Pass never reached the server")
		}
	}
	notStruck(t, f, "Pass on a reply dropped by DropReplies")
	r.waiting(t, done, "Create(/pass-dropped)")
	r.p.Heal()
	zktest.AwaitStruck(t, f)
	r.failsClosed(t, done, "Create(/pass-dropped) after Heal")
}
