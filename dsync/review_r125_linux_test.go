package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR125CmdNotFoundFirst: a CMD that is not there is found out
// before dsync dials, not after it queued for the lock and waited for it.
func TestReviewR125CmdNotFoundFirst(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t)
	m := dsync.NewMutex(dial(t, shared.Addr()), path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	missing := filepath.Join(t.TempDir(), "no-such-cmd")
	p := start(t, "lock", "-zk", shared.Addr(), path, "--", missing)
	deadline := time.After(30 * time.Second)
wait:
	for {
		kids, _, ev, err := obs.ChildrenW(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) >= 2 {
			t.Fatalf("dsync lock -- %s (no such file) queued for the lock instead of failing before it dialed", missing)
		}
		select {
		case <-p.done:
			break wait
		case <-ev:
		case <-deadline:
			t.Fatal("dsync neither queued nor exited within 30s")
		}
	}
	if code := p.wait(t, 30*time.Second); code != exitNotFound || !strings.Contains(p.stderr.String(), missing) {
		t.Errorf("dsync exited %d, stderr %q; want %d and a message naming %s", code, &p.stderr, exitNotFound, missing)
	}
}

// TestReviewR125SIGSTOPedDsync: SIGSTOP, which dsync cannot catch, stops
// dsync alone; its session expires and another dsync takes the lock. When
// the first is continued, its loss is final already (the session is gone,
// the next in line holds): CMD's group gets SIGKILL at once, not SIGTERM and
// the grace period.
func TestReviewR125SIGSTOPedDsync(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	p := start(t, "lock", "-zk", shared.Addr(), "-session-timeout", "2s", path, "--",
		"sh", "-c", `trap '' TERM; echo $$ > "$1/ready"; while :; do sleep 0.2; done`, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	awaitChildren(t, obs, path, 1)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	awaitState(t, []int{p.cmd.Process.Pid}, "stopped", isStopped)
	awaitChildren(t, obs, path, 0) // dsync's session expired

	q := start(t, "lock", "-zk", shared.Addr(), path, "--", "sh", "-c", `echo $$ > "$1/ready2"; exec sleep 60`, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready2"), 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitLost {
		t.Errorf("first dsync exited %d; want %d; stderr:\n%s", code, exitLost, &p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "the next in line may hold already: SIGKILL to CMD's process group") {
		t.Errorf("continued after its session expired, dsync did not SIGKILL CMD's group at once; stderr:\n%s", &p.stderr)
	}
	if err := q.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := q.wait(t, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("second dsync exited %d; stderr:\n%s", code, &q.stderr)
	}
}

// TestReviewR125NodeDeletedKillsAtOnce: when the lock node is deleted
// behind dsync's back, the next in line holds at once: CMD's group gets
// SIGKILL at once, not the grace period, which is sized against a session's
// expiry.
func TestReviewR125NodeDeletedKillsAtOnce(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	p := start(t, "lock", "-zk", shared.Addr(), path, "--",
		"sh", "-c", `trap '' TERM; echo $$ > "$1/ready"; while :; do sleep 0.2; done`, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	kids := awaitChildren(t, obs, path, 1)
	if err := obs.Delete(path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitLost {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, exitLost, &p.stderr)
	}
	if want := "deleted; the next in line may hold already: SIGKILL to CMD's process group"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant it to contain %q", &p.stderr, want)
	}
}

// TestReviewR125OnceToken: once's CMD gets DSYNC_TOKEN, the fencing token
// of the run's lock, as doc.go and "dsync help once" say.
func TestReviewR125OnceToken(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := dsyncRun(t, "once", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", `echo "$DSYNC_TOKEN"`)
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64); err != nil || n <= 0 {
		t.Errorf("once's CMD got DSYNC_TOKEN %q; want a positive token", strings.TrimSpace(stdout))
	}
}

// TestReviewR125OnceIgnoreLossRecorded: with -lost ignore, a run whose lock
// was lost on a dropped connection, and held again on the same session (the
// node still there), records its success, as doc.go says: the record's
// transaction checks the node.
func TestReviewR125OnceIgnoreLossRecorded(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	path, dir := lockPath(t), t.TempDir()
	p := start(t, "once", "-lost", "ignore", "-zk", proxy.Addr(), path, "--",
		"sh", "-c", `echo $$ > "$1/ready"; while [ ! -e "$1/go" ]; do sleep 0.05; done`, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	proxy.Cut()
	if !p.stderr.Await("CMD keeps running (-lost ignore)", 30*time.Second) {
		t.Fatalf("no loss warning; stderr:\n%s", &p.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 30*time.Second)
	_, status, _ := dsyncRun(t, "once", "-status", "-zk", shared.Addr(), path)
	if code != 0 || !strings.HasPrefix(status, "done") {
		t.Errorf("exit %d, -status %q; want 0 and done; stderr:\n%s", code, status, &p.stderr)
	}
}

// TestReviewR125TLSSilentServer: a server that accepts the TCP connection
// and never answers the TLS handshake: -dial-timeout (and -timeout) bound
// the command, not the handshake's own timeout (a third of the session
// timeout, 10s here).
func TestReviewR125TLSSilentServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	files, err := zktest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][]string{
		{"lock", "-dial-timeout", "1s", "-session-timeout", "30s"},
		{"lock", "-timeout", "1s", "-session-timeout", "30s"},
		{"ls", "-timeout", "1s", "-session-timeout", "30s"},
	} {
		argv := append(tc, "-zk", ln.Addr().String(), "-tls-ca", files.CA, lockPath(t))
		if tc[0] == "lock" {
			argv = append(argv, "--", "true")
		}
		began := time.Now()
		p := start(t, argv...)
		code := p.wait(t, time.Minute)
		if d := time.Since(began); code != exitFail || d > 8*time.Second {
			t.Errorf("%q: exit %d after %v; want 1 within the 1s bound (well before the 10s handshake timeout); stderr %q", tc, code, d, &p.stderr)
		}
	}
}

// TestReviewR125ReadersCreateNothing: the commands that only read (ls, once
// -status, revoke of nobody) leave no node behind on a path nobody used.
func TestReviewR125ReadersCreateNothing(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	for _, argv := range [][]string{{"ls"}, {"once", "-status"}, {"revoke"}} {
		base := lockPath(t)
		path := base + "/a/b"
		dsyncRun(t, append(append([]string{argv[0], "-zk", shared.Addr()}, argv[1:]...), path)...)
		for p := path; p != filepath.Dir(base); p = filepath.Dir(p) {
			if ok, _, err := obs.Exists(p); err != nil || ok {
				t.Errorf("%q left %s behind (err %v)", argv, p, err)
			}
		}
	}
}
