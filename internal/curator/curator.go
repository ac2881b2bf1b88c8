// Package curator builds and runs a small Java program that drives real
// Apache Curator 5.4.0 (Debian's libcurator-recipes-java), so that tests and
// benchmarks can check that Go (dsync) and Java (Curator) processes share
// locks and semaphores.
//
// The program's source, testdata/Interop.java, is embedded; [Build] compiles
// it with javac against the jars in /usr/share/java (or $DSYNC_CURATOR_JARS).
// Each run is one JVM, one Curator client per session. Its protocol:
//
//	hold KIND CONNECT PATH [MAX]
//	    KIND is mutex (InterProcessMutex), semmutex (InterProcessSemaphoreMutex),
//	    sem (InterProcessSemaphoreV2 with MAX leases, taking 1 lease; MAX is
//	    an integer, default 1, or the absolute path of a SharedCount holding
//	    it), read or write (InterProcessReadWriteLock(client, PATH).readLock()
//	    or .writeLock()), or multi (InterProcessMultiLock of one
//	    InterProcessMutex per path; PATH is a comma-separated list of paths,
//	    acquired in that order and released in reverse, as Curator does).
//	    MAX is ignored but by sem. Prints "waiting" once this session has a
//	    node queued in ZooKeeper (under any of multi's paths), or already holds
//	    the lock, then "acquired NODE" when held (NODE is the full path of the
//	    lock node; of the lease node for sem and semmutex; for multi, the lock
//	    nodes of all paths, in PATH's order, joined with ","), waits for a line
//	    or EOF on stdin, releases and prints "released".
//	    A line before the lock is held abandons the wait (the node is
//	    deleted) and prints "canceled"; EOF before the lock is held means
//	    release as soon as acquired (so "hold" under Run prints waiting,
//	    acquired, released).
//	hold-revocable KIND CONNECT PATH
//	    Like hold, for KIND mutex, read or write only, but the lock is made
//	    revocable (makeRevocable(listener)) before it is acquired, so its node
//	    carries empty data and Curator watches it. Once the lock is held and
//	    the listener has been called (someone wrote __REVOKE__ into the node:
//	    see revoke; a request made while still waiting counts too), prints
//	    "revoked", releases, prints "released" and exits 0: waiting,
//	    acquired NODE, revoked, released. A line or EOF on stdin works as for
//	    hold.
//	revoke CONNECT NODEPATH
//	    Revoker.attemptRevoke(client, NODEPATH): writes __REVOKE__ into the
//	    node (nothing if it does not exist); prints "ok". It does not wait for
//	    the holder to let go.
//	loop KIND CONNECT PATH ITER LOGFILE [MAX]
//	    ITER times: acquire, append "enter java-PID\n" to LOGFILE, sleep
//	    0–2 ms, append "exit java-PID\n", release. Each line is one write(2)
//	    on an O_APPEND file. Prints "done ITER".
//	participants KIND CONNECT PATH [MAX]
//	    One node a line, then "end". mutex: InterProcessMutex.getParticipantNodes(),
//	    full paths in Curator's order (holder first); read, write: that
//	    side's getParticipantNodes(), which in Curator keeps only the nodes of
//	    its own side (__READ__ or __WRIT__), full paths in the lock's order;
//	    rw: the whole read/write queue, readers and writers, full paths in
//	    the lock's order (LockInternals.getParticipantNodes sorted as the
//	    read/write driver sorts); multi: each path's mutex participants, path
//	    after path; sem, semmutex: InterProcessSemaphoreV2's
//	    getParticipantNodes() (bare lease node names, in ZooKeeper's
//	    getChildren order; none when PATH/leases is missing).
//	count-get CONNECT PATH        prints the SharedCount's value (seed 0)
//	count-set CONNECT PATH VALUE  SharedCount.setCount(VALUE); prints "ok"
//	    Both create PATH (persistent, 4 zero bytes) and its missing parents
//	    (containers) when PATH does not exist.
//	bench KIND CONNECT PATH SESSIONS SECONDS [MAX]
//	    SESSIONS threads with a client each run a warm-up cycle each; then
//	    the program prints "ready" and waits for a line or EOF on stdin;
//	    then the threads contend for SECONDS, and it prints one line
//	    "ops=N seconds=S p50_us=P p99_us=Q" (N cycles in S seconds of wall
//	    time, from the start to the end of the last cycle, acquire latency
//	    percentiles in microseconds), and waits for another line or EOF on
//	    stdin before it closes the clients: the server's counters, read
//	    after "ready" and after the report, count the cycles alone. Under
//	    Run (stdin empty) it prints "ready", then the report.
//	bench rw CONNECT PATH SESSIONS SECONDS READPCT
//	    The same over InterProcessReadWriteLock, one per client: each cycle
//	    takes the read lock with probability READPCT% (an integer 0–100),
//	    else the write lock; the warm-up takes each once. Its report, between
//	    "ready" and the end as above, is the bench line with six more fields:
//	    "ops=N seconds=S p50_us=P p99_us=Q read_ops=R read_p50_us=RP
//	    read_p99_us=RQ write_ops=W write_p50_us=WP write_p99_us=WQ"
//	    (on one line, single spaces): N = R+W and P, Q are over all cycles;
//	    the read_ and write_ fields cover that kind's cycles only (percentiles
//	    are 0 when a kind has no cycles). A parser of the plain bench line
//	    that ignores unknown keys reads it unchanged.
//
// Protocol lines go to stdout; errors go to stderr with exit status 1. The
// session timeout is $INTEROP_SESSION_MS milliseconds (default 10000).
package curator

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/dsync-go/dsync/internal/syncbuf"
)

