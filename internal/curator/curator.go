// Package curator builds and runs a small Java program that drives real
// Apache Curator 5.4.0 (Debian's libcurator-recipes-java), so that tests and
// benchmarks can check that Go (dsync) and Java (Curator) processes share
// locks, semaphores and elections.
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
//	    or .writeLock()), multi (InterProcessMultiLock of one
//	    InterProcessMutex per path; PATH is a comma-separated list of paths,
//	    acquired in that order and released in reverse, as Curator does), or
//	    latch (LeaderLatch(client, PATH, MAX), MAX being the participant id,
//	    default empty: acquiring is start() then await(), releasing is
//	    close(); only loop reports a lost leadership, lead reports every
//	    change). MAX is ignored but by sem and latch. Prints "waiting" once
//	    this session has a node queued in ZooKeeper (under any of multi's
//	    paths), or already holds the lock, then "acquired NODE" when held
//	    (NODE is the full path of the lock node; of the lease node for sem
//	    and semmutex; of the latch node for latch; for multi, the lock nodes
//	    of all paths, in PATH's order, joined with ","), waits for a line or
//	    EOF on stdin, releases and prints "released".
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
//	    on an O_APPEND file. Prints "done ITER". For latch (MAX is the id),
//	    each time is a new LeaderLatch, started, awaited and closed, and
//	    "lost java-PID\n" comes just before "exit" when its notLeader
//	    listener ran since it was started (leadership lost inside; or lost and
//	    regained before await returned, which counts too).
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
//	    getChildren order; none when PATH/leases is missing); latch: the
//	    latch nodes, full paths in LeaderLatch's order (the sequence after
//	    "latch-": LockInternals.getSortedChildren, which its getParticipants
//	    reads ids from), leader first.
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
//	lead KIND CONNECT PATH ID
//	    Campaigns as participant ID. KIND latch: LeaderLatch(client, PATH,
//	    ID) with a listener, started. KIND selector: LeaderSelector(client,
//	    PATH, listener) with setId(ID), no autoRequeue, started; its
//	    listener extends LeaderSelectorListenerAdapter. Prints "waiting" once
//	    its node exists in ZooKeeper (polled like hold's), then "leader NODE
//	    MICROS" whenever it becomes leader (latch: isLeader; selector:
//	    takeLeadership entered) and "notleader MICROS" whenever it loses
//	    leadership (latch: notLeader, which Curator 5.4 calls on SUSPENDED and
//	    LOST, and calls isLeader again on RECONNECTED if its node is still
//	    first; selector: stateChanged to SUSPENDED or LOST while leading,
//	    after which the adapter cancels the leadership, interrupting
//	    takeLeadership, and the selector does not queue again; a cancellation
//	    that beats the leader line is reported when it interrupts). NODE is
//	    the full path of its latch or lock node ("-" if the selector cannot
//	    read it); MICROS is the JVM's wall clock as Unix time in
//	    microseconds. A line or EOF on stdin resigns: a latch is closed
//	    (silently: no notleader line); a selector returns from
//	    takeLeadership, or stops queuing if it never led, and is closed once
//	    its lock is released; then it prints "released" and exits 0. No
//	    leader or notleader line follows the resignation. SIGTERM resigns
//	    the same way, lines and exit status alike: a JVM shutdown hook wakes
//	    the campaign as a line would, then waits for the resignation to end
//	    (the recipe and the client closed, so its node is gone) and for the
//	    program to halt with its status, 0; a SIGTERM before the campaign
//	    started (while connecting) ends the JVM as usual, status 143.
//	leader KIND CONNECT PATH
//	    Prints "leader ID" for the participant that Curator's getLeader()
//	    names, from a LeaderLatch (KIND latch) or LeaderSelector (KIND
//	    selector) on PATH that is not started (it need not be): the first
//	    node's data; "leader" alone if that id is empty, "none" if there is
//	    no participant.
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

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
	// Latch is LeaderLatch: a lock kind whose MAX is the participant id,
	// and a kind of "lead" and "leader".
	Latch = "latch"
	// Selector is LeaderSelector, for "lead" and "leader" only. Its nodes
	// are an InterProcessMutex's: "participants" of kind Mutex lists them.
	Selector = "selector"
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

// ErrExited is returned (wrapped) by Hold, Release, Lead, Resign, Term and
// Leader.Next when the Java process ended without doing what was asked.
var ErrExited = errors.New("curator: interop process exited")

// proc is a running Java process of a command that lasts (hold,
// hold-revocable, lead): a goroutine reads its stdout until EOF, handing the
// lines it does not handle itself to the command's parser, then reaps the
// process. Holder and Leader embed it.
type proc struct {
	name     string // the command, for errors
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   *syncbuf.Buffer
	waiting  chan struct{}
	released chan struct{} // closed on "released" (and by a Holder on "canceled")
	done     chan struct{} // closed after the process exited and was reaped

	mu  sync.Mutex // guards err, and what the Holder or Leader parses
	err error      // from cmd.Wait, valid once done is closed

	stop sync.Once
}

