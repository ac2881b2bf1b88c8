package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 38: the dsync command with a reply swallowed on a live
// connection (the tap closes the connection at the next reply).

// r38Struck waits until f has struck, for at most a minute.
func r38Struck(t *testing.T, f *zktest.Fault, p *proc) {
	t.Helper()
	select {
	case <-f.Struck():
	case <-p.done:
		t.Fatalf("dsync exited before the fault struck; stderr:\n%s", &p.stderr)
	case <-time.After(time.Minute):
		t.Fatal("the fault never struck")
	}
}

// TestReviewR38CmdReplySwallowed: "dsync once", "dsync elect" and
// "dsync lock -try", each through a proxy that swallows the reply to one
// request on a live connection (the record's multi, the create of the
// participant's node, the create of the lock node): CMD runs once, dsync
// exits 0, and nothing is left but the once's record.
func TestReviewR38CmdReplySwallowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string // before PATH
		match func(path string) zktest.Match
		once  bool // a once: its record is left, and its lock container
	}{
		{"once-record", []string{"once"}, func(path string) zktest.Match { return zktest.Match{Op: zktest.OpMulti, Path: path + "/done"} }, true},
		{"elect-create", []string{"elect", "-id", "x"}, func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpCreate, Path: path + "/" + zkconn.ProtectedPrefix, Prefix: true}
		}, false},
		{"lock-try-create", []string{"lock", "-try"}, func(path string) zktest.Match {
			return zktest.Match{Op: zktest.OpCreate, Path: path + "/" + zkconn.ProtectedPrefix, Prefix: true}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			obs := observer(t)
			p := zktest.NewProxy(t, shared.Addr())
			f := p.Strike(tc.match(path), zktest.Drop)
			defer f.Disarm()
			args := append(tc.args, "-zk", p.Addr(), "-session-timeout", "3s", path, "--", "sh", "-c", "echo ran")
			d := start(t, args...)
			r38Struck(t, f, d)
			code := d.wait(t, time.Minute)
			if code != 0 || strings.Count(d.stdout.String(), "ran") != 1 {
				t.Fatalf("dsync %s exited %d, stdout %q; want 0 and CMD run once; stderr:\n%s", strings.Join(args, " "), code, d.stdout.String(), &d.stderr)
			}
			if tc.once {
				awaitChildren(t, obs, path+"/lock", 0)
				if kids := children(t, obs, path); !slices.Contains(kids, "done") {
					t.Fatalf("children of %s: %v; want the record, done", path, kids)
				}
				return
			}
			awaitChildren(t, obs, path, 0)
		})
	}
}
