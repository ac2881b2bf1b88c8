package main

// The failover section of the report (issue 13): how long an election is
// without a leader when its leader goes — it resigns, it is sent SIGTERM,
// or it is killed with SIGKILL — from just before the leader is told (or
// killed) to the moment the participant queued behind it learns that it
// leads: dsync's Election (Campaign returning) against Curator's
// LeaderLatch (its isLeader listener), in the same run and profiles.
//
// The leader is always a process of its own, so that it can be killed: for
// dsync this program run as "bench elect-leader" (serveLeader), for Curator
// a "lead latch" JVM (internal/curator). The dsync participant in line is
// an Election in this process; Curator's is another "lead latch" JVM, which
// leads the next repetition, with a new JVM in line behind it.
//
// Its flags are registered here, so that main.go only runs the section in a
// profile (runFailover), and report.go puts its cells in the report
// (failoverMarkdown) and README.md (readmeFailover).

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// failoverKey names the section for -only.
const failoverKey = "failover"

var (
	failoverReps     = flag.Int("failover-reps", 5, "failover: repetitions of each Resign and SIGTERM cell on loopback (half as many, rounded up, where the network delays)")
	failoverKillReps = flag.Int("failover-kill-reps", 3, "failover: repetitions of each SIGKILL cell on loopback, each a session timeout long (half as many where the network delays)")
	failoverTimeout  = flag.Duration("failover-session-timeout", 4*time.Second, "failover: session timeout of every participant, dsync and Curator")
	failoverDelays   = flag.String("failover-delays", "", "failover: comma-separated profiles of -delays to run the section in (empty: all of them)")
)

// failoverConfig is what the failover section does; run false skips it.
type failoverConfig struct {
	run            bool
	reps, killReps int // on loopback
	sessionTimeout time.Duration
	delays         []time.Duration // the profiles it runs in; nil: all
}

// newFailoverConfig reads the failover flags (after flag.Parse). only is
// -only: the section runs if it is empty or names failover.
func newFailoverConfig(only string) (failoverConfig, error) {
	fc := failoverConfig{run: only == "", reps: *failoverReps, killReps: *failoverKillReps, sessionTimeout: *failoverTimeout}
	for _, k := range strings.Split(only, ",") {
		fc.run = fc.run || strings.TrimSpace(k) == failoverKey
	}
	if fc.reps < 1 || fc.killReps < 1 {
		return failoverConfig{}, fmt.Errorf("-failover-reps %d, -failover-kill-reps %d; want at least 1 each", fc.reps, fc.killReps)
	}
	if fc.sessionTimeout <= 0 {
		return failoverConfig{}, fmt.Errorf("-failover-session-timeout: %v; want a positive duration", fc.sessionTimeout)
	}
	if strings.TrimSpace(*failoverDelays) != "" {
		ps, err := parseProfiles(*failoverDelays)
		if err != nil {
			return failoverConfig{}, fmt.Errorf("-failover-delays: %w", err)
		}
		for _, p := range ps {
			fc.delays = append(fc.delays, p.delay)
		}
	}
	return fc, nil
}

// runsIn reports whether the section runs in profile p.
func (fc failoverConfig) runsIn(p profile) bool {
	return fc.run && (fc.delays == nil || slices.Contains(fc.delays, p.delay))
}

// repsOf returns how many times the cells of mode m run in profile p: half
// as many, rounded up, where the network delays (the Resign and SIGTERM
// cells add round trips, the SIGKILL cells nothing but the session expiry
// that loopback measures already).
func (fc failoverConfig) repsOf(m failMode, p profile) int {
	n := fc.reps
	if m == failKill {
		n = fc.killReps
	}
	if p.delay > 0 {
		n = (n + 1) / 2
	}
	return n
}

// estimate guesses how long the section takes in profile p: a JVM to start
// per Curator repetition, and for a SIGKILL repetition two session expiries
// and two pauses before the kill, about two session timeouts.
func (fc failoverConfig) estimate(p profile) time.Duration {
	if !fc.runsIn(p) {
		return 0
	}
	var d time.Duration
	for _, m := range failModes {
		per := 500 * time.Millisecond
		if m == failKill {
			per += 2 * fc.sessionTimeout
		}
		d += time.Duration(fc.repsOf(m, p)) * per
	}
	return d
}

