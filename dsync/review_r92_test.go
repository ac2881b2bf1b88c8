package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"golang.org/x/sys/unix"
)

// r92FullPipe returns a pipe whose buffer is full: a write to w blocks until
// someone reads r.
func r92FullPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	fd := int(w.Fd()) // blocking from now on, as a child inherits it
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		_, err := unix.Write(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	return r, w
}

// TestReviewR92LossWithStderrBlocked: dsync's stderr is a pipe nobody reads
// just then (a stalled log shipper, a terminal paused with Ctrl-S): its
// buffer is full, and CMD happens not to write to it. The connection is
// black-holed while CMD runs: dsync learns of the loss after 2T/3 and must
// have CMD's group dead before the server expires the session (after T)
// and someone else takes the lock. It writes its "lock lost: SIGTERM…"
// line first, and that write blocks: CMD runs on, while another holds.
func TestReviewR92LossWithStderrBlocked(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"lock", "sem", "elect", "once"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const T = 2 * time.Second
			proxy := zktest.NewProxy(t, shared.Addr())
			path, dir := lockPath(t), t.TempDir()
			r, w := r92FullPipe(t)
			args := []string{name, "-zk", proxy.Addr(), "-session-timeout", T.String()}
			lockAt := path
			switch name {
			case "sem":
				args = append(args, "-max", "1")
			case "once":
				lockAt = path + "/lock"
			}
			args = append(args, path, "--", "sh", "-c", readyScript, "sh", dir)
			p := startWith(t, func(p *proc) { p.cmd.Stderr = w }, args...)
			ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
			t.Cleanup(func() {
				for _, pid := range ps {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			proxy.BlackHole()

			// Another process takes the lock once dsync's session is gone.
			sess := dial(t, shared.Addr())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var err error
			switch name {
			case "sem":
				w := dsync.NewWeighted(sess, path, 1)
				if err = w.Acquire(ctx, 1); err == nil {
					defer w.Release(1)
				}
			case "elect":
				e := dsync.NewElection(sess, path)
				if _, err = e.Campaign(ctx, "other"); err == nil {
					defer e.Resign(context.Background())
				}
			default:
				m := dsync.NewMutex(sess, lockAt)
				if _, err = m.LockContext(ctx); err == nil {
					defer m.Unlock()
				}
			}
			if err != nil {
				t.Fatalf("the other holder: %v", err)
			}
			var live []int
			for _, pid := range ps {
				if alive(pid) {
					live = append(live, pid)
				}
			}
			// Let dsync go on, and see what it said.
			go func() { _, _ = io.Copy(io.Discard, r) }()
			code := p.wait(t, 30*time.Second)
			if len(live) > 0 {
				t.Errorf("dsync %s (stderr blocked): CMD's processes %v still ran once another process held the lock; dsync exited %d", name, live, code)
			}
		})
	}
}