// start starts the command args as p, a zero proc, and returns once the
// process printed "waiting". p's goroutine handles "waiting" and "released"
// and calls line for every other stdout line. ctx bounds the whole life of
// the process, as in exec.CommandContext: canceling it kills the JVM.
func (t *Tool) start(ctx context.Context, p *proc, args []string, line func(string)) error {
	p.name = args[0]
	p.cmd = t.Command(ctx, args...)
	p.stderr = &syncbuf.Buffer{}
	p.waiting = make(chan struct{})
	p.released = make(chan struct{})
	p.done = make(chan struct{})
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return fmt.Errorf("curator: %w", err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("curator: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("curator: %w", err)
	}
	go p.read(stdout, line)
	select {
	case <-p.waiting:
		return nil
	case <-p.done:
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("curator: %s: %w", p.name, err)
		}
		return p.exitError(p.name + " did not print waiting")
	}
}

// read consumes the process's stdout until EOF, then reaps the process.
func (p *proc) read(stdout io.Reader, line func(string)) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		switch l := sc.Text(); l {
		case "waiting":
			closeOnce(p.waiting)
		case "released":
			closeOnce(p.released)
		default:
			line(l)
		}
	}
	// Drain whatever is left (a scanner error such as an over-long line)
	// so the process never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, stdout)
	err := p.cmd.Wait()
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	close(p.done)
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// after reports whether line is word alone or word, a space and more, and
// returns the more.
func after(line, word string) (string, bool) {
	if line == word {
		return "", true
	}
	return strings.CutPrefix(line, word+" ")
}

func (p *proc) exitError(what string) error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		err = ErrExited
	} else {
		err = fmt.Errorf("%w: %w", ErrExited, err)
	}
	return fmt.Errorf("curator: %s: %w\nstderr:\n%s", what, err, strings.TrimSpace(p.stderr.String()))
}

// finish writes a line to the process's stdin and closes it (once), waits
// until the process exited, and returns an error unless it printed
// "released" and exited with status 0.
func (p *proc) finish() error {
	return p.end(func() {
		_, _ = p.stdin.Write([]byte("release\n"))
		_ = p.stdin.Close()
	})
}

// end asks the process to finish with ask (once: a later end, finish or
// Kill asks nothing more), then waits as finish does.
func (p *proc) end(ask func()) error {
	p.stop.Do(ask)
	<-p.done
	select {
	case <-p.released:
	default:
		return p.exitError(p.name + " did not print released")
	}
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		return p.exitError(p.name + " failed")
	}
	return nil
}

// Done returns a channel that is closed once the process has exited.
func (p *proc) Done() <-chan struct{} { return p.done }

// Pid returns the process id of the JVM.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// Kill kills the JVM at once, without releasing: its nodes stay in ZooKeeper
// until its session expires. Kill waits until the process is reaped.
func (p *proc) Kill() {
	_ = p.cmd.Process.Kill() // fails harmlessly if the process already ended
	p.stop.Do(func() { _ = p.stdin.Close() })
	<-p.done
}

