package dsync

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestOnceDecideOnSpentContext pins the mend of review 3's
// TestReviewOnce3AppliedRecordReportedFailed: Once.record decided a lost
// record reply with the ctx that bounded the wait for it, so a reply lost
// until that bound ran out left a decision that failed at once on the spent
// ctx, and Do reported a written record as failed. Since a Session closes a
// connection at a reply out of turn, a reply swallowed on a live connection
// is noticed within a third of the timeout and that bound is never spent
// there: this test calls decide itself, with a spent ctx, under the run's
// lock, before the record is written. It must decide (not written), not
// fail.
func TestOnceDecideOnSpentContext(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := zkconn.Dial(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := NewOnce(s, "/dsync-test/once-decide")
	ran := false
	err = o.Do(ctx, func(held context.Context) error {
		ran = true
		hd := held.Value(holdKey{o.m}).(*hold)
		_, st, err := o.state(ctx)
		if err != nil {
			t.Fatal(err)
		}
		spent, end := context.WithCancel(ctx)
		end()
		written, err := o.decide(spent, hd, st.Version)
		if err != nil || written {
			t.Errorf("decide(spent ctx) before the record = %v, %v; want false, nil "+
				"(a decision under a bound of its own)", written, err)
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v (f ran: %v); want nil", err, ran)
	}
	if done, err := o.Done(ctx); err != nil || !done {
		t.Errorf("Done = %v, %v; want true", done, err)
	}
}