// TestReviewR92NoticeBlocksGrant: dsync lock waits in line with stderr a
// terminal whose output is stopped (Ctrl-S; or a pty nobody reads, an ssh
// session whose link stalls): after waitNoticeAfter its notice ("waiting
// for PATH (held by …)") blocks in the write. The holder releases: dsync
// takes the lock, but take waits for the notice goroutine to end, which
// waits for the terminal: CMD does not start while dsync holds the lock,
// and SIGTERM does not end dsync either (acquire waits for take).
func TestReviewR92NoticeBlocksGrant(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	path, dir := lockPath(t), t.TempDir()
	obs := observer(t)
	unlockA := holdMutex(t, path)
	var tty *os.File
	p := startWith(t, func(p *proc) {
		tty, _ = openTTY(t, &p.stderr)
		p.cmd.Stderr = tty
	}, "lock", "-zk", proxy.Addr(), path, "--", "sh", "-c", `echo ran > "$1/ran"`, "sh", dir)
	if err := unix.IoctlSetInt(int(tty.Fd()), unix.TCXONC, unix.TCOOFF); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.IoctlSetInt(int(tty.Fd()), unix.TCXONC, unix.TCOON) })
	awaitChildren(t, obs, path, 2)

	// C waits behind dsync: only the notice's listing (Participants) reads
	// C's node through the proxy.
	c := dsync.NewMutex(dial(t, shared.Addr()), path)
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	got := make(chan error, 1)
	go func() {
		_, err := c.LockContext(cctx)
		got <- err
	}()
	kids := awaitChildren(t, obs, path, 3)
	line := sortedLine(kids)
	f := proxy.Strike(zktest.Match{Op: zktest.OpGetData, Path: path + "/" + line[2]}, zktest.Pass)
	select {
	case <-f.Struck():
	case <-p.done:
		t.Fatalf("dsync exited; stderr:\n%s", &p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("the notice did not read the line within 30s")
	}
	unlockA()
	// dsync takes the lock, runs CMD and releases: then C holds.
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("C: LockContext = %v", err)
		}
		c.Unlock()
		if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
			t.Errorf("C holds, but dsync's CMD did not run: %v", err)
		}
	case <-time.After(30 * time.Second):
		kids, _, _ := obs.Children(path)
		_, serr := os.Stat(filepath.Join(dir, "ran"))
		t.Errorf("with stderr a stopped terminal, dsync neither ran CMD (%v) nor released the lock within 30s of its grant; nodes at the lock: %v", serr, kids)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("nor did it exit within 10s of SIGTERM")
		}
		ccancel()
		<-got
	}
	_ = unix.IoctlSetInt(int(tty.Fd()), unix.TCXONC, unix.TCOON)
	code := p.wait(t, 30*time.Second)
	t.Logf("dsync exited %d; stderr:\n%s", code, &p.stderr)
}