//go:embed testdata/Interop.java
var source []byte

// InstallHint is the command that installs everything [Build] needs.
const InstallHint = "apt-get install default-jdk-headless libcurator-recipes-java"

// DefaultJarDir is where Debian installs the Curator and ZooKeeper jars.
// The environment variable DSYNC_CURATOR_JARS overrides it.
const DefaultJarDir = "/usr/share/java"

// jars are the class path entries, relative to the jar directory. The
// remaining dependencies (netty, jackson, …) come from the jars' manifest
// Class-Path entries. slf4j-nop silences Curator's and ZooKeeper's logging.
var jars = []string{
	"curator-recipes.jar",
	"curator-framework.jar",
	"curator-client.jar",
	"zookeeper.jar",
	"zookeeper-jute.jar",
	"guava.jar",
	"slf4j-api.jar",
	"slf4j-nop.jar",
}

// Kinds of lock the Java program knows, for the KIND argument.
const (
	Mutex          = "mutex"    // InterProcessMutex
	SemaphoreMutex = "semmutex" // InterProcessSemaphoreMutex
	Semaphore      = "sem"      // InterProcessSemaphoreV2, one lease per hold
	Read           = "read"     // InterProcessReadWriteLock's readLock()
	Write          = "write"    // InterProcessReadWriteLock's writeLock()
	Multi          = "multi"    // InterProcessMultiLock of InterProcessMutexes; PATH lists the paths, comma-separated
	// ReadWrite is for "participants" (the whole read/write queue) and
	// "bench" (a mix of reads and writes) only.
	ReadWrite = "rw"
)

// Tool runs the compiled Java program. Build makes one; it is safe for
// concurrent use.
type Tool struct {
	// Dir holds Interop.java and its classes.
	Dir string
	// ClassPath is Dir followed by the jars, joined with ':'.
	ClassPath string
	// Java is the java launcher's path.
	Java string
	// Env, if not empty, is appended to the current environment of every
	// command the Tool makes (for example "INTEROP_SESSION_MS=4000").
	Env []string
}

// Build writes the embedded Interop.java into dir (which must exist) and
// compiles it with javac, unless dir already holds classes compiled from the
// same source. If javac, java or the Curator jars are missing, the error says
// to run InstallHint. Build does not need a testing.T: it is meant for TestMain.
func Build(dir string) (*Tool, error) {
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, fmt.Errorf("curator: javac not found (%v); install it with: %s", err, InstallHint)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("curator: java not found (%v); install it with: %s", err, InstallHint)
	}
	jarDir := os.Getenv("DSYNC_CURATOR_JARS")
	if jarDir == "" {
		jarDir = DefaultJarDir
	}
	if _, err := os.Stat(filepath.Join(jarDir, "curator-recipes.jar")); err != nil {
		return nil, fmt.Errorf("curator: Curator jars not found (%v); install them with: %s", err, InstallHint)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("curator: %w", err)
	}
	cp := make([]string, 0, len(jars)+1)
	cp = append(cp, abs)
	for _, j := range jars {
		cp = append(cp, filepath.Join(jarDir, j))
	}
	t := &Tool{Dir: abs, ClassPath: strings.Join(cp, ":"), Java: java}

	src := filepath.Join(abs, "Interop.java")
	class := filepath.Join(abs, "Interop.class")
	if old, err := os.ReadFile(src); err == nil && bytes.Equal(old, source) {
		if cs, err := os.Stat(class); err == nil {
			if ss, err := os.Stat(src); err == nil && !cs.ModTime().Before(ss.ModTime()) {
				return t, nil
			}
		}
	}
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return nil, fmt.Errorf("curator: %w", err)
	}
	cmd := exec.Command(javac, "-nowarn", "-encoding", "UTF-8", "--release", "17",
		"-cp", strings.Join(cp[1:], ":"), "-d", abs, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("curator: javac: %w\n%s", err, out)
	}
	return t, nil
}

