package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/go-zookeeper/zk"
)

// inLine returns the children of a mutex path in queue order.
func inLine(kids []string) []string {
	out := slices.Clone(kids)
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(a[strings.LastIndex(a, "lock-"):], b[strings.LastIndex(b, "lock-"):])
	})
	return out
}

// dataOf reads node's data with obs.
func dataOf(t *testing.T, obs *zk.Conn, node string) string {
	t.Helper()
	data, _, err := obs.Get(node)
	if err != nil {
		t.Fatalf("Get(%s) = %v", node, err)
	}
	return string(data)
}

// TestLockRevocable: dsync revoke on the path of a dsync lock -revocable
// sends SIGTERM to CMD, which exits; the lock is released.
func TestLockRevocable(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	dir := t.TempDir()
	obs := observer(t)
	p := start(t, "lock", "-revocable", "-zk", shared.Addr(), path, "--", "sh", "-c", trapScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	node := path + "/" + children(t, obs, path)[0]
	if got := dataOf(t, obs, node); got != "" {
		t.Errorf("revocable node data = %q; want none", got)
	}

	code, stdout, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), path)
	if code != 0 || !strings.HasPrefix(stdout, "asked "+node+" (session 0x") {
		t.Fatalf("dsync revoke: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, "asked "+node)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync lock exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
	}
	if want := "dsync: revocation of the lock on " + path + " requested: SIGTERM to CMD's process group"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr = %q; want %q", &p.stderr, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || string(b) != "term\n" {
		t.Fatalf("marker = %q, %v; want CMD's trap to have run", b, err)
	}
	awaitChildren(t, obs, path, 0)
}

// stubbornScript records SIGTERM in $1/marker and goes on until $1/go
// exists, then exits 5; it writes $1/ready first.
const stubbornScript = `trap 'echo term >> "$1/marker"' TERM
echo ready > "$1/ready"
while [ ! -e "$1/go" ]; do sleep 0.05; done
exit 5`

// TestLockRevocableCooperative: a request is only a request: CMD that
// carries on after SIGTERM keeps the lock (no SIGKILL follows, even after
// -grace), and dsync exits with CMD's status.
func TestLockRevocableCooperative(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	dir := t.TempDir()
	p := start(t, "lock", "-revocable", "-grace", "1ms", "-zk", shared.Addr(), path, "--", "sh", "-c", stubbornScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	if code, _, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), path); code != 0 {
		t.Fatalf("dsync revoke exited %d; stderr:\n%s", code, stderr)
	}
	if !p.stderr.Await("revocation of the lock on", 30*time.Second) {
		t.Fatalf("no revocation message; stderr:\n%s", &p.stderr)
	}
	// Still held, well past -grace: -try fails.
	if code, _, stderr := dsyncRun(t, "lock", "-try", "-zk", shared.Addr(), path, "--", "true"); code != exitFail {
		t.Fatalf("dsync lock -try after the request: exit %d; want 1; stderr:\n%s", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 5 {
		t.Fatalf("dsync lock exited %d; want CMD's 5 (not killed); stderr:\n%s", code, &p.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || string(b) != "term\n" {
		t.Errorf("marker = %q, %v; want one SIGTERM", b, err)
	}
}

// TestLockRevokedWhileWaiting: a request written into the node of a
// dsync lock -revocable that still waits keeps CMD from starting once it
// holds: dsync releases and exits 1.
func TestLockRevokedWhileWaiting(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	unlock := holdMutex(t, path)
	obs := observer(t)
	marker := filepath.Join(t.TempDir(), "ran")
	p := start(t, "lock", "-revocable", "-zk", shared.Addr(), path, "--", "touch", marker)
	node := path + "/" + inLine(awaitChildren(t, obs, path, 2))[1]
	code, stdout, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), node)
	if code != 0 || stdout != "asked "+node+"\n" {
		t.Fatalf("dsync revoke NODE: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, "asked "+node)
	}
	unlock()
	if code := p.wait(t, 30*time.Second); code != exitFail {
		t.Fatalf("dsync lock exited %d; want 1; stderr:\n%s", code, &p.stderr)
	}
	if want := "requested before CMD started"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr = %q; want %q", &p.stderr, want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran after a request made before it started")
	}
	awaitChildren(t, obs, path, 0)
}

