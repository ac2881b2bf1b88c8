package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/internal/curator"
)

// lsRows runs dsync ls on path and returns the rows of its table (each
// split into ROLE, NODE, SESSION, AGE, DATA; DATA may hold spaces).
func lsRows(t *testing.T, path string) [][]string {
	t.Helper()
	code, stdout, stderr := dsyncRun(t, "ls", "-zk", shared.Addr(), path)
	if code != 0 {
		t.Fatalf("dsync ls exited %d; stderr:\n%s", code, stderr)
	}
	t.Logf("dsync ls %s:\n%s", path, stdout)
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "ROLE NODE SESSION AGE DATA" {
		t.Fatalf("header = %q; want ROLE NODE SESSION AGE DATA", lines[0])
	}
	var rows [][]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("row %q has %d columns; want 5", l, len(f))
		}
		rows = append(rows, append(f[:4:4], strings.Join(f[4:], " ")))
	}
	return rows
}

func TestLsCuratorHolderAndWaiter(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := java.Hold(ctx, curator.Mutex, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	select {
	case <-h.Acquired():
	case <-time.After(time.Minute):
		t.Fatal("Curator did not acquire within 1m")
	}
	waiter := start(t, "lock", "-zk", shared.Addr(), path, "--", "true")
	awaitChildren(t, observer(t), path, 2)

	rows := lsRows(t, path)
	if len(rows) != 2 {
		t.Fatalf("dsync ls listed %d rows; want 2: %q", len(rows), rows)
	}
	holder, w := rows[0], rows[1]
	if holder[0] != "holder" || path+"/"+holder[1] != h.Node() {
		t.Errorf("first row %q; want the holder %s", holder, h.Node())
	}
	if net.ParseIP(holder[4]) == nil {
		t.Errorf("holder data %q; want Curator's IP address", holder[4])
	}
	if !strings.HasPrefix(holder[2], "0x") || holder[2] == w[2] {
		t.Errorf("sessions %q and %q; want two hex sessions", holder[2], w[2])
	}
	wantData := fmt.Sprintf("pid=%d", waiter.cmd.Process.Pid)
	if w[0] != "waiter" || !strings.HasSuffix(w[4], wantData) || !strings.HasPrefix(w[1], "_c_") {
		t.Errorf("second row %q; want a dsync waiter with data ending in %q", w, wantData)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync lock exited %d after Curator released; stderr:\n%s", code, &waiter.stderr)
	}
}

func TestLsSemaphore(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	holdLeases(t, path, 1, 1)
	waiter := start(t, "sem", "-max", "1", "-zk", shared.Addr(), path, "--", "true")
	obs := observer(t)
	awaitChildren(t, obs, path+"/leases", 2) // the waiter's lease waits for room
	awaitChildren(t, obs, path+"/locks", 1)

	rows := lsRows(t, path)
	if len(rows) != 3 {
		t.Fatalf("dsync ls listed %d rows; want 3: %q", len(rows), rows)
	}
	wantData := fmt.Sprintf("pid=%d", os.Getpid())
	if r := rows[0]; r[0] != "holder" || !strings.HasPrefix(r[1], "leases/_c_") || !strings.HasSuffix(r[4], wantData) {
		t.Errorf("row 0 = %q; want this process's lease as holder", r)
	}
	wantData = fmt.Sprintf("pid=%d", waiter.cmd.Process.Pid)
	if r := rows[1]; r[0] != "waiter" || !strings.HasPrefix(r[1], "leases/_c_") || !strings.HasSuffix(r[4], wantData) {
		t.Errorf("row 1 = %q; want the dsync waiter's lease", r)
	}
	if r := rows[2]; r[0] != "waiter" || !strings.HasPrefix(r[1], "locks/_c_") || !strings.HasSuffix(r[4], wantData) {
		t.Errorf("row 2 = %q; want the dsync waiter's internal lock node", r)
	}
}

func TestLsNobody(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, stdout, stderr := dsyncRun(t, "ls", "-zk", shared.Addr(), path)
	if want := "no holders or waiters at " + path; code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("dsync ls on a missing path: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
	}
	// An existing path with nobody in it (the container is not reaped yet).
	if code, _, stderr := dsyncRun(t, "lock", "-zk", shared.Addr(), path, "--", "true"); code != 0 {
		t.Fatalf("dsync lock exited %d; stderr:\n%s", code, stderr)
	}
	code, stdout, _ = dsyncRun(t, "ls", "-zk", shared.Addr(), path)
	if want := "no holders or waiters at " + path; code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("dsync ls on an empty path: exit %d, stdout %q; want 0 and %q", code, stdout, want)
	}
}

// TestLsReadWrite lists a read/write lock: two Curator readers hold, a
// Curator writer waits behind them, and a reader behind the writer waits.
func TestLsReadWrite(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs := observer(t)
	hold := func(kind string, n int) {
		t.Helper()
		h, err := java.Hold(ctx, kind, shared.Addr(), path, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Kill)
		awaitChildren(t, obs, path, n)
	}
	hold(curator.Read, 1)
	hold(curator.Read, 2)
	hold(curator.Write, 3)
	hold(curator.Read, 4)
	rows := lsRows(t, path)
	var got []string
	for _, r := range rows {
		kind := "W"
		if strings.Contains(r[1], "__READ__") {
			kind = "R"
		}
		got = append(got, r[0]+" "+kind)
	}
	if want := "[holder R holder R waiter W waiter R]"; fmt.Sprint(got) != want {
		t.Fatalf("dsync ls rows = %v; want %s", got, want)
	}
}