// Command returns a java command that runs the program with args, bound to
// ctx like exec.CommandContext. The caller sets its stdio. The JVM is kept
// small (serial GC, 128 MiB heap, C1 only) so that it starts fast; a "bench"
// command gets the full JIT and a larger heap instead.
func (t *Tool) Command(ctx context.Context, args ...string) *exec.Cmd {
	flags := []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	if len(args) > 0 && args[0] == "bench" {
		flags = []string{"-Xmx512m", "-XX:+UseSerialGC"}
	}
	full := append(flags, "-Xshare:auto", "-cp", t.ClassPath, "Interop")
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, t.Java, full...)
	if len(t.Env) > 0 {
		cmd.Env = append(os.Environ(), t.Env...)
	}
	return cmd
}

// Run runs the program with args to completion, with stdin empty, and returns
// its stdout lines. On failure the error includes stderr.
func (t *Tool) Run(ctx context.Context, args ...string) ([]string, error) {
	cmd := t.Command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return lines(stdout.String()), fmt.Errorf("curator: %s: %w\nstderr:\n%s",
			strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return lines(stdout.String()), nil
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ErrExited is returned (wrapped) by Hold and Release when the Java process
// ended without doing what was asked.
var ErrExited = errors.New("curator: interop process exited")

// Holder is a running "hold" or "hold-revocable" process: one Curator client
// that queues for a lock, holds it, and releases it on request (or, if
// revocable, when revoked). Every Holder must be ended by Release or Kill (or
// by canceling the context given to Hold); until then a goroutine reads its
// output.
type Holder struct {
	kind     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   *syncbuf.Buffer
	waiting  chan struct{}
	acquired chan struct{}
	revoked  chan struct{}
	released chan struct{} // closed on "released" or "canceled"
	done     chan struct{} // closed after the process exited and was reaped

	mu       sync.Mutex
	node     string
	canceled bool
	err      error // from cmd.Wait, valid once done is closed

	stop sync.Once
}

// Hold starts "hold kind connect path [max]" and returns once the process
// printed "waiting", that is once its Curator client has a node queued for
// the lock (or already holds it). max is the lease count for kind "sem"; it is
// passed only when max > 0. ctx bounds the whole life of the process, as in
// exec.CommandContext: canceling it kills the JVM.
func (t *Tool) Hold(ctx context.Context, kind, connect, path string, max int) (*Holder, error) {
	args := []string{"hold", kind, connect, path}
	if max > 0 {
		args = append(args, strconv.Itoa(max))
	}
	return t.hold(ctx, kind, args)
}

// HoldRevocable is Hold for "hold-revocable kind connect path": kind is
// Mutex, Read or Write, made revocable before it is acquired. Once it holds
// the lock and Curator called its revocation listener (see Revoke), the
// process closes Revoked, releases the lock and exits with status 0; Release
// then returns nil.
func (t *Tool) HoldRevocable(ctx context.Context, kind, connect, path string) (*Holder, error) {
	return t.hold(ctx, kind, []string{"hold-revocable", kind, connect, path})
}

// Revoke runs "revoke connect node": Curator's Revoker.attemptRevoke writes
// __REVOKE__ into node (nothing happens if node does not exist). It returns
// once the write is done, not once the holder let go: wait on the holder's
// Revoked or Done for that.
func (t *Tool) Revoke(ctx context.Context, connect, node string) error {
	out, err := t.Run(ctx, "revoke", connect, node)
	if err != nil {
		return err
	}
	if len(out) != 1 || out[0] != "ok" {
		return fmt.Errorf("curator: revoke printed %q, want ok", out)
	}
	return nil
}

// hold starts the hold command args of kind and waits for "waiting".
func (t *Tool) hold(ctx context.Context, kind string, args []string) (*Holder, error) {
	cmd := t.Command(ctx, args...)
	h := &Holder{
		kind:     kind,
		cmd:      cmd,
		stderr:   &syncbuf.Buffer{},
		waiting:  make(chan struct{}),
		acquired: make(chan struct{}),
		revoked:  make(chan struct{}),
		released: make(chan struct{}),
		done:     make(chan struct{}),
	}
	cmd.Stderr = h.stderr
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("curator: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("curator: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("curator: %w", err)
	}
	go h.read(stdout)
	select {
	case <-h.waiting:
		return h, nil
	case <-h.done:
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("curator: hold: %w", err)
		}
		return nil, h.exitError(args[0] + " did not print waiting")
	}
}

// read consumes the process's stdout until EOF, then reaps the process.
func (h *Holder) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "waiting":
			closeOnce(h.waiting)
		case line == "acquired" || strings.HasPrefix(line, "acquired "):
			h.mu.Lock()
			h.node = strings.TrimPrefix(strings.TrimPrefix(line, "acquired"), " ")
			h.mu.Unlock()
			closeOnce(h.waiting)
			closeOnce(h.acquired)
		case line == "revoked":
			closeOnce(h.revoked)
		case line == "released":
			closeOnce(h.released)
		case line == "canceled":
			h.mu.Lock()
			h.canceled = true
			h.mu.Unlock()
			closeOnce(h.released)
		}
	}
	// Drain whatever is left (a scanner error such as an over-long line)
	// so the process never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, stdout)
	err := h.cmd.Wait()
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
	close(h.done)
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (h *Holder) exitError(what string) error {
	h.mu.Lock()
	err := h.err
	h.mu.Unlock()
	if err == nil {
		err = ErrExited
	} else {
		err = fmt.Errorf("%w: %w", ErrExited, err)
	}
	return fmt.Errorf("curator: %s: %w\nstderr:\n%s", what, err, strings.TrimSpace(h.stderr.String()))
}

