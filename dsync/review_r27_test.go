package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReviewR27ChrootInZkRejected pins a -zk in the connect-string form of
// Curator and ZooKeeper, "host:port,host:port/chroot": dsync took it as two
// servers, and since the last one's port "PORT/chroot" is no port, it locked
// PATH through the first in the root namespace, outside the chroot where a
// Curator peer given the same string locks PATH: both held it. dsync must
// reject such a -zk as bad usage (exit 2) before it dials, or honour the
// chroot (then -try finds PATH held: exit 1); never run CMD. A server whose
// port is out of range is bad usage too, not "no ZooKeeper server answered"
// after -dial-timeout.
func TestReviewR27ChrootInZkRejected(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	chroot := fmt.Sprintf("/dsync-r27-chroot-%d", time.Now().UnixNano())
	// A container: the server removes it once Curator's nodes in it are gone.
	if _, err := obs.CreateContainer(chroot, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	lock := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := java.Hold(ctx, curator.Mutex, shared.Addr()+chroot, lock, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	select {
	case <-h.Acquired():
	case <-time.After(time.Minute):
		t.Fatal("Curator did not acquire within 1m")
	}

	held := "dsync: " + lock + " is held"
	for _, connect := range []string{shared.Addr() + "," + shared.Addr() + chroot, shared.Addr() + chroot} {
		code, stdout, stderr := dsyncRun(t, "lock", "-try", "-dial-timeout", "3s", "-zk", connect, lock, "--", "echo", "ran")
		t.Logf("dsync lock -try -zk %s: exit %d, stdout %q, stderr:\n%s", connect, code, stdout, stderr)
		if strings.Contains(stdout, "ran") {
			t.Errorf("-zk %s: CMD ran while Curator, given the same connect string, holds %s", connect, lock)
		}
		if !(code == exitUsage || code == exitFail && strings.Contains(stderr, held)) {
			t.Errorf("-zk %s: dsync exited %d; want %d (bad usage), or 1 and %q (chroot honoured)", connect, code, exitUsage, held)
		}
	}
	const badPort = "127.0.0.1:99999"
	code, _, stderr := dsyncRun(t, "lock", "-dial-timeout", "3s", "-zk", badPort, lock, "--", "true")
	t.Logf("dsync lock -zk %s: exit %d, stderr:\n%s", badPort, code, stderr)
	if code != exitUsage {
		t.Errorf("-zk %s: dsync exited %d; want %d (bad usage, before dialing)", badPort, code, exitUsage)
	}
}

// r27Loss runs "dsync NAME ARGS... PATH -- CMD" through a proxy with a
// session timeout of 4s (so a grace period of 1s), with CMD a shell whose
// background child ignores SIGTERM; once CMD runs, it applies fault to the
// proxy and checks that dsync exits -exit-lost (42) no later than within
// after it, says the hold was lost, and leaves no process of CMD's group behind.
func r27Loss(t *testing.T, fault func(*zktest.Proxy), within time.Duration, name string, args ...string) {
	t.Helper()
	proxy := zktest.NewProxy(t, shared.Addr())
	dir := t.TempDir()
	argv := append([]string{name, "-zk", proxy.Addr(), "-session-timeout", "4s", "-exit-lost", "42"}, args...)
	argv = append(argv, "--", "sh", "-c", `(trap '' TERM; exec sleep 60) & echo "$$ $!" > "$1/ready"; wait`, "sh", dir)
	p := start(t, argv...)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	begin := time.Now()
	fault(proxy)
	if code := p.wait(t, 20*time.Second); code != 42 {
		t.Errorf("dsync %s exited %d; want -exit-lost 42; stderr:\n%s", name, code, &p.stderr)
	}
	if d := time.Since(begin); d > within {
		t.Errorf("dsync %s exited %v after the fault; want within %v; stderr:\n%s", name, d, within, &p.stderr)
	}
	if !strings.Contains(p.stderr.String(), " lost") {
		t.Errorf("stderr = %q; want it to say the hold was lost", &p.stderr)
	}
	for _, pid := range ps {
		if alive(pid) {
			t.Errorf("process %d of CMD's group outlived dsync %s; stderr:\n%s", pid, name, &p.stderr)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestReviewR27ConnectionLossEndsCMD pins a connection closed under a CMD
// that runs (Proxy.Cut: the client reconnects at once, within the session)
// or gone silent (BlackHole) as a loss for every subcommand that holds:
// CMD's group is ended within the grace period of the loss's detection,
// dsync exits -exit-lost and says so.
func TestReviewR27ConnectionLossEndsCMD(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name   string
		fault  func(*zktest.Proxy)
		within time.Duration // detection + grace (1s) + slack
	}{
		{"Cut", (*zktest.Proxy).Cut, 4 * time.Second},
		{"BlackHole", (*zktest.Proxy).BlackHole, 8 * time.Second}, // noticed 2T/3 = 2.7s after the last reply
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"lock", nil},
		{"sem", []string{"-max", "2", "-n", "2"}},
		{"elect", nil},
		{"elect", []string{"-selector"}},
		{"once", nil},
	} {
		for _, f := range faults {
			t.Run(f.name+" "+strings.Join(append([]string{tt.name}, tt.args...), " "), func(t *testing.T) {
				t.Parallel()
				r27Loss(t, f.fault, f.within, tt.name, append(tt.args, lockPath(t))...)
			})
		}
	}
}

// TestReviewR27TimeoutWhileSilent pins -timeout for every command when its
// first request on PATH gets no reply: swallowed on a connection that stays
// up (zktest Drop: go-zookeeper has no timeout of its own for it, and the
// Session gives it up only a session timeout later), or lost
// in a partition (BlackHole, which go-zookeeper notices only after 2/3 of
// the 30s session timeout). dsync exits 1 promptly after -timeout, says it
// timed out, and (Drop) leaves no node at PATH.
func TestReviewR27TimeoutWhileSilent(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	tests := []struct {
		name string
		args func(path string) []string
		node string // where no node may be left, relative to PATH
		want string // on stderr
	}{
		{"lock", func(p string) []string { return []string{"lock", p, "--", "true"} }, "", "timed out waiting for"},
		{"lock -try", func(p string) []string { return []string{"lock", "-try", p, "--", "true"} }, "", "timed out waiting for"},
		{"sem", func(p string) []string { return []string{"sem", "-max", "2", "-n", "2", p, "--", "true"} }, "/leases", "timed out waiting for"},
		{"elect", func(p string) []string { return []string{"elect", p, "--", "true"} }, "", "timed out waiting for"},
		{"once", func(p string) []string { return []string{"once", p, "--", "true"} }, "/lock", "timed out waiting for"},
		{"once -status", func(p string) []string { return []string{"once", "-status", p} }, "", "timed out reading"},
		{"once -reset", func(p string) []string { return []string{"once", "-reset", p} }, "", "timed out resetting"},
		{"ls", func(p string) []string { return []string{"ls", p} }, "", "timed out listing"},
		{"revoke", func(p string) []string { return []string{"revoke", p} }, "", "timed out asking"},
	}
	for _, action := range []zktest.Action{zktest.Drop, zktest.BlackHole} {
		for _, tt := range tests {
			t.Run(action.String()+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				proxy := zktest.NewProxy(t, shared.Addr())
				f := proxy.Strike(zktest.Match{Path: path, Prefix: true}, action)
				sub := tt.args(path)
				args := append([]string{sub[0], "-zk", proxy.Addr(), "-session-timeout", "30s", "-timeout", timeout.String()}, sub[1:]...)
				begin := time.Now()
				p := start(t, args...)
				code := p.wait(t, time.Minute)
				d := time.Since(begin)
				select {
				case <-f.Struck():
				default:
					t.Errorf("no request on %s was struck", path)
				}
				t.Logf("dsync %q: exit %d after %v; stderr:\n%s", args, code, d, &p.stderr)
				if code != exitFail || !strings.Contains(p.stderr.String(), tt.want) {
					t.Errorf("exit %d, stderr %q; want 1 and %q", code, &p.stderr, tt.want)
				}
				if d > timeout+3*time.Second {
					t.Errorf("dsync took %v with -timeout %v", d, timeout)
				}
				if action != zktest.Drop {
					return // the partitioned session, and any node of it, lasts until it expires
				}
				obs := observer(t)
				if kids := awaitChildren(t, obs, path+tt.node, 0); len(kids) > 0 {
					t.Errorf("nodes left at %s: %v", path+tt.node, kids)
				}
			})
		}
	}
}

// TestReviewR27TryBoundedByGrantedTimeout pins the bound of -try's requests
// (take: "bound them as TryLock does", and TryLock takes the session timeout
// the server granted): with a -session-timeout far above the server's
// maximum (4s here) and the network silent from -try's first request on
// PATH on (that request, and every connection after it, in a black hole), a
// "dsync lock -try" must give up about 4s later, not after the hour asked for.
func TestReviewR27TryBoundedByGrantedTimeout(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(4*time.Second))
	proxy := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	f := proxy.Strike(zktest.Match{Path: path, Prefix: true}, zktest.BlackHole)
	p := start(t, "lock", "-try", "-zk", proxy.Addr(), "-session-timeout", "1h", path, "--", "true")
	select {
	case <-f.Struck():
	case <-time.After(30 * time.Second):
		t.Fatal("no request on PATH within 30s")
	}
	proxy.BlackHole() // reconnections too
	begin := time.Now()
	code := p.wait(t, 20*time.Second)
	t.Logf("dsync lock -try exited %d %v after the partition; stderr:\n%s", code, time.Since(begin), &p.stderr)
	if code != exitFail {
		t.Errorf("dsync lock -try exited %d; want 1", code)
	}
}

// TestReviewR27NestedSemHasNoOuterToken pins "dsync sem"'s CMD environment
// (semUsage: "DSYNC_TOKEN is not set") when dsync runs under another dsync:
// CMD must not see the enclosing lock's DSYNC_TOKEN next to the semaphore's
// DSYNC_PATH, as if it were the semaphore's fencing token.
func TestReviewR27NestedSemHasNoOuterToken(t *testing.T) {
	t.Parallel()
	outer, inner := lockPath(t)+"-outer", lockPath(t)+"-inner"
	code, stdout, stderr := dsyncRun(t, "lock", "-zk", shared.Addr(), outer, "--",
		bin, "sem", "-max", "1", "-zk", shared.Addr(), inner, "--", "sh", "-c", `echo "path=$DSYNC_PATH token=${DSYNC_TOKEN-unset}"`)
	if code != 0 {
		t.Fatalf("dsync exited %d; stderr:\n%s", code, stderr)
	}
	if want := "path=" + inner + " token=unset"; strings.TrimSpace(stdout) != want {
		t.Errorf("the semaphore's CMD saw %q; want %q", strings.TrimSpace(stdout), want)
	}
}

// TestReviewR27DialIntoSilence pins -timeout and -dial-timeout when the
// server's port accepts connections but nothing ever answers (a black hole,
// not a refused port): dsync gives up in time and names the server.
func TestReviewR27DialIntoSilence(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	proxy.BlackHole()
	path := lockPath(t)
	tests := []struct {
		args  []string
		limit time.Duration
		want  string
	}{
		{[]string{"lock", "-timeout", "1s", "-zk", proxy.Addr(), path, "--", "true"}, time.Second,
			"dsync: timed out waiting for " + path + " (no ZooKeeper server answered: " + proxy.Addr() + ")\n"},
		{[]string{"once", "-dial-timeout", "1s", "-zk", proxy.Addr(), path, "--", "true"}, time.Second,
			"dsync: no ZooKeeper server answered within 1s: " + proxy.Addr() + "\n"},
		{[]string{"once", "-status", "-timeout", "1s", "-zk", proxy.Addr(), path}, time.Second,
			"dsync: timed out reading " + path + " (no ZooKeeper server answered: " + proxy.Addr() + ")\n"},
		{[]string{"elect", "-listen", "-dial-timeout", "1s", "-zk", proxy.Addr(), path}, time.Second,
			"dsync: no ZooKeeper server answered within 1s: " + proxy.Addr() + "\n"},
	}
	procs := make([]*proc, len(tests))
	begin := time.Now()
	for i, tt := range tests {
		procs[i] = start(t, tt.args...)
	}
	for i, p := range procs {
		code := p.wait(t, 30*time.Second)
		d := time.Since(begin)
		if code != exitFail || p.stderr.String() != tests[i].want {
			t.Errorf("dsync %q: exit %d, stderr %q; want 1 and %q", tests[i].args, code, &p.stderr, tests[i].want)
		}
		if d > tests[i].limit+3*time.Second {
			t.Errorf("dsync %q took %v", tests[i].args, d)
		}
	}
}

// TestReviewR27SemLeaseDeletedEndsCMD pins a lease node of "dsync sem -n 2"
// deleted behind its back while CMD runs as a loss: CMD's group is ended and
// dsync exits -exit-lost, saying so.
func TestReviewR27SemLeaseDeletedEndsCMD(t *testing.T) {
	t.Parallel()
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	p := start(t, "sem", "-max", "3", "-n", "2", "-exit-lost", "42", "-zk", shared.Addr(), path, "--", "sh", "-c", readyScript, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	leases := awaitChildren(t, obs, path+"/leases", 2)
	if err := obs.Delete(path+"/leases/"+leases[1], -1); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 42 {
		t.Errorf("dsync sem exited %d; want -exit-lost 42; stderr:\n%s", code, &p.stderr)
	}
	if want := "dsync: lock on " + path + " lost: "; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr = %q; want it to contain %q", &p.stderr, want)
	}
	for _, pid := range ps {
		if alive(pid) {
			t.Errorf("process %d of CMD outlived dsync", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	awaitChildren(t, obs, path+"/leases", 0)
}