// sortedLine sorts lock nodes by sequence.
func sortedLine(kids []string) []string {
	out := append([]string(nil), kids...)
	seq := func(s string) string { return s[len(s)-10:] }
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if seq(out[j]) < seq(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestReviewR92FaultedAcquire: sem (waiting and -try), once and elect
// -selector, each through a proxy that strikes one request of the
// acquisition (Lose: applied, reply lost and connection closed; Drop:
// applied, reply swallowed on a live connection; Cut: not applied,
// connection closed): CMD runs once, dsync exits 0, and no node of its
// outlives it by more than half the session timeout.
func TestReviewR92FaultedAcquire(t *testing.T) {
	t.Parallel()
	const T = 10 * time.Second
	type tc struct {
		name   string
		args   []string
		match  func(path string) zktest.Match
		action zktest.Action
		dirs   func(path string) []string // where its nodes live
		// lossOK: the fault may come after the grant, a loss by design
		// (dsync exits -exit-lost, CMD run at most once)
		lossOK bool
	}
	semDirs := func(p string) []string { return []string{p + "/locks", p + "/leases"} }
	var cases []tc
	for _, a := range []zktest.Action{zktest.Lose, zktest.Drop, zktest.Cut} {
		for _, try := range []bool{false, true} {
			args := []string{"sem", "-max", "1"}
			n := "sem"
			if try {
				args, n = append(args, "-try"), "sem-try"
			}
			cases = append(cases,
				tc{n + "-lockcreate-" + a.String(), args, func(p string) zktest.Match {
					return zktest.Match{Op: zktest.OpCreate, Path: p + "/locks/_c_", Prefix: true}
				}, a, semDirs, false},
				tc{n + "-leasecreate-" + a.String(), args, func(p string) zktest.Match {
					return zktest.Match{Op: zktest.OpCreate, Path: p + "/leases/_c_", Prefix: true}
				}, a, semDirs, false},
				tc{n + "-leaselist-" + a.String(), args, func(p string) zktest.Match {
					return zktest.Match{Op: zktest.OpGetChildren2, Path: p + "/leases"}
				}, a, semDirs, false},
			)
			if a != zktest.Lose { // Lose closes the connection just after the grant: a loss, by design
				// The internal lock's delete goes out from a goroutine of
				// its own as the leases are handed out (Unlock never
				// waits): on a loaded machine it is written after the
				// grant, and a Cut (or, at the next reply, a Drop) then
				// drops the connection after it too: the leases are lost,
				// by design, as with Lose.
				cases = append(cases, tc{n + "-lockdelete-" + a.String(), args, func(p string) zktest.Match {
					return zktest.Match{Op: zktest.OpDelete, Path: p + "/locks/_c_", Prefix: true}
				}, a, semDirs, true})
			}
		}
		cases = append(cases,
			tc{"sem-n2-leasecreate2-" + a.String(), []string{"sem", "-max", "3", "-n", "2"}, func(p string) zktest.Match {
				return zktest.Match{Op: zktest.OpCreate, Path: p + "/leases/_c_", Prefix: true}
			}, a, semDirs, false},
			tc{"once-lockcreate-" + a.String(), []string{"once"}, func(p string) zktest.Match {
				return zktest.Match{Op: zktest.OpCreate, Path: p + "/lock/_c_", Prefix: true}
			}, a, func(p string) []string { return []string{p + "/lock"} }, false},
			tc{"elect-selector-create-" + a.String(), []string{"elect", "-selector", "-id", "x"}, func(p string) zktest.Match {
				return zktest.Match{Op: zktest.OpCreate, Path: p + "/_c_", Prefix: true}
			}, a, func(p string) []string { return []string{p} }, false},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			obs := observer(t)
			proxy := zktest.NewProxy(t, shared.Addr())
			f := proxy.Strike(c.match(path), c.action)
			defer f.Disarm()
			args := append(append([]string{}, c.args...), "-zk", proxy.Addr(), "-session-timeout", T.String(), path, "--", "sh", "-c", "echo ran")
			d := start(t, args...)
			code := d.wait(t, time.Minute)
			exited := time.Now()
			select {
			case <-f.Struck():
			default:
				t.Fatalf("the fault did not strike; dsync exited %d; stderr:\n%s", code, &d.stderr)
			}
			ran := strings.Count(d.stdout.String(), "ran")
			lostAfterGrant := c.lossOK && code == exitLost && ran <= 1 && strings.Contains(d.stderr.String(), " lost: ")
			if !lostAfterGrant && (code != 0 || ran != 1) {
				t.Errorf("dsync %s exited %d, stdout %q; want 0 and CMD run once; stderr:\n%s", strings.Join(args, " "), code, d.stdout.String(), &d.stderr)
			}
			for _, dir := range c.dirs(path) {
				awaitChildren(t, obs, dir, 0)
			}
			if left := time.Since(exited); left > T/2 {
				t.Errorf("a node of dsync's outlived it by %v (session timeout %v); stderr:\n%s", left, T, &d.stderr)
			}
		})
	}
}

// TestReviewR92OnceLostBeforeRun: "dsync once" has taken the run's lock and
// reads the path's state (is the run done?) when the connection drops (the
// listing is cut; the session lives on). The lock counts as lost (lost on
// suspension), so CMD must not run; but dsync exits 1 ("the lock was not
// acquired"), with "dsync: PATH: dsync: lock lost: …", where "dsync lock"
// whose lock is lost between its grant and CMD's start says "lost before
// CMD started" and exits 3 (-exit-lost), as "dsync once" itself does when
// the same loss comes a moment later (after Do has called its function).
// The status of one outcome depends on which request the drop hits.
func TestReviewR92OnceLostBeforeRun(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	proxy := zktest.NewProxy(t, shared.Addr())
	f := proxy.Strike(zktest.Match{Op: zktest.OpGetChildren2, Path: path}, zktest.Cut)
	defer f.Disarm()
	d := start(t, "once", "-zk", proxy.Addr(), path, "--", "sh", "-c", "echo ran")
	code := d.wait(t, time.Minute)
	select {
	case <-f.Struck():
	default:
		t.Fatalf("the listing was not struck; dsync exited %d; stderr:\n%s", code, &d.stderr)
	}
	t.Logf("dsync once exited %d, stdout %q; stderr:\n%s", code, &d.stdout, &d.stderr)
	ran := strings.Count(d.stdout.String(), "ran")
	switch {
	case ran == 1 && code == 0: // queued again and ran: fine
	case ran == 0 && code == exitLost:
	default:
		t.Errorf("dsync once exited %d with CMD run %d times; want CMD run once and 0, or not run and %d (lost, as dsync lock)", code, ran, exitLost)
	}
}

// TestReviewR92SignalWhileWaiting: sem (its waiting lease made, holding the
// semaphore's internal lock), elect and once wait in line; SIGHUP, SIGTERM
// or SIGQUIT ends the wait: exit 128+N, CMD not run, and dsync's nodes
// gone (the holder's stay).
func TestReviewR92SignalWhileWaiting(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sem", "elect", "once"} {
		for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGQUIT} {
			t.Run(name+"-"+sig.String(), func(t *testing.T) {
				t.Parallel()
				path, dir := lockPath(t), t.TempDir()
				obs := observer(t)
				args := []string{name, "-zk", shared.Addr()}
				var line []string // where nodes queue, with the holder's count
				switch name {
				case "sem":
					holdLeases(t, path, 1, 1)
					args = append(args, "-max", "1")
					line = []string{path + "/leases", path + "/locks"}
				case "elect":
					e := dsync.NewElection(dial(t, shared.Addr()), path)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if _, err := e.Campaign(ctx, "leader"); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = e.Resign(context.Background()) })
					line = []string{path}
				case "once":
					holdMutex(t, path+"/lock")
					line = []string{path + "/lock"}
				}
				args = append(args, path, "--", "touch", filepath.Join(dir, "ran"))
				p := start(t, args...)
				awaitChildren(t, obs, line[0], 2) // in line (sem: its lease waits for room)
				if err := p.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				if code := p.wait(t, 30*time.Second); code != 128+int(sig) {
					t.Errorf("dsync %s exited %d after %v while waiting; want %d; stderr:\n%s", name, code, sig, 128+int(sig), &p.stderr)
				}
				if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
					t.Errorf("CMD ran")
				}
				awaitChildren(t, obs, line[0], 1)
				for _, l := range line[1:] {
					awaitChildren(t, obs, l, 0)
				}
			})
		}
	}
}

