package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR82StoppedWaiterStaleGrant: dsync lock B waits in line behind A
// and is stopped (SIGTSTP, which acquire handles by stopping itself). While
// it is stopped, A releases: the notification that B's predecessor, index
// 0 at B's last listing, is gone reaches B's socket, and then the server
// hears nothing more of B (the proxy is deaf from then on). B's session
// expires and the next waiter C takes the lock. Continued, B must not take
// that stale notification for the lock and start CMD while C holds: the
// library re-reads a node won on a notification once the connection has
// changed, and the connection's timers notice that it is dead.
func TestReviewR82StoppedWaiterStaleGrant(t *testing.T) {
	t.Parallel()
	const T = 2 * time.Second
	proxy := zktest.NewProxy(t, shared.Addr())
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	unlockA := holdMutex(t, path)
	ready := filepath.Join(dir, "ready")
	p := start(t, "lock", "-zk", proxy.Addr(), "-session-timeout", T.String(), "-timeout", "12s",
		path, "--", "sh", "-c", `echo "$$" > "$1/ready"; exec sleep 60`, "sh", dir)
	awaitChildren(t, obs, path, 2)

	// C waits behind B.
	c := dsync.NewMutex(dial(t, shared.Addr()), path)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.LockContext(ctx)
		got <- err
	}()
	awaitChildren(t, obs, path, 3)

	if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, []int{p.cmd.Process.Pid}, "stopped", isStopped)
	proxy.Deafen() // B's requests and pings go nowhere; notifications reach it
	unlockA()      // B's predecessor is gone: the notification is on its way to B
	// B's session expires (B is stopped); C holds.
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("C: LockContext = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("C not granted within 30s")
	}
	defer c.Unlock()
	if _, err := os.Stat(ready); err == nil {
		t.Fatal("B's CMD ran while B was stopped")
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 40*time.Second)
	t.Logf("B exited %d; stderr:\n%s", code, &p.stderr)
	if _, err := os.Stat(ready); err == nil {
		t.Errorf("B's CMD started after B's session had expired, while C held the lock (dsync exited %d)", code)
	}
}

// TestReviewR82ReleaseDeleteCut: the delete of the release (dsync lock's
// Unlock, dsync sem's lease Release, dsync elect's Resign, the unlock of
// dsync once's run) is cut: the connection closes before the delete
// reaches the server. dsync must not exit leaving the node for the server
// to expire with the session (every waiter would wait that long): it used
// to Close its Session at once, which with the connection down sends no
// closeSession; it now waits (Shutdown) for the next connection, where the
// delete goes out again.
func TestReviewR82ReleaseDeleteCut(t *testing.T) {
	t.Parallel()
	const T = 10 * time.Second
	for _, tc := range []struct {
		name string
		args []string
		del  func(path string) string // prefix of the release's delete
		kids func(path string) string // where the node lives
	}{
		{"lock", nil, func(p string) string { return p + "/" }, func(p string) string { return p }},
		{"elect", nil, func(p string) string { return p + "/" }, func(p string) string { return p }},
		{"sem", []string{"-max", "1"}, func(p string) string { return p + "/leases/" }, func(p string) string { return p + "/leases" }},
		{"once", nil, func(p string) string { return p + "/lock/" }, func(p string) string { return p + "/lock" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := zktest.NewProxy(t, shared.Addr())
			path := lockPath(t)
			obs := observer(t)
			f := proxy.Strike(zktest.Match{Op: zktest.OpDelete, Path: tc.del(path), Prefix: true}, zktest.Cut)
			args := append([]string{tc.name, "-zk", proxy.Addr(), "-session-timeout", T.String()}, tc.args...)
			p := start(t, append(args, path, "--", "true")...)
			code := p.wait(t, 30*time.Second)
			exited := time.Now()
			select {
			case <-f.Struck():
			default:
				t.Fatalf("the release's delete was not struck; dsync exited %d, stderr:\n%s", code, &p.stderr)
			}
			awaitChildren(t, obs, tc.kids(path), 0)
			d := time.Since(exited)
			t.Logf("dsync %s exited %d; its node outlived it by %v; stderr:\n%s", tc.name, code, d, &p.stderr)
			if d > T/2 {
				t.Errorf("dsync %s exited %d, and its node outlived it by %v (session timeout %v): the next in line waits that long", tc.name, code, d, T)
			}
		})
	}
}
