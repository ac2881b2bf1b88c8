package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 39: "dsync once -reset" whose delete's outcome is unknown.

// TestReviewR39CmdResetTimedOutUnknown: "dsync once -reset -timeout 3s"
// sends the delete of the record, which is applied, and its reply is
// swallowed on a live connection; -timeout passes first. Reset's error
// wraps ErrOutcomeUnknown, but dsync says only that it timed out, so an
// operator takes the record for still there (and a second -reset may
// delete the record of a run that came since): it must say that the record
// may or may not have been deleted, as "dsync revoke" does.
func TestReviewR39CmdResetTimedOutUnknown(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t)
	for _, p := range []string{path, oncePath(path, "done")} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("Create(%s) = %v", p, err)
		}
	}
	p := zktest.NewProxy(t, shared.Addr())
	f := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: oncePath(path, "done")}, zktest.Drop)
	defer f.Disarm()
	// The tap closes the connection at the next ping's reply, 10s on: -timeout passes first.
	d := start(t, "once", "-reset", "-zk", p.Addr(), "-session-timeout", "30s", "-timeout", "3s", path)
	r38Struck(t, f, d)
	code := d.wait(t, time.Minute)
	if ok, _, err := obs.Exists(oncePath(path, "done")); err != nil || ok {
		t.Fatalf("Exists(record) = %v, %v; want the delete applied", ok, err)
	}
	if code != 1 || !strings.Contains(d.stderr.String(), "may or may not") {
		t.Fatalf("dsync once -reset, its delete applied and its reply lost, -timeout passed: exit %d, stderr %q; "+
			"want 1 and a word that the record may or may not have been deleted", code, d.stderr.String())
	}
}