// Holder is a running "hold" or "hold-revocable" process: one Curator client
// that queues for a lock, holds it, and releases it on request (or, if
// revocable, when revoked). Every Holder must be ended by Release or Kill (or
// by canceling the context given to Hold); until then a goroutine reads its
// output.
type Holder struct {
	proc
	kind     string
	acquired chan struct{}
	revoked  chan struct{}

	node     string // guarded by mu
	canceled bool   // guarded by mu
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

// HoldCount is Hold for kind "sem" whose maximum is the SharedCount at
// count (an absolute path), followed live as Curator follows it.
func (t *Tool) HoldCount(ctx context.Context, connect, path, count string) (*Holder, error) {
	return t.hold(ctx, Semaphore, []string{"hold", Semaphore, connect, path, count})
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
	h := &Holder{kind: kind, acquired: make(chan struct{}), revoked: make(chan struct{})}
	if err := t.start(ctx, &h.proc, args, h.line); err != nil {
		return nil, err
	}
	return h, nil
}

// line parses a line of hold's other than waiting and released.
func (h *Holder) line(line string) {
	if node, ok := after(line, "acquired"); ok {
		h.mu.Lock()
		h.node = node
		h.mu.Unlock()
		closeOnce(h.waiting)
		closeOnce(h.acquired)
		return
	}
	switch line {
	case "revoked":
		closeOnce(h.revoked)
	case "canceled":
		h.mu.Lock()
		h.canceled = true
		h.mu.Unlock()
		closeOnce(h.released)
	}
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

// Node returns the node printed with "acquired": the full path of the lock
// node for mutex, read and write, of the lease node for sem and semmutex, of
// the latch node for latch, and for multi the lock nodes of all its paths,
// in order, joined with ",". It is empty until then.
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

// Release asks the process to release the lock (it writes a line to its
// stdin), then waits until it printed "released" and exited. If the lock is
// not held yet, the process abandons its wait instead (Curator deletes its
// node and the session is closed) and prints "canceled"; Release returns nil
// in that case too: check Acquired to tell them apart. Release after Kill
// returns an error; a second Release returns the first one's outcome again.
func (h *Holder) Release() error { return h.finish() }

// Leader is a running "lead" process: one Curator client that campaigns with
// a LeaderLatch or a LeaderSelector and reports every change of its
// leadership, until Resign or Term. Every Leader must be ended by Resign,
// Term or Kill (or by canceling the context given to Lead); until then a
// goroutine reads its output.
type Leader struct {
	proc
	events  []LeaderEvent // guarded by mu
	next    int           // guarded by mu: the index of the event Next returns
	changed chan struct{} // guarded by mu: closed, and replaced, when an event is added
}

// LeaderEvent is a change of leadership that a lead process reported.
type LeaderEvent struct {
	// Leader is true when the participant became leader (a "leader" line),
	// false when it lost leadership ("notleader").
	Leader bool
	// Node is the full path of the participant's node when it became
	// leader: its latch node, or the selector's lock node ("" if the
	// selector could not read it). It is empty for a loss.
	Node string
	// Time is when the JVM printed the change, by its wall clock, to the
	// microsecond: in Curator's listener call.
	Time time.Time
}

// Lead starts "lead kind connect path id" (kind Latch or Selector) and
// returns once the process printed "waiting", that is once its node is in
// ZooKeeper. ctx bounds the whole life of the process, as in
// exec.CommandContext: canceling it kills the JVM.
func (t *Tool) Lead(ctx context.Context, kind, connect, path, id string) (*Leader, error) {
	l := &Leader{changed: make(chan struct{})}
	if err := t.start(ctx, &l.proc, []string{"lead", kind, connect, path, id}, l.line); err != nil {
		return nil, err
	}
	return l, nil
}

// line parses the leader and notleader lines of lead.
func (l *Leader) line(line string) {
	var e LeaderEvent
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "leader":
		e.Leader = true
		if f[1] != "-" {
			e.Node = f[1]
		}
	case len(f) == 2 && f[0] == "notleader":
	default:
		return
	}
	us, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		return
	}
	e.Time = time.UnixMicro(us)
	l.mu.Lock()
	l.events = append(l.events, e)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Next returns the oldest event that Next has not returned yet, waiting for
// it if need be. It fails if ctx is done first, or, wrapping ErrExited, if
// the process exits first.
func (l *Leader) Next(ctx context.Context) (LeaderEvent, error) {
	for {
		l.mu.Lock()
		if l.next < len(l.events) {
			e := l.events[l.next]
			l.next++
			l.mu.Unlock()
			return e, nil
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-l.done:
			// The events were all added before done was closed.
			l.mu.Lock()
			more := l.next < len(l.events)
			l.mu.Unlock()
			if !more {
				return LeaderEvent{}, l.exitError("lead exited before another leader or notleader line")
			}
		case <-ctx.Done():
			return LeaderEvent{}, fmt.Errorf("curator: lead: %w", ctx.Err())
		}
	}
}

// Events returns every event reported so far, oldest first, whether Next
// returned it or not.
func (l *Leader) Events() []LeaderEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// Resign asks the process to leave the election (it writes a line to its
// stdin), then waits until it printed "released" and exited: the latch was
// closed, or the selector returned from takeLeadership (or stopped queuing)
// and was closed, and the session is closed, so its node is gone. No event
// follows the request. Resign after Kill returns an error; a second Resign
// returns the first one's outcome again.
func (l *Leader) Resign() error { return l.finish() }

// Term sends SIGTERM to the JVM, whose shutdown hook resigns as Resign
// does, then waits until it printed "released" and exited with status 0: the
// latch or selector and the client were closed, so its node is gone. No
// event follows the signal. Term after Kill or Resign returns an error, or
// the first one's outcome again.
func (l *Leader) Term() error {
	return l.end(func() { _ = l.cmd.Process.Signal(syscall.SIGTERM) })
}

// LeaderID runs "leader kind connect path" (kind Latch or Selector): it
// returns the id of the participant that Curator's getLeader names for the
// election at path, and false if no one campaigns there.
func (t *Tool) LeaderID(ctx context.Context, kind, connect, path string) (string, bool, error) {
	out, err := t.Run(ctx, "leader", kind, connect, path)
	if err != nil {
		return "", false, err
	}
	if len(out) == 1 && out[0] == "none" {
		return "", false, nil
	}
	if len(out) == 1 {
		if id, ok := after(out[0], "leader"); ok {
			return id, true, nil
		}
	}
	return "", false, fmt.Errorf("curator: leader printed %q, want leader ID or none", out)
}
