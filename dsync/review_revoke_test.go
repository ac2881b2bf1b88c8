package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review of "dsync lock -revocable" and "dsync revoke".

// TestReviewRevokeStubbornCMDThenLost: CMD's group ignores the SIGTERM of a
// revocation request (cooperative: nothing follows it), then the lock is
// lost. The loss still terminates the group, with SIGKILL after -grace, and
// nobody else gets the lock while a process of it lives.
func TestReviewRevokeStubbornCMDThenLost(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	path, dir := lockPath(t), t.TempDir()
	p := start(t, "lock", "-revocable", "-zk", proxy.Addr(), "-session-timeout", "2s",
		path, "--", "sh", "-c", `trap '' TERM; sleep 60 & echo "$$ $!" > "$1/ready"; wait`, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	if code, _, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), path); code != 0 {
		t.Fatalf("dsync revoke exited %d; stderr:\n%s", code, stderr)
	}
	if !p.stderr.Await("revocation of the lock on", 30*time.Second) {
		t.Fatalf("no revocation message; stderr:\n%s", &p.stderr)
	}
	for _, pid := range ps {
		if !alive(pid) {
			t.Fatalf("process %d of CMD's group died of a SIGTERM it ignores", pid)
		}
	}
	m := dsync.NewMutex(dial(t, shared.Addr()), path)
	proxy.BlackHole()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range ps {
		if alive(pid) {
			t.Errorf("acquired while process %d of CMD's group was alive", pid)
		}
	}
	m.Unlock()
	if code := p.wait(t, 20*time.Second); code != exitLost {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, exitLost, &p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "SIGKILL") {
		t.Errorf("stderr = %q; want the loss's SIGKILL", &p.stderr)
	}
}

// TestReviewRevokeNodeOfWaiterThenNextHolder: "dsync revoke NODE" on the node of
// a dsync lock -revocable that waits; the holder ahead releases; CMD never
// starts, and the lock is released (the next waiter gets it).
func TestReviewRevokeNodeOfWaiterThenNextHolder(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t)
	unlock := holdMutex(t, path)
	marker := filepath.Join(t.TempDir(), "ran")
	p := start(t, "lock", "-revocable", "-zk", shared.Addr(), path, "--", "touch", marker)
	node := path + "/" + inLine(awaitChildren(t, obs, path, 2))[1]
	next := dsync.NewMutex(dial(t, shared.Addr()), path)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := next.LockContext(ctx)
		got <- err
	}()
	awaitChildren(t, obs, path, 3)
	if code, _, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), node); code != 0 {
		t.Fatalf("dsync revoke NODE exited %d; stderr:\n%s", code, stderr)
	}
	unlock()
	if code := p.wait(t, 30*time.Second); code != exitFail {
		t.Fatalf("dsync lock exited %d; want 1; stderr:\n%s", code, &p.stderr)
	}
	if err := <-got; err != nil {
		t.Fatalf("next waiter: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran after a request made while it waited")
	}
	next.Unlock()
	awaitChildren(t, obs, path, 0)
}
