package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestLockOutlivedByBackgroundChild pins the bug where dsync released the
// lock as soon as CMD exited, while a background child of CMD still ran.
func TestLockOutlivedByBackgroundChild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string // starts a background child, writes its pid to $1/ready, exits
	}{
		{"child dies on SIGTERM", `sleep 60 & echo "$!" > "$1/ready"`},
		{"child ignores SIGTERM", `trap '' TERM; sleep 60 & echo "$!" > "$1/ready"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, dir := lockPath(t), t.TempDir()
			first := start(t, "lock", "-zk", shared.Addr(), "-grace", "200ms", path, "--", "sh", "-c", tt.script, "sh", dir)
			bg := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))[0]
			// The next holder runs CMD the moment it acquires: the background
			// child must be gone by then.
			code, stdout, stderr := dsyncRun(t, "lock", "-timeout", "30s", "-zk", shared.Addr(), path, "--",
				"sh", "-c", `if kill -0 "$1" 2>/dev/null; then echo alive; else echo gone; fi`, "sh", strconv.Itoa(bg))
			if code != 0 || strings.TrimSpace(stdout) != "gone" {
				t.Errorf("next holder: exit %d, saw the background child %q; want 0 and gone; stderr:\n%s", code, stdout, stderr)
			}
			if code := first.wait(t, 30*time.Second); code != 0 {
				t.Errorf("first dsync exited %d; want CMD's 0; stderr:\n%s", code, &first.stderr)
			}
			if want := "CMD exited, leaving processes in its process group"; !strings.Contains(first.stderr.String(), want) {
				t.Errorf("stderr = %q; want it to contain %q", &first.stderr, want)
			}
		})
	}
}

// TestLockLostKillsChildIgnoringSIGTERM pins the bug where the SIGKILL of a
// lost hold was canceled when CMD's first process died of the SIGTERM,
// sparing a child of it that ignores SIGTERM.
func TestLockLostKillsChildIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	dir := t.TempDir()
	p := start(t, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s", "-grace", "300ms", "-exit-lost", "42",
		lockPath(t), "--", "sh", "-c", `(trap '' TERM; exec sleep 60) & echo "$!" > "$1/ready"; wait`, "sh", dir)
	bg := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))[0]
	proxy.BlackHole()
	if code := p.wait(t, 20*time.Second); code != 42 {
		t.Errorf("dsync exited %d; want -exit-lost 42; stderr:\n%s", code, &p.stderr)
	}
	if alive(bg) {
		t.Errorf("the child ignoring SIGTERM outlived dsync; stderr:\n%s", &p.stderr)
	}
	if want := "SIGKILL"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr = %q; want it to say %s", &p.stderr, want)
	}
}

// TestLockLostGroupDeadBeforeOthersAcquire pins the default -grace that
// outlasted the session: after a partition, nobody may take the lock while
// a process of CMD's group (here all ignoring SIGTERM) is alive.
func TestLockLostGroupDeadBeforeOthersAcquire(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	path, dir := lockPath(t), t.TempDir()
	p := start(t, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s",
		path, "--", "sh", "-c", `trap '' TERM; sleep 60 & echo "$$ $!" > "$1/ready"; wait`, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
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
}

// TestLockGraceCheckedAgainstGrantedTimeout: the server grants at most 30s
// (zktest's maxSessionTimeout), so a -grace fine for the 60s asked for is
// rejected before the lock is taken.
func TestLockGraceCheckedAgainstGrantedTimeout(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, _, stderr := dsyncRun(t, "lock", "-zk", shared.Addr(), "-session-timeout", "60s", "-grace", "10s", path, "--", "true")
	if want := "-grace 10s is too long for a session timeout of 30s"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Fatalf("dsync exited %d, stderr %q; want %d and %q", code, stderr, exitUsage, want)
	}
	if kids := awaitChildren(t, observer(t), path, 0); len(kids) != 0 {
		t.Fatalf("nodes left: %v", kids)
	}
}
