package main

import (
	"net"
	"strings"
	"testing"
)

// Review round 31: -zk forms a user passes today still work after ValidateServers.

// TestReviewR31ZkHostNameAndBadPortBesideGood: -zk with a host name, and an out-of-range port beside a good server, are told apart: the first runs CMD, the second is bad usage.
func TestReviewR31ZkHostNameAndBadPortBesideGood(t *testing.T) {
	t.Parallel()
	_, port, err := net.SplitHostPort(shared.Addr())
	if err != nil {
		t.Fatal(err)
	}
	lock := lockPath(t)
	code, stdout, stderr := dsyncRun(t, "lock", "-try", "-zk", "localhost:"+port, lock, "--", "echo", "ran")
	if code != 0 || !strings.Contains(stdout, "ran") {
		t.Errorf("-zk localhost:%s: exit %d, stdout %q, stderr %s; want CMD run", port, code, stdout, stderr)
	}
	code, _, stderr = dsyncRun(t, "lock", "-try", "-zk", shared.Addr()+",[::1]:70000", lock, "--", "echo", "ran")
	if code != exitUsage || !strings.Contains(stderr, "[::1]:70000") {
		t.Errorf("-zk with [::1]:70000: exit %d, stderr %s; want %d naming the server", code, stderr, exitUsage)
	}
}
