package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/syncbuf"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// takeAsync runs take in this process for "dsync NAME ARGS", with the
// waiting line forced on as if stderr were a terminal; its messages go to
// stderr. The returned function waits for take and releases what it took.
func takeAsync(t *testing.T, stderr *syncbuf.Buffer, name string, args ...string) (finish func() error) {
	t.Helper()
	s, err := parse(name, args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	type result struct {
		sess *zkconn.Session
		g    *grant
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sess, g, err := take(ctx, name, s, waitNoticeAfter, stderr)
		done <- result{sess, g, err}
	}()
	var r *result
	finish = func() error {
		if r == nil {
			got := <-done
			r = &got
			cancel()
			if r.g != nil {
				r.g.end(0, false)
				r.sess.Close()
			}
		}
		return r.err
	}
	t.Cleanup(func() { cancel(); finish() })
	return finish
}

// holderOf waits until path has n children and returns the data and session
// of the first in sequence order.
func holderOf(t *testing.T, obs *zk.Conn, path string, n int) (data string, session int64) {
	t.Helper()
	kids := awaitChildren(t, obs, path, n)
	first := slices.MinFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	b, st, err := obs.Get(path + "/" + first)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), st.EphemeralOwner
}

// TestWaitingNotice: forced on (as on a terminal), "dsync lock" says once
// who holds the lock after waitNoticeAfter in line; a dsync whose stderr is
// not a terminal, in line longer, never does.
func TestWaitingNotice(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	unlock := holdMutex(t, path)
	obs := observer(t)
	data, session := holderOf(t, obs, path, 1)

	// First in line, stderr a pipe.
	quiet := start(t, "lock", "-zk", shared.Addr(), path, "--", "true")
	awaitChildren(t, obs, path, 2)
	// Second in line, forced on: it starts waiting after quiet did.
	var stderr syncbuf.Buffer
	finish := takeAsync(t, &stderr, "lock", "-zk", shared.Addr(), path, "--", "true")
	want := fmt.Sprintf("dsync: waiting for %s (held by %s, session 0x%x)\n", path, data, uint64(session))
	if !stderr.Await(want, 30*time.Second) {
		t.Fatalf("stderr = %q; want %q", stderr.String(), want)
	}
	unlock()
	if code := quiet.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync lock exited %d; stderr:\n%s", code, &quiet.stderr)
	}
	if err := finish(); err != nil {
		t.Fatalf("take = %v", err)
	}
	if got := strings.Count(stderr.String(), "waiting for"); got != 1 {
		t.Errorf("stderr = %q: %d waiting lines; want 1", stderr.String(), got)
	}
	// quiet waited from before the other started waiting until after it
	// printed: longer than waitNoticeAfter.
	if got := quiet.stderr.String(); got != "" {
		t.Errorf("dsync lock with stderr not a terminal wrote %q; want nothing", got)
	}
	if !strings.Contains(lockUsage, "after "+waitNoticeAfter.String()) {
		t.Errorf("lockUsage does not say %v", waitNoticeAfter)
	}
}

// TestWaitingNoticeSem: for a semaphore, the line says how many leases are
// held and who holds the first.
func TestWaitingNoticeSem(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	release := holdLeases(t, path, 2, 2)
	data, session := holderOf(t, observer(t), path+"/leases", 2)
	var stderr syncbuf.Buffer
	finish := takeAsync(t, &stderr, "sem", "-max", "2", "-zk", shared.Addr(), path, "--", "true")
	want := fmt.Sprintf("dsync: waiting for %s (2 of 2 leases held, 1 wanted; first holder %s, session 0x%x)\n", path, data, uint64(session))
	if !stderr.Await(want, 30*time.Second) {
		t.Fatalf("stderr = %q; want %q", stderr.String(), want)
	}
	release()
	if err := finish(); err != nil {
		t.Fatalf("take = %v", err)
	}
}

// TestWaitingNoticeElect: for an election, the line says who leads.
func TestWaitingNoticeElect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	sess := dial(t, shared.Addr())
	e := dsync.NewElection(sess, path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Campaign(ctx, "the boss"); err != nil {
		t.Fatal(err)
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	finish := takeAsync(t, &stderr, "elect", "-zk", shared.Addr(), path, "--", "true")
	want := fmt.Sprintf("dsync: waiting for %s (led by the boss, session 0x%x)\n", path, uint64(leader.Session))
	if !stderr.Await(want, 30*time.Second) {
		t.Fatalf("stderr = %q; want %q", stderr.String(), want)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatalf("take = %v", err)
	}
}
