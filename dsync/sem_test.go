package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
)

func TestSemLimitsHolders(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	if most := together(t, 3, "sem", "-max", "2", "-zk", shared.Addr(), path); most > 2 {
		t.Fatalf("%d runs held leases at once; want at most 2", most)
	}
	obs := observer(t)
	awaitChildren(t, obs, path+"/leases", 0)
	awaitChildren(t, obs, path+"/locks", 0)
}

// holdLeases acquires n leases of the semaphore of max at path in this
// process, until the test ends or the returned function is called.
func holdLeases(t *testing.T, path string, max, n int64) (release func()) {
	t.Helper()
	w := dsync.NewWeighted(dial(t, shared.Addr()), path, max)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leases, err := w.AcquireLeases(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			for _, l := range leases {
				l.Release()
			}
		}
	}
	t.Cleanup(release)
	return release
}

func TestSemTry(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	release := holdLeases(t, path, 3, 2)
	args := func(n string) []string {
		// CMD outlives the bound on the wait, which leaves a process
		// started on a loaded machine room to dial and try.
		return []string{"sem", "-try", "-timeout", "3s", "-max", "3", "-n", n, "-zk", shared.Addr(), path, "--", "sleep", "3.3"}
	}
	code, _, stderr := dsyncRun(t, args("2")...)
	if want := "dsync: " + path + " is held"; code != exitFail || !strings.Contains(stderr, want) {
		t.Fatalf("dsync sem -try -n 2 with 1 of 3 leases free: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	obs := observer(t)
	awaitChildren(t, obs, path+"/locks", 0)
	awaitChildren(t, obs, path+"/leases", 2)
	if code, _, stderr := dsyncRun(t, args("1")...); code != 0 {
		t.Fatalf("dsync sem -try -n 1 with 1 of 3 leases free: exit %d; stderr:\n%s", code, stderr)
	}
	release()
	awaitChildren(t, obs, path+"/leases", 0) // Lease.Release does not wait for its delete; dsync sem -try is another session
	if code, _, stderr := dsyncRun(t, args("3")...); code != 0 {
		t.Fatalf("dsync sem -try -n 3 with 3 of 3 leases free: exit %d; stderr:\n%s", code, stderr)
	}
}