// pauseBeforeKill waits a random time within a ping interval of a client
// with session timeout timeout (a third of it, for go-zookeeper and
// ZooKeeper's Java client alike), so that a kill lands at a random point of
// the dead client's ping cycle, whichever leader it is: the server expires
// the session a timeout after it last heard from the client.
func pauseBeforeKill(ctx context.Context, timeout time.Duration) error {
	select {
	case <-time.After(rand.N(timeout / 3)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A failMode is how the leader goes.
type failMode int

const (
	failResign failMode = iota // told to resign: a line on its stdin
	failTerm                   // SIGTERM
	failKill                   // SIGKILL
)

var failModes = []failMode{failResign, failTerm, failKill}

func (m failMode) String() string {
	switch m {
	case failResign:
		return "Resign"
	case failTerm:
		return "SIGTERM"
	default:
		return "SIGKILL"
	}
}

// A failoverCell is one implementation's failovers of one mode in one
// profile: the time each took, in the order run.
type failoverCell struct {
	mode  failMode
	impl  string // dsync, Curator
	times []time.Duration
}

// stats returns the median (the lower middle one of an even number) and
// the largest of c's times; zeros if there are none.
func (c failoverCell) stats() (median, most time.Duration) {
	if len(c.times) == 0 {
		return 0, 0
	}
	ts := slices.Clone(c.times)
	slices.Sort(ts)
	return ts[(len(ts)-1)/2], ts[len(ts)-1]
}

// runFailover measures the failover cells in profile p, whose clients
// connect to e.addr: per mode, the repetitions of dsync and Curator take
// turns.
func runFailover(ctx context.Context, e *env, fc failoverConfig, p profile) ([]failoverCell, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	begin := time.Now()
	// The observer that waits for the participant in line to be queued
	// talks to the server directly, and not while a failover is timed.
	obs, _, err := zk.Connect([]string{e.srv.Addr()}, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	ws, err := zkconn.Dial(dctx, []string{e.addr}, zkconn.WithSessionTimeout(fc.sessionTimeout),
		zkconn.WithLogger(slog.New(slog.DiscardHandler)))
	dcancel()
	if err != nil {
		return nil, fmt.Errorf("failover: the dsync participant in line: %w", err)
	}
	defer ws.Close()
	tool := *e.tool // the same program, with the section's session timeout
	tool.Env = []string{"INTEROP_SESSION_MS=" + strconv.FormatInt(fc.sessionTimeout.Milliseconds(), 10)}
	ch := &latchChain{tool: &tool, addr: e.addr, path: fmt.Sprintf("/bench/%s/failover/curator", p.key()), srv: e.srv, obs: obs,
		timeout: fc.sessionTimeout}
	defer ch.close()
	d := &dsyncFailover{srv: e.srv, obs: obs, addr: e.addr, path: fmt.Sprintf("/bench/%s/failover/dsync", p.key()),
		waiter: ws, timeout: fc.sessionTimeout}

	var cells []failoverCell
	for _, m := range failModes {
		t0 := time.Now()
		dc, cc := failoverCell{mode: m, impl: "dsync"}, failoverCell{mode: m, impl: "Curator"}
		for range fc.repsOf(m, p) {
			t, err := d.once(ctx, m)
			if err != nil {
				return nil, fmt.Errorf("failover, %s, %s, dsync: %w", p.title(), m, err)
			}
			dc.times = append(dc.times, t)
			if t, err = ch.once(ctx, m); err != nil {
				return nil, fmt.Errorf("failover, %s, %s, Curator: %w", p.title(), m, err)
			}
			cc.times = append(cc.times, t)
		}
		dm, dx := dc.stats()
		cm, cx := cc.stats()
		log.Printf("failover %-8s %-7s %d runs: dsync median %s max %s ms, Curator median %s max %s ms  (%v)",
			p.key(), m, len(dc.times), fmtMS(dm), fmtMS(dx), fmtMS(cm), fmtMS(cx), time.Since(t0).Round(100*time.Millisecond))
		cells = append(cells, dc, cc)
	}
	log.Printf("failover %s: took %v", p.key(), time.Since(begin).Round(time.Second))
	return cells, nil
}

// dsyncFailover runs dsync's failovers: a leader process per repetition,
// and an Election on waiter in line behind it.
type dsyncFailover struct {
	srv     *zktest.Server
	obs     *zk.Conn
	addr    string // where the participants connect
	path    string
	waiter  *zkconn.Session
	timeout time.Duration // the leader's session timeout
	n       int           // repetitions so far
}

// once runs one failover of mode m and returns how long it took: from just
// before the leader is told to go (or killed) to the waiter's Campaign
// returning, both timed in this process.
func (d *dsyncFailover) once(ctx context.Context, m failMode) (took time.Duration, err error) {
	d.n++
	l, err := startLeader(ctx, d.addr, d.path, fmt.Sprintf("dsync-%d", d.n), d.timeout)
	if err != nil {
		return 0, err
	}
	defer l.close()
	el := dsync.NewElection(d.waiter, d.path)
	type won struct {
		at  time.Time
		err error
	}
	wonc := make(chan won, 1)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := el.Campaign(cctx, fmt.Sprintf("dsync-%d-next", d.n))
		wonc <- won{time.Now(), err}
	}()
	defer func() { // the waiter gives its leadership up, or its wait
		cancel()
		if wonc != nil {
			<-wonc
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		if rerr := el.Resign(rctx); rerr != nil && err == nil {
			err = fmt.Errorf("resign of the next leader: %w", rerr)
		}
	}()
	if err := awaitInLine(ctx, d.srv, d.obs, d.path); err != nil {
		return 0, err
	}
	if m == failKill {
		if err := pauseBeforeKill(ctx, d.timeout); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	if err := l.fail(m); err != nil {
		return 0, err
	}
	var w won
	select {
	case w = <-wonc:
		wonc = nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if w.err != nil {
		return 0, fmt.Errorf("campaign of the next leader: %w", w.err)
	}
	if err := l.wait(m); err != nil {
		return 0, err
	}
	return w.at.Sub(t0), nil
}

// latchChain runs Curator's failovers: a "lead latch" JVM leads, another
// one waits in line; when the leader goes, the one in line leads the next
// repetition, and a new JVM queues behind it.
type latchChain struct {
	tool           *curator.Tool
	addr, path     string
	srv            *zktest.Server
	obs            *zk.Conn
	timeout        time.Duration // the participants' session timeout
	leader, waiter *curator.Leader
	n              int // JVMs started
}

// start starts the next participant's JVM, which returns once its node is
// in ZooKeeper.
func (c *latchChain) start(ctx context.Context) (*curator.Leader, error) {
	c.n++
	return c.tool.Lead(ctx, curator.Latch, c.addr, c.path, fmt.Sprintf("curator-%d", c.n))
}

// once runs one failover of mode m and returns how long it took: from just
// before the leader is told to go (or killed), by this machine's wall
// clock, to the time the next leader's isLeader listener printed, by the
// same clock (read in its JVM).
func (c *latchChain) once(ctx context.Context, m failMode) (time.Duration, error) {
	if c.leader == nil {
		l, err := c.start(ctx)
		if err != nil {
			return 0, err
		}
		c.leader = l
		if err := awaitLeader(ctx, l); err != nil {
			return 0, err
		}
	}
	if c.waiter == nil {
		w, err := c.start(ctx)
		if err != nil {
			return 0, err
		}
		c.waiter = w
	}
	if err := awaitInLine(ctx, c.srv, c.obs, c.path); err != nil {
		return 0, err
	}
	if m == failKill {
		if err := pauseBeforeKill(ctx, c.timeout); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	var err error
	switch m {
	case failResign:
		err = c.leader.Resign()
	case failTerm:
		err = c.leader.Term()
	default:
		c.leader.Kill()
	}
	c.leader = nil
	if err != nil {
		return 0, err
	}
	next := c.waiter
	c.leader, c.waiter = next, nil
	e, err := next.Next(ctx)
	if err != nil {
		return 0, err
	}
	if !e.Leader {
		return 0, fmt.Errorf("the next latch reported %+v; want it to lead", e)
	}
	return e.Time.Sub(t0), nil
}

// awaitLeader waits for l's first event, which must be a leader event.
func awaitLeader(ctx context.Context, l *curator.Leader) error {
	e, err := l.Next(ctx)
	if err != nil {
		return err
	}
	if !e.Leader {
		return fmt.Errorf("latch reported %+v; want it to lead", e)
	}
	return nil
}

// close ends the chain's JVMs.
func (c *latchChain) close() {
	for _, l := range []*curator.Leader{c.waiter, c.leader} {
		if l != nil {
			l.Kill()
		}
	}
}

// awaitInLine blocks until the election at path has two participants and
// the second watches the first's node, found in the server's watch table
// (four-letter word wchp) under the second node's ephemeralOwner: from then
// on the second hears of the first's going at once. ZooKeeper has no watch
// on its watch table, so it asks again every 2 ms.
func awaitInLine(ctx context.Context, srv *zktest.Server, obs *zk.Conn, path string) error {
	var kids []string
	for {
		var changed <-chan zk.Event
		var err error
		kids, _, changed, err = obs.ChildrenW(path)
		if err != nil {
			return fmt.Errorf("children of %s: %w", path, err)
		}
		if len(kids) == 2 {
			break
		}
		if len(kids) > 2 {
			return fmt.Errorf("%s has %d participants %q; want 2", path, len(kids), kids)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	kids = latchOrder(kids)
	first, second := path+"/"+kids[0], path+"/"+kids[1]
	_, st, err := obs.Exists(second)
	if err != nil {
		return fmt.Errorf("%s: %w", second, err)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := srv.Command(wctx, "wchp")
		cancel()
		if err != nil {
			return fmt.Errorf("wchp: %w", err)
		}
		if slices.Contains(parseWatches(out)[first], st.EphemeralOwner) {
			return nil
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("session %#x never watched %s: %w", st.EphemeralOwner, first, ctx.Err())
		}
	}
}

// latchOrder returns LeaderLatch's order of the election's children: by
// the sequence number after their last "latch-" (a name without one sorts
// by its whole name, as Curator's fixForSorting leaves it).
func latchOrder(kids []string) []string {
	key := func(name string) string {
		if i := strings.LastIndex(name, "latch-"); i >= 0 {
			return name[i+len("latch-"):]
		}
		return name
	}
	kids = slices.Clone(kids)
	slices.SortStableFunc(kids, func(a, b string) int { return strings.Compare(key(a), key(b)) })
	return kids
}

// parseWatches parses wchp's reply: each watched path on a line of its own,
// then the sessions that watch it, one a line, as a tab and a hex number.
func parseWatches(out string) map[string][]int64 {
	m := map[string][]int64{}
	var path string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "/"):
			path = line
		case strings.HasPrefix(line, "\t0x") && path != "":
			if id, err := strconv.ParseUint(strings.TrimSpace(line)[2:], 16, 64); err == nil {
				m[path] = append(m[path], int64(id))
			}
		}
	}
	return m
}

// leaderCommand is the first argument with which this program runs as a
// dsync leader, for the failover section: "bench elect-leader CONNECT PATH
// ID SESSION_TIMEOUT".
const leaderCommand = "elect-leader"

// serveLeader is the leader process: it dials a Session with the session
// timeout, campaigns on path as id, prints "leader NODE" once it leads, then
// resigns when a line (or EOF) comes on stdin or SIGTERM comes, prints
// "released" once the resignation is applied, and exits. SIGKILL kills it as
// it would any program: its node stays until its session expires.
func serveLeader(connect, path, id, timeout string) error {
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := zkconn.Dial(dctx, []string{connect}, zkconn.WithSessionTimeout(d),
		zkconn.WithLogger(slog.New(slog.DiscardHandler)))
	cancel()
	if err != nil {
		return err
	}
	defer s.Close()
	el := dsync.NewElection(s, path)
	if _, err := el.Campaign(context.Background(), id); err != nil {
		return err
	}
	if _, err := fmt.Printf("leader %s\n", el.Key()); err != nil {
		return err
	}
	stdin := make(chan struct{})
	go func() { // ends with the process
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(stdin)
	}()
	select {
	case <-stdin:
	case <-term:
	}
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := el.Resign(rctx); err != nil {
		return err
	}
	_, err = fmt.Println("released")
	return err
}

// A leaderProcess is a running "bench elect-leader".
type leaderProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	lines  *bufio.Scanner // of stdout
	node   string         // printed with "leader"
	waited bool
}

// startLeader runs this program as a dsync leader on path, and returns
// once it leads.
func startLeader(ctx context.Context, connect, path, id string, timeout time.Duration) (*leaderProcess, error) {
	cmd, stdin, stdout, err := startSelf(ctx, leaderCommand, connect, path, id, timeout.String())
	if err != nil {
		return nil, err
	}
	l := &leaderProcess{cmd: cmd, stdin: stdin, stdout: stdout, lines: bufio.NewScanner(stdout)}
	line, err := l.next()
	if err == nil {
		var ok bool
		if l.node, ok = strings.CutPrefix(line, "leader "); !ok {
			err = fmt.Errorf("%s printed %q; want leader NODE", leaderCommand, line)
		}
	}
	if err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// next returns the process's next line of output.
func (l *leaderProcess) next() (string, error) {
	if l.lines.Scan() {
		return l.lines.Text(), nil
	}
	if err := l.lines.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", leaderCommand, err)
	}
	return "", fmt.Errorf("%s: %w", leaderCommand, io.ErrUnexpectedEOF)
}

// fail makes the leader go as m says.
func (l *leaderProcess) fail(m failMode) error {
	switch m {
	case failResign:
		_, err := io.WriteString(l.stdin, "resign\n")
		return err
	case failTerm:
		return l.cmd.Process.Signal(syscall.SIGTERM)
	default:
		return l.cmd.Process.Kill()
	}
}

// wait waits for the process to exit after fail(m): having printed
// "released" and exited 0 for Resign and SIGTERM, killed for SIGKILL.
func (l *leaderProcess) wait(m failMode) error {
	var line string
	var lerr error
	if m != failKill {
		line, lerr = l.next()
	}
	_, _ = io.Copy(io.Discard, l.stdout) // until it exits
	l.waited = true
	err := l.cmd.Wait()
	if m == failKill {
		var ee *exec.ExitError
		if ws, ok := l.cmd.ProcessState.Sys().(syscall.WaitStatus); errors.As(err, &ee) && ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil
		}
		return fmt.Errorf("%s after SIGKILL: %v; want it killed", leaderCommand, err)
	}
	switch {
	case lerr != nil:
		return fmt.Errorf("%s after %s: %w (exit: %v)", leaderCommand, m, lerr, err)
	case line != "released":
		return fmt.Errorf("%s after %s printed %q; want released", leaderCommand, m, line)
	case err != nil:
		return fmt.Errorf("%s after %s: %w", leaderCommand, m, err)
	}
	return nil
}

// close kills the process unless it was waited for, and reaps it.
func (l *leaderProcess) close() {
	if l.waited {
		return
	}
	l.waited = true
	_ = l.cmd.Process.Kill()
	_ = l.stdin.Close()
	_ = l.cmd.Wait()
}

// fmtMS formats d in milliseconds, with fewer decimals as it grows.
func fmtMS(d time.Duration) string {
	switch v := ms(d); {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

// failoverIntro says what the section measures; timeout is the session
// timeout of its participants.
func failoverIntro(timeout time.Duration) string {
	return fmt.Sprintf("An election's failover: the time from just before its leader goes — told to resign (a line on its "+
		"stdin: dsync's Resign, Curator's LeaderLatch.close()), sent SIGTERM (dsync: a signal handler that calls Resign; "+
		"Curator: a JVM shutdown hook that closes the latch and the client), or killed with SIGKILL — to the moment the "+
		"participant queued behind it learns that it leads: dsync's Campaign returning, Curator's isLeader listener "+
		"running. Session timeout %v for every participant. Each leader is a process of its own (this program run as "+
		"\"bench elect-leader\"; a \"lead latch\" JVM of internal/curator). The dsync participant in line is an Election in "+
		"this process, which reads the clock on both ends; Curator's is another JVM, whose listener reads the wall clock "+
		"of the same machine. Before each failover both participants are in line and the second's watch on the "+
		"leader's node is set (seen in the server's wchp). In ms; runs: repetitions per cell, dsync's and Curator's "+
		"taking turns; Curator/dsync: Curator's median over dsync's (above 1: dsync elects the next leader sooner).",
		timeout)
}

// killNote says what the SIGKILL rows measure.
func killNote(timeout time.Duration) string {
	return fmt.Sprintf("A killed leader's node goes only when the server expires its session, for dsync and Curator "+
		"alike: %v after the server last heard from it (a client pings every third of that when idle), rounded up "+
		"to the server's tick. So the SIGKILL rows measure ZooKeeper's session expiry, not the recipes. Before each "+
		"kill both wait a random time within a ping interval (%v), so that the kill lands anywhere in the dead "+
		"client's ping cycle, whichever it is; a SIGKILL failover then takes between two thirds of the timeout and "+
		"the whole of it, and a few runs' median moves by up to a third of it.", timeout, (timeout / 3).Round(time.Millisecond))
}

// hasFailover reports whether any profile of runs has failover cells.
func hasFailover(runs []profileRun) bool {
	return slices.ContainsFunc(runs, func(r profileRun) bool { return len(r.failover) > 0 })
}

// failoverTable writes one row per profile and mode: the runs, dsync's
// median and largest time, Curator's, and the ratio of their medians.
func failoverTable(b *strings.Builder, runs []profileRun) {
	b.WriteString("| profile | RTT (ms) | the leader goes by | runs | dsync median | dsync max | Curator median | Curator max | Curator/dsync |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range runs {
		for _, m := range failModes {
			d, okD := findFailover(r.failover, m, "dsync")
			c, okC := findFailover(r.failover, m, "Curator")
			if !okD && !okC {
				continue
			}
			cells := func(fc failoverCell, ok bool) string {
				if !ok || len(fc.times) == 0 {
					return "— | —"
				}
				med, most := fc.stats()
				return fmtMS(med) + " | " + fmtMS(most)
			}
			ratio := "—"
			if dm, _ := d.stats(); okD && okC && dm > 0 {
				cm, _ := c.stats()
				ratio = fmt.Sprintf("%.2f×", float64(cm)/float64(dm))
			}
			fmt.Fprintf(b, "| %s | %.2f | %s | %d | %s | %s | %s |\n", r.title(), ms(r.rtt), m,
				max(len(d.times), len(c.times)), cells(d, okD), cells(c, okC), ratio)
		}
	}
}

func findFailover(cells []failoverCell, m failMode, impl string) (failoverCell, bool) {
	for _, c := range cells {
		if c.mode == m && c.impl == impl {
			return c, true
		}
	}
	return failoverCell{}, false
}

// failoverMarkdown formats the section of the report; "" if it did not run.
func failoverMarkdown(info runInfo, runs []profileRun) string {
	if !hasFailover(runs) {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Failover: Election against Curator's LeaderLatch\n\n")
	b.WriteString("`go run ./bench -only failover` runs this section alone. " + failoverIntro(info.failoverTimeout) + "\n\n")
	failoverTable(&b, runs)
	b.WriteString("\n" + killNote(info.failoverTimeout) + "\n")
	return b.String()
}

// readmeFailover formats what README.md shows between the failover
// markers; "" if the section did not run.
func readmeFailover(info runInfo, runs []profileRun) string {
	if !hasFailover(runs) {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`make bench` of %s (%d CPUs), session timeout %v. Time from just before the leader goes to the "+
		"next leader's Campaign returning (Curator: its LeaderLatch's isLeader listener), in ms; Curator/dsync: ratio "+
		"of the medians (above 1: dsync elects the next leader sooner). How it was measured: "+
		"[bench/results.md](bench/results.md).\n\n", info.date, info.cpus, info.failoverTimeout)
	failoverTable(&b, runs)
	b.WriteString("\nSIGKILL: both wait for ZooKeeper to expire the dead leader's session, so that row measures the " +
		"session timeout, not the recipes.\n")
	return b.String()
}