// TestReviewR92OnceRecordFaulted: the record's transaction of a run whose
// CMD succeeded is struck: Cut (not applied, connection closed), Lose
// (applied, reply lost, connection closed), BlackHole (not applied,
// connection silent until go-zookeeper gives it up). The run's lock counts
// as lost on the drop, after CMD's group is gone; the record is still
// decided under its node: dsync exits 0 with the run recorded, and the next
// "dsync once" does not run CMD. Or, if it cannot tell, it exits 3 and has
// recorded nothing. Never 0 without a record.
func TestReviewR92OnceRecordFaulted(t *testing.T) {
	t.Parallel()
	const T = 3 * time.Second
	for _, a := range []zktest.Action{zktest.Cut, zktest.Lose, zktest.BlackHole} {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			obs := observer(t)
			proxy := zktest.NewProxy(t, shared.Addr())
			f := proxy.Strike(zktest.Match{Op: zktest.OpMulti, Path: path + "/done"}, a)
			defer f.Disarm()
			d := start(t, "once", "-zk", proxy.Addr(), "-session-timeout", T.String(), path, "--", "sh", "-c", "echo ran")
			code := d.wait(t, time.Minute)
			select {
			case <-f.Struck():
			default:
				t.Fatalf("the record was not struck; dsync exited %d; stderr:\n%s", code, &d.stderr)
			}
			t.Logf("dsync once exited %d; stderr:\n%s", code, &d.stderr)
			awaitChildren(t, obs, path+"/lock", 0)
			there, _, err := obs.Exists(path + "/done")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case code == 0 && there:
			case code == exitLost && !there:
			default:
				t.Fatalf("dsync once exited %d, record there: %v; want 0 and recorded, or %d and not", code, there, exitLost)
			}
			code2, stdout2, stderr2 := dsyncRun(t, "once", "-zk", shared.Addr(), path, "--", "sh", "-c", "echo ran")
			if ran := strings.Count(stdout2, "ran"); code2 != 0 || (there && ran != 0) || (!there && ran != 1) {
				t.Errorf("the next dsync once exited %d, CMD ran %d times (record was there: %v); stderr:\n%s", code2, ran, there, stderr2)
			}
		})
	}
}