// TestRevokeNotRevocable: dsync revoke leaves a holder that is not
// revocable alone (its node keeps its data) and exits 1.
func TestRevokeNotRevocable(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	dir := t.TempDir()
	obs := observer(t)
	p := start(t, "lock", "-zk", shared.Addr(), path, "--", "sh", "-c", waitScript, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	node := path + "/" + children(t, obs, path)[0]
	before := dataOf(t, obs, node)
	code, stdout, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), path)
	if code != exitFail || stdout != "" || !strings.Contains(stderr, "not revocable") {
		t.Fatalf("dsync revoke of a holder that is not revocable: exit %d, stdout %q, stderr %q; want 1, nothing, and \"not revocable\"", code, stdout, stderr)
	}
	if after := dataOf(t, obs, node); after != before {
		t.Errorf("node data %q after dsync revoke; want %q kept", after, before)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 5 {
		t.Fatalf("dsync lock exited %d; want CMD's 5; stderr:\n%s", code, &p.stderr)
	}
}

// TestRevokeNobody: dsync revoke exits 1 when nobody holds PATH and when
// the node it names does not exist.
func TestRevokeNobody(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, stdout, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), path)
	if want := "dsync: nobody holds " + path; code != exitFail || stdout != "" || !strings.Contains(stderr, want) {
		t.Errorf("dsync revoke of a free path: exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}
	node := path + "/_c_00000000-0000-4000-8000-000000000000-lock-0000000001"
	code, stdout, stderr = dsyncRun(t, "revoke", "-zk", shared.Addr(), node)
	if want := "dsync: no such node: " + node; code != exitFail || stdout != "" || !strings.Contains(stderr, want) {
		t.Errorf("dsync revoke of a missing node: exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}
}

// TestRevokeSemaphore: dsync revoke on a semaphore path asks the lease
// holder (a revocable SemaphoreMutex here).
func TestRevokeSemaphore(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	m := dsync.NewSemaphoreMutex(dial(t, shared.Addr()), path, dsync.Revocable())
	m.Lock()
	defer m.Unlock()
	lease := path + "/leases/" + children(t, observer(t), path+"/leases")[0]
	code, stdout, stderr := dsyncRun(t, "revoke", "-zk", shared.Addr(), path)
	if code != 0 || !strings.HasPrefix(stdout, "asked "+lease+" ") {
		t.Fatalf("dsync revoke of a semaphore: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, "asked "+lease)
	}
	select {
	case <-m.Revoked():
	case <-time.After(30 * time.Second):
		t.Fatal("the holder's Revoked not closed within 30s")
	}
}

func TestRevokeUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"revoke"}, "missing PATH"},
		{[]string{"revoke", "/x", "/y"}, `unexpected argument "/y"`},
		{[]string{"revoke", "x"}, "must start with /"},
		{[]string{"revoke", "-try", "/x"}, "flag provided but not defined: -try"},
		{[]string{"sem", "-revocable", "-max", "1", "/x", "--", "true"}, "flag provided but not defined: -revocable"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("dsync %q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
	for _, args := range [][]string{{"help", "revoke"}, {"revoke", "-h"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		for _, want := range []string{"usage: dsync revoke [flags] PATH", "__REVOKE__", "Exit status"} {
			if code != 0 || !strings.Contains(stdout.String(), want) {
				t.Errorf("dsync %q: exit %d, stdout %q; want 0 and %q", args, code, stdout.String(), want)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"lock", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "-revocable") {
		t.Errorf("dsync lock -h: exit %d; want 0 and -revocable in %q", code, stdout.String())
	}
}

// children lists path's children with obs.
func children(t *testing.T, obs *zk.Conn, path string) []string {
	t.Helper()
	kids, _, err := obs.Children(path)
	if err != nil {
		t.Fatalf("Children(%s) = %v", path, err)
	}
	return kids
}