// Acquired returns a channel that is closed once the process printed
// "acquired": Curator reports the lock held.
func (h *Holder) Acquired() <-chan struct{} { return h.acquired }

// Revoked returns a channel that is closed once the process printed
// "revoked": a HoldRevocable holder holds the lock and Curator called its
// revocation listener; the process is releasing the lock and exiting (Done
// closes once it has). It is never closed for a Holder made by Hold. The
// Holder owns the channel.
func (h *Holder) Revoked() <-chan struct{} { return h.revoked }

// Done returns a channel that is closed once the process has exited.
func (h *Holder) Done() <-chan struct{} { return h.done }

// Node returns the node printed with "acquired": the full path of the lock
// node for mutex, read and write, of the lease node for sem and semmutex, and
// for multi the lock nodes of all its paths, in order, joined with ",". It is
// empty until then.
func (h *Holder) Node() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node
}

// Nodes returns Node as a list: for kind Multi, one lock node per path, in
// the order of the paths given to Hold; for the other kinds, Node alone. It is
// nil until the lock is held.
func (h *Holder) Nodes() []string {
	n := h.Node()
	switch {
	case n == "":
		return nil
	case h.kind == Multi:
		return strings.Split(n, ",")
	default:
		return []string{n}
	}
}

// Pid returns the process id of the JVM.
func (h *Holder) Pid() int { return h.cmd.Process.Pid }

// Release asks the process to release the lock (it writes a line to its
// stdin), then waits until it printed "released" and exited. If the lock is
// not held yet, the process abandons its wait instead (Curator deletes its
// node and the session is closed) and prints "canceled"; Release returns nil
// in that case too: check Acquired to tell them apart. Release after Kill
// returns an error; a second Release returns the first one's outcome again.
func (h *Holder) Release() error {
	h.stop.Do(func() {
		_, _ = h.stdin.Write([]byte("release\n"))
		_ = h.stdin.Close()
	})
	<-h.done
	select {
	case <-h.released:
	default:
		return h.exitError("hold did not print released")
	}
	h.mu.Lock()
	err := h.err
	h.mu.Unlock()
	if err != nil {
		return h.exitError("hold failed")
	}
	return nil
}

// Kill kills the JVM at once, without releasing: its nodes stay in ZooKeeper
// until its session expires. Kill waits until the process is reaped.
func (h *Holder) Kill() {
	_ = h.cmd.Process.Kill() // fails harmlessly if the process already ended
	h.stop.Do(func() { _ = h.stdin.Close() })
	<-h.done
}