// TestReviewR92SignalWhileDialing: lock, sem, elect, once and elect -listen
// get SIGTERM while they dial a server that accepts the connection and
// never answers (a black hole): they exit, 143 (elect -listen: 0), without
// waiting out -dial-timeout (10m; p.wait gives them 30s).
func TestReviewR92SignalWhileDialing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"lock", []string{"lock"}, 128 + int(syscall.SIGTERM)},
		{"sem", []string{"sem", "-max", "2"}, 128 + int(syscall.SIGTERM)},
		{"elect", []string{"elect"}, 128 + int(syscall.SIGTERM)},
		{"once", []string{"once"}, 128 + int(syscall.SIGTERM)},
		{"elect-listen", []string{"elect", "-listen"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := zktest.NewProxy(t, shared.Addr())
			proxy.BlackHole()
			args := append(append([]string{}, tc.args...), "-zk", proxy.Addr(), "-dial-timeout", "10m", lockPath(t))
			if tc.name != "elect-listen" {
				args = append(args, "--", "true")
			}
			p := start(t, args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := proxy.AwaitConns(ctx, 1); err != nil { // dialing: its signal handlers are set
				t.Fatalf("dsync dialing: %v", err)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 30*time.Second); code != tc.want {
				t.Errorf("dsync %s exited %d after SIGTERM while dialing; want %d; stderr:\n%s", tc.name, code, tc.want, &p.stderr)
			}
		})
	}
}

// TestReviewR92StoppedWaiterStaleGrant is round 82's stale grant, for
// lock, elect (LeaderLatch and LeaderSelector layouts), sem and once: dsync
// B waits in line behind A, is stopped (SIGTSTP), and while it is stopped A
// releases (the notification reaches B's socket) and the server hears
// nothing more of B (Deafen): B's session expires and C, behind it, takes
// over. Continued, B must not start CMD.
//
// After SIGCONT, whether go-zookeeper writes its overdue ping before the
// tap's overdue deaf timer runs is up to the scheduler; when it does, the
// tap puts its deadline off by a third of the timeout (the ping is now the
// oldest request waiting) and the stale notification is handed on: B
// believes itself first. That happens about once in ten, so each subtest
// runs copies side by side.
func TestReviewR92StoppedWaiterStaleGrant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		copies int
	}{{"lock", 8}, {"elect", 8}, {"elect-selector", 8}, {"sem", 2}, {"once", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r92StaleGrant(t, tc.name, tc.copies)
		})
	}
}

// An r92Waiter is one copy of the stale grant's scenario.
type r92Waiter struct {
	proxy    *zktest.Proxy
	path     string
	dir      string
	line     string
	p        *proc
	releaseA func()
	takeC    func() error
	releaseC func()
	got      chan error
}

