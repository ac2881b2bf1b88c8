package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// r83Unreachable starts "dsync lock ... -- true" with session timeout T
// through a proxy, cuts its release's delete, black-holes the retry on the
// next connection and then closes the proxy (or, blackHole, makes it a
// black hole): dsync is in shutdown's wait, suspended, with no server to
// reach. It returns the process and when the
// retry was struck (the last the server heard of dsync, give or take).
func r83Unreachable(t *testing.T, T time.Duration, blackHole bool) (*proc, time.Time) {
	t.Helper()
	proxy := zktest.NewProxy(t, shared.Addr())
	path := lockPath(t)
	f1 := proxy.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/", Prefix: true}, zktest.Cut)
	p := start(t, "lock", "-zk", proxy.Addr(), "-session-timeout", T.String(), path, "--", "true")
	select {
	case <-f1.Struck():
	case <-p.done:
		t.Fatalf("dsync exited before its release's delete was struck; stderr:\n%s", &p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("the release's delete was not struck within 30s")
	}
	f2 := proxy.Strike(zktest.Match{Op: zktest.OpDelete, Path: path + "/", Prefix: true}, zktest.BlackHole)
	select {
	case <-f2.Struck():
	case <-p.done:
		t.Fatalf("dsync exited before the retry of its release's delete; stderr:\n%s", &p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("the retry of the release's delete was not struck within 30s")
	}
	at := time.Now()
	if blackHole {
		proxy.BlackHole()
	} else {
		proxy.Close()
	}
	return p, at
}

// TestReviewR83ShutdownBound: with no server to reach after the release
// (connections refused, or accepted and never answered), dsync exits once
// its session is given up: about the session timeout after the server last
// heard of it, plus Close's own wait; with CMD's status (0).
func TestReviewR83ShutdownBound(t *testing.T) {
	t.Parallel()
	for _, hole := range []bool{false, true} {
		t.Run(fmt.Sprintf("blackHole=%v", hole), func(t *testing.T) {
			t.Parallel()
			const T = 4 * time.Second
			p, at := r83Unreachable(t, T, hole)
			code := p.wait(t, 30*time.Second)
			d := time.Since(at)
			t.Logf("dsync exited %d, %v after the last contact (session timeout %v); stderr:\n%s", code, d, T, &p.stderr)
			if code != 0 {
				t.Errorf("exit status %d; want CMD's, 0", code)
			}
			if d > T+5*time.Second {
				t.Errorf("dsync exited %v after its last contact with the server; session timeout %v", d, T)
			}
		})
	}
}

// TestReviewR83ShutdownSignals: in shutdown's wait, SIGTSTP stops dsync,
// SIGCONT continues it, SIGPIPE is ignored, and SIGINT ends the wait at
// once; the exit status stays CMD's (0).
func TestReviewR83ShutdownSignals(t *testing.T) {
	t.Parallel()
	const T = 20 * time.Second
	p, _ := r83Unreachable(t, T, false)
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, []int{pid}, "stopped", isStopped)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	awaitState(t, []int{pid}, "running", isRunning)
	if err := p.cmd.Process.Signal(syscall.SIGPIPE); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		t.Fatalf("dsync exited on SIGPIPE/SIGCONT; stderr:\n%s", &p.stderr)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 30*time.Second)
	d := time.Since(start)
	t.Logf("dsync exited %d, %v after SIGINT; stderr:\n%s", code, d, &p.stderr)
	if code != 0 {
		t.Errorf("exit status %d; want CMD's, 0", code)
	}
	if d > 3*time.Second {
		t.Errorf("dsync took %v to exit after SIGINT in shutdown's wait", d)
	}
}
