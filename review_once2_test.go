package dsync_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Second review of Once (once.go): the decision of a record whose reply was
// lost, by the cversion of the Once's path.

// ro2Lost starts Do on a Session through a proxy whose record multi is
// swallowed before it reaches the server (BlackHole: not applied), and
// returns Do's result channel once the fault has struck. f succeeds.
func ro2Lost(t *testing.T, path string) (*zktest.Proxy, <-chan error) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}), path)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.BlackHole)
	res := make(chan error, 1)
	go func() { res <- o.Do(context.Background(), func(context.Context) error { return nil }) }()
	reStruck(t, f, res)
	return p, res
}

// Bug: Once.record reads any move of PATH's cversion after a lost reply as "written, then Reset": a record that never reached the server, its lock cleared by an operator (PATH/lock deleted), makes Do return nil with nothing recorded.
func TestReviewOnce2CversionMovedByLockCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p, res := ro2Lost(t, path)

	// The multi did not reach the server. An operator clears what looks
	// like a stuck lock: its node, and the lock's (container) node, which
	// ZooKeeper's check for empty containers (every 60 s) may have
	// removed first: either way PATH's cversion moves.
	for _, k := range children(t, obs, path+"/lock") {
		if err := obs.Delete(path+"/lock/"+k, -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := obs.Delete(path+"/lock", -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	p.Heal() // the client sees its connection close: the multi's outcome is unknown
	err := <-res
	done, derr := dsync.NewOnce(dial(t, []string{shared.Addr()}), path).Done(ctx)
	if derr != nil {
		t.Fatal(derr)
	}
	if err == nil && !done {
		t.Fatalf("Do = nil (\"If f returns nil, its success is recorded\"), yet Done = false: " +
			"the record never reached the server; its lock node was gone (want ErrLockLost)")
	}
	if !errors.Is(err, dsync.ErrLockLost) {
		t.Errorf("Do = %v; want ErrLockLost", err)
	}
}

// Bug (same root as above, no operator touching PATH): a run whose stuck-looking lock node an operator deletes, while its record's reply is unknown, is reported recorded (Do = nil) once ZooKeeper reaps the emptied lock container.
func TestReviewOnce2CversionMovedByReaper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := zktest.Start(t, zktest.WithSystemProperty("znode.container.checkIntervalMs", "50"))
	path := lockPath(t)
	obs := observer(t, srv.Addr())
	p := zktest.NewProxy(t, srv.Addr())
	o := dsync.NewOnce(dial(t, []string{p.Addr()}), path)
	f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, zktest.BlackHole)
	res := make(chan error, 1)
	go func() { res <- o.Do(ctx, func(context.Context) error { return nil }) }()
	reStruck(t, f, res)

	// The operator deletes only the lock node, as in
	// TestReviewElectionOnceLostReplyReportedNotRecorded; the server reaps
	// the empty container on its own.
	_, _, gone, err := obs.ExistsW(path + "/lock")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range children(t, obs, path+"/lock") {
		if err := obs.Delete(path+"/lock/"+k, -1); err != nil {
			t.Fatal(err)
		}
	}
	<-gone // PATH/lock reaped
	p.Heal()
	err = <-res
	done, derr := dsync.NewOnce(dial(t, []string{srv.Addr()}), path).Done(ctx)
	if derr != nil {
		t.Fatal(derr)
	}
	if err == nil && !done {
		t.Fatalf("Do = nil, yet Done = false: a run whose lock node was deleted before its record " +
			"reached the server is reported recorded (doc: \"Do returns an error wrapping ErrLockLost\")")
	}
}