func r92StaleGrant(t *testing.T, name string, copies int) {
	const T = 2 * time.Second
	obs := observer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := make([]*r92Waiter, copies)
	for i := range ws {
		w := &r92Waiter{proxy: zktest.NewProxy(t, shared.Addr()), path: fmt.Sprintf("%s-%d", lockPath(t), i), dir: t.TempDir(), got: make(chan error, 1)}
		ws[i] = w
		sessA, sessC := dial(t, shared.Addr()), dial(t, shared.Addr())
		path := w.path
		var args []string
		switch name {
		case "lock":
			args = []string{"lock"}
			a, c := dsync.NewMutex(sessA, path), dsync.NewMutex(sessC, path)
			if _, err := a.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			w.releaseA = a.Unlock
			w.takeC = func() error { _, err := c.LockContext(ctx); return err }
			w.releaseC = c.Unlock
			w.line = path
		case "elect", "elect-selector":
			var opts []dsync.Option
			args = []string{"elect"}
			if name == "elect-selector" {
				opts = append(opts, dsync.SelectorLayout())
				args = append(args, "-selector")
			}
			a, c := dsync.NewElection(sessA, path, opts...), dsync.NewElection(sessC, path, opts...)
			if _, err := a.Campaign(ctx, "A"); err != nil {
				t.Fatal(err)
			}
			w.releaseA = func() { _ = a.Resign(context.Background()) }
			w.takeC = func() error { _, err := c.Campaign(ctx, "C"); return err }
			w.releaseC = func() { _ = c.Resign(context.Background()) }
			w.line = path
		case "sem":
			args = []string{"sem", "-max", "1"}
			a, c := dsync.NewWeighted(sessA, path, 1), dsync.NewWeighted(sessC, path, 1)
			if err := a.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			w.releaseA = func() { a.Release(1) }
			w.takeC = func() error { return c.Acquire(ctx, 1) }
			w.releaseC = func() { c.Release(1) }
			w.line = path + "/locks" // B waits holding the internal lock; C queues for it
		case "once":
			args = []string{"once"}
			a, c := dsync.NewMutex(sessA, path+"/lock"), dsync.NewMutex(sessC, path+"/lock")
			if _, err := a.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			w.releaseA = a.Unlock
			w.takeC = func() error { _, err := c.LockContext(ctx); return err }
			w.releaseC = c.Unlock
			w.line = path + "/lock"
		}
		args = append(args, "-zk", w.proxy.Addr(), "-session-timeout", T.String(), "-timeout", "6s",
			path, "--", "sh", "-c", `echo "$$" > "$1/ready"`, "sh", w.dir)
		w.p = start(t, args...)
	}
	for _, w := range ws {
		if name == "sem" {
			awaitChildren(t, obs, w.path+"/leases", 2) // B's lease waits for room
			awaitChildren(t, obs, w.line, 1)
		} else {
			awaitChildren(t, obs, w.line, 2)
		}
		go func() { w.got <- w.takeC() }()
		if name == "sem" {
			awaitChildren(t, obs, w.line, 2)
		} else {
			awaitChildren(t, obs, w.line, 3)
		}
	}
	for _, w := range ws {
		if err := w.p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		awaitState(t, []int{w.p.cmd.Process.Pid}, "stopped", isStopped)
		w.proxy.Deafen() // B's requests and pings go nowhere; notifications reach it
		w.releaseA()     // B's predecessor is gone: the notification is on its way to B
	}
	for _, w := range ws {
		select {
		case err := <-w.got:
			if err != nil {
				t.Fatalf("C: %v", err)
			}
		case <-time.After(40 * time.Second):
			t.Fatal("C not granted within 40s")
		}
		defer w.releaseC()
	}
	for _, w := range ws {
		if err := w.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range ws {
		code := w.p.wait(t, 40*time.Second)
		if _, err := os.Stat(filepath.Join(w.dir, "ready")); err == nil {
			t.Errorf("copy %d: B's CMD started after B's session had expired, while C held (dsync exited %d); stderr:\n%s", i, code, &w.p.stderr)
		}
	}
}
