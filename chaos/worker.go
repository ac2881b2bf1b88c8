package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// Worker kinds: one per primitive under test.
const (
	kindMutex    = "mutex"    // Mutex.LockContext
	kindWeighted = "weighted" // Weighted (max 2).AcquireLeases
	kindSemMutex = "semmutex" // SemaphoreMutex.LockContext
	kindElection = "election" // Election.Campaign
	kindValue    = "value"    // Count: Get, Set, CompareAndSet
	kindCmdLock  = "cmdlock"  // the dsync lock command (cmdlock.go)
)

// weightedMax is the size of the Weighted the weighted workers share.
const weightedMax = 2

// The workload: how long calls may wait and holds last.
const (
	minWait     = 500 * time.Millisecond         // a call's deadline is this …
	maxWait     = 4 * time.Second                // … to this far off
	maxHold     = 30 * time.Millisecond          // most holds last up to this
	longHold    = 2 * time.Second                // some last up to this
	longHolds   = 0.02                           // the share of long holds
	maxPause    = 15 * time.Millisecond          // between two calls of a worker
	maxGoWait   = 5 * time.Second                // an armed worker waits this long for "go"
	armedHold   = sessionTimeout + 2*time.Second // a hold armed by the coordinator
	stallTick   = 5 * time.Millisecond           // the clock watch ticks this often …
	minStall    = 25 * time.Millisecond          // … and reports gaps longer than this
	doubleLease = 0.2                            // the share of weighted acquisitions of 2 leases
)

// workerConfig is what a worker process is started with (see workerArgs).
type workerConfig struct {
	kind    string
	name    string // "mutex-1"
	index   int    // of the worker in the run, from 0: makes written values unique
	inc     int    // incarnation, from 1
	path    string
	zk      []string // the worker's proxies, one per server
	timeout time.Duration
	seed    uint64
	dsync   string // the dsync binary (cmdlock workers)
}

// args returns the command-line arguments that start c.
func (c workerConfig) args() []string {
	return []string{
		"-worker", c.kind,
		"-name", c.name,
		"-index", fmt.Sprint(c.index),
		"-inc", fmt.Sprint(c.inc),
		"-path", c.path,
		"-zk", strings.Join(c.zk, ","),
		"-session-timeout", c.timeout.String(),
		"-seed", fmt.Sprint(c.seed),
		"-dsync", c.dsync,
	}
}

// isWorker reports whether the process was started as a worker.
func isWorker(args []string) bool { return len(args) > 0 && args[0] == "-worker" }

// workerMain runs a worker process: the coordinator starts this same binary
// with -worker (see workerConfig.args). It streams records to stdout and
// takes commands, one a line, from stdin.
func workerMain(args []string) int {
	if len(args) > 1 && args[1] == kindCmdHold {
		return cmdHoldMain(args[2:])
	}
	var c workerConfig
	var zk string
	fs := flag.NewFlagSet("chaos -worker", flag.ContinueOnError)
	fs.StringVar(&c.kind, "worker", "", "worker kind: mutex, weighted, semmutex, value or cmdlock")
	fs.StringVar(&c.name, "name", "", "worker name")
	fs.IntVar(&c.index, "index", 0, "worker index")
	fs.IntVar(&c.inc, "inc", 1, "incarnation")
	fs.StringVar(&c.path, "path", "", "lock or value path")
	fs.StringVar(&zk, "zk", "", "ZooKeeper addresses, comma-separated")
	fs.DurationVar(&c.timeout, "session-timeout", 4*time.Second, "session timeout to ask for")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	fs.StringVar(&c.dsync, "dsync", "", "the dsync binary (cmdlock workers)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.zk = strings.Split(zk, ",")
	out := &emitter{w: os.Stdout, base: record{Worker: c.name, Inc: c.inc}}
	if err := runWorker(c, out, os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: worker %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// runWorker connects and runs the worker's loop until SIGTERM, SIGINT or the
// end of its commands (the coordinator is gone).
func runWorker(c workerConfig, out *emitter, commands io.Reader) error {
	// The shutdown hook, Go style: SIGTERM or SIGINT cancels ctx. Every wait
	// of the loops below selects on it, so a holder leaves its hold at once
	// and releases it (Unlock, Lease.Release), and the deferred Close ends
	// the ZooKeeper session, which deletes any node still left. The process
	// exits within a round trip of the signal, and the next waiter takes
	// over without waiting for the session to expire.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if c.kind == kindCmdLock {
		return runCmdWorker(ctx, c, out, commands)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sess, err := zkconn.Dial(ctx, c.zk, zkconn.WithSessionTimeout(c.timeout), zkconn.WithLogger(logger))
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while connecting
		}
		return err
	}
	defer sess.Close()

	w, ctx, cancel := newWorker(ctx, c, out, commands)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	sub := sess.Subscribe()
	defer sub.Stop()
	first := make(chan struct{})
	wg.Go(func() { w.follow(sub, first) })
	wg.Go(func() { w.watchClock(ctx) })
	select {
	case <-first:
	case <-ctx.Done():
		return nil
	}
	out.emit(record{Type: recStart, Kind: c.kind, Path: c.path, Pid: os.Getpid(), Session: w.session.Load(),
		Timeout: c.timeout.Milliseconds(), Granted: sess.SessionTimeout().Milliseconds()})

	switch c.kind {
	case kindMutex:
		w.holdLoop(ctx, "lock", lockWith(dsync.NewMutex(sess, c.path)))
	case kindSemMutex:
		w.holdLoop(ctx, "lock", lockWith(dsync.NewSemaphoreMutex(sess, c.path)))
	case kindElection:
		e := dsync.NewElection(sess, c.path)
		w.holdLoop(ctx, "campaign", func(ctx context.Context) (*grant, error) {
			led, err := e.Campaign(ctx, fmt.Sprintf("%s#%d", c.name, c.inc))
			if err != nil {
				return nil, err
			}
			resign := func() { e.Resign(resigned) } // as Unlock does: the delete goes out, no reply awaited
			return &grant{ctxs: []context.Context{led}, tokens: []int64{e.Token()}, nodes: []string{""}, release: resign}, nil
		})
	case kindWeighted:
		sem := dsync.NewWeighted(sess, c.path, weightedMax)
		w.holdLoop(ctx, "acquire", func(ctx context.Context) (*grant, error) {
			n := int64(1)
			if w.rng.Float64() < doubleLease {
				n = 2
			}
			leases, err := sem.AcquireLeases(ctx, n)
			if err != nil {
				return nil, err
			}
			g := &grant{release: func() {
				for _, l := range leases {
					l.Release()
				}
			}}
			for _, l := range leases {
				g.ctxs = append(g.ctxs, l.Context())
				g.tokens = append(g.tokens, l.Token())
				g.nodes = append(g.nodes, l.Path())
			}
			return g, nil
		})
	case kindValue:
		w.valueLoop(ctx, sess, c.path)
	default:
		return fmt.Errorf("unknown worker kind %q", c.kind)
	}
	out.emit(record{Type: recStop, Session: w.session.Load()})
	return nil
}

// newWorker returns the worker of c, taking commands from commands, and
// the context of its loop, canceled when commands end (the coordinator is
// gone) or by cancel.
func newWorker(ctx context.Context, c workerConfig, out *emitter, commands io.Reader) (*worker, context.Context, context.CancelFunc) {
	w := &worker{cfg: c, out: out, rng: rand.New(rand.NewPCG(c.seed, uint64(c.inc)))}
	ctx, cancel := context.WithCancel(ctx)
	w.ctl = newControl(ctx)
	// The command reader is not waited for: a read of stdin cannot be
	// interrupted, and the process exits when the worker returns.
	go func() {
		w.ctl.read(commands)
		cancel() // the coordinator is gone: stop
	}()
	return w, ctx, cancel
}

// runCmdWorker runs a dsync lock worker (cmdlock.go): it has no session of
// its own; each run of dsync has one.
func runCmdWorker(ctx context.Context, c workerConfig, out *emitter, commands io.Reader) error {
	if c.dsync == "" {
		return errNoDsync
	}
	w, ctx, cancel := newWorker(ctx, c, out, commands)
	defer cancel()
	out.emit(record{Type: recStart, Kind: c.kind, Path: c.path, Pid: os.Getpid(), Timeout: c.timeout.Milliseconds()})
	if err := w.cmdLoop(ctx); err != nil {
		return err
	}
	out.emit(record{Type: recStop})
	return nil
}

// A worker is the state of one worker process.
type worker struct {
	cfg     workerConfig
	out     *emitter
	ctl     *control
	rng     *rand.Rand   // used by the loop's goroutine only
	session atomic.Int64 // the ZooKeeper session now up
}

// follow keeps w.session up to date; first is closed at the first session.
func (w *worker) follow(sub *zkconn.Subscription, first chan struct{}) {
	for ev := range sub.C() {
		if ev.State == zkconn.StateConnected || ev.State == zkconn.StateReconnected {
			w.session.Store(ev.SessionID)
			if first != nil {
				close(first)
				first = nil
			}
		}
	}
}

// watchClock reports the stretches in which this process did not run
// (a machine too busy to schedule it, say) until ctx is done: a call that
// returns late across such a stretch was not late by itself.
func (w *worker) watchClock(ctx context.Context) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	last := now()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if at := now(); at-last > int64(minStall) {
			w.out.emit(record{Type: recStall, Start: last, Return: at})
			last = at
		} else {
			last = at
		}
	}
}

// A grant is what an acquisition returned: one hold context per node.
type grant struct {
	ctxs    []context.Context
	tokens  []int64
	nodes   []string // lease paths; "" where the primitive does not tell
	release func()
}

// A locker is what Mutex and SemaphoreMutex have in common.
type locker interface {
	LockContext(context.Context) (context.Context, error)
	Token() int64
	Unlock()
}

// lockWith returns the acquisition of holdLoop for m.
func lockWith(m locker) func(context.Context) (*grant, error) {
	return func(ctx context.Context) (*grant, error) {
		held, err := m.LockContext(ctx)
		if err != nil {
			return nil, err
		}
		return &grant{ctxs: []context.Context{held}, tokens: []int64{m.Token()}, nodes: []string{""}, release: m.Unlock}, nil
	}
}

// resigned is a done context: given it, Election.Resign sends the delete
// and returns without waiting for its reply.
var resigned = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// holdLoop takes holds with take until ctx is done: each call bounded by a
// deadline, each hold kept for a random while (whether or not it is lost
// meanwhile: the records tell when the loss was noticed), then released.
func (w *worker) holdLoop(ctx context.Context, op string, take func(context.Context) (*grant, error)) {
	holds := 0
	for {
		phase, ok := w.ctl.phase(ctx, w.out, &w.session)
		if !ok {
			return
		}
		if w.ctl.armed("acquire") {
			w.ctl.wait(phase, "acquire", w.out)
		}
		start := time.Now()
		deadline := start.Add(w.between(minWait, maxWait))
		callCtx, cancel := context.WithDeadline(phase, deadline)
		g, err := take(callCtx)
		ret := now()
		cancel()
		call := record{Type: recCall, Op: op, Path: w.cfg.path, Start: start.UnixNano(), Deadline: deadline.UnixNano(), Return: ret}
		if err != nil {
			call.Err = err.Error()
		}
		w.out.emit(call)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				w.pause(phase, 10*time.Millisecond) // no busy loop on a persistent error
			}
			continue
		}
		holds = w.hold(phase, g, holds, ret)
		w.pause(ctx, w.between(0, maxPause))
	}
}

// hold keeps g for a random while or until phase is done (quiesced, or the
// shutdown hook), and releases it. It records a hold per hold context and
// returns the number of the last.
func (w *worker) hold(phase context.Context, g *grant, holds int, enter int64) int {
	type noted struct {
		rec  record
		done chan struct{}
	}
	sid := w.session.Load()
	ns := make([]*noted, len(g.ctxs))
	for i, held := range g.ctxs {
		holds++
		n := &noted{done: make(chan struct{}), rec: record{Type: recEnter, Hold: holds, Path: w.cfg.path,
			Enter: enter, Token: g.tokens[i], Node: g.nodes[i], Session: sid}}
		w.out.emit(n.rec)
		context.AfterFunc(held, func() {
			if cause := context.Cause(held); errors.Is(cause, dsync.ErrLockLost) {
				n.rec.Lost = now()
				n.rec.Cause = cause.Error()
			}
			close(n.done)
		})
		ns[i] = n
	}
	d := w.between(0, maxHold)
	if w.rng.Float64() < longHolds {
		d = w.between(maxHold, longHold)
	}
	if w.ctl.armed("hold") {
		d = armedHold
		w.out.emit(record{Type: recArmed, Kind: "hold"})
	}
	w.pause(phase, d)
	if w.ctl.armed("release") {
		w.ctl.wait(phase, "release", w.out)
	}
	exit := now()
	g.release()
	for _, n := range ns {
		<-n.done // the release cancels the hold context, if loss did not
		n.rec.Type, n.rec.Exit = recExit, exit
		w.out.emit(n.rec)
	}
	return holds
}

// countEpoch is how long the value workers share one Count: each epoch's
// Count has a path of its own (base/e<n>), so each is a separate object
// whose history is checked alone (linearizability is local), and no check
// has to search a whole run's history at once.
const countEpoch = 10 * time.Second

// valueLoop runs Get, Set and CompareAndSet on the Counts under base until
// ctx is done. Every value written is unique in the run, so the history
// shows which write a read saw.
func (w *worker) valueLoop(ctx context.Context, sess *zkconn.Session, base string) {
	var last dsync.Versioned[int32]
	haveLast := false
	lastPath := ""
	for id := 1; ; id++ {
		phase, ok := w.ctl.phase(ctx, w.out, &w.session)
		if !ok {
			return
		}
		epoch := time.Now().UnixNano() / int64(countEpoch)
		path := fmt.Sprintf("%s/e%d", base, epoch)
		if path != lastPath {
			// Make this epoch's Count and the next one before any recorded
			// operation on them (see countModel), with reads that are not
			// recorded.
			if !w.makeCount(phase, sess, path) {
				continue
			}
			w.makeCount(phase, sess, fmt.Sprintf("%s/e%d", base, epoch+1))
			haveLast, lastPath = false, path
		}
		c := dsync.NewCount(sess, path, 0)
		op := "get"
		switch r := w.rng.Float64(); {
		case r < 0.25:
			op = "set"
		case r < 0.65 && haveLast:
			op = "cas"
		}
		inv := record{Type: recInvoke, ID: id, Op: op, Path: path}
		if op != "get" {
			inv.Arg = int32(w.cfg.index&31)<<26 | int32(w.cfg.inc&63)<<20 | int32(id&0xfffff)
		}
		if op == "cas" {
			inv.Prev = last.Version
		}
		start := time.Now()
		deadline := start.Add(w.between(minWait, maxWait))
		inv.Start, inv.Deadline = start.UnixNano(), deadline.UnixNano()
		w.out.emit(inv)
		callCtx, cancel := context.WithDeadline(phase, deadline)
		var err error
		res := inv
		switch op {
		case "get":
			var v dsync.Versioned[int32]
			if v, err = c.Get(callCtx); err == nil {
				res.Value, res.Version = v.Value, v.Version
				last, haveLast = v, true
			}
		case "set":
			err = c.Set(callCtx, inv.Arg)
		case "cas":
			res.OK, err = c.CompareAndSet(callCtx, last, inv.Arg)
		}
		res.Type, res.Return = recCall, now()
		cancel()
		if err != nil {
			res.Err = err.Error()
			res.Unknown = errors.Is(err, dsync.ErrOutcomeUnknown)
		}
		w.out.emit(res)
		w.pause(ctx, w.between(0, maxPause))
	}
}

// makeCount makes sure the Count at path exists (a Get creates it holding
// the seed), and reports whether it does.
func (w *worker) makeCount(ctx context.Context, sess *zkconn.Session, path string) bool {
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	_, err := dsync.NewCount(sess, path, 0).Get(ctx)
	return err == nil
}

// between returns a random duration in [lo, hi].
func (w *worker) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

// pause waits for d or until ctx is done.
func (w *worker) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// A control takes the coordinator's commands, one a line:
//
//	quiesce       leave any hold, stop acquiring, report quiet
//	resume        start again
//	arm acquire   before the next acquisition, report armed and wait for go
//	arm release   the same before the next release
//	arm hold      make the next hold last past the session timeout, and
//	              report armed once in it
//	disarm        forget what was armed
//	go            carry on
//	signal KILL   (dsync lock workers) send SIGKILL to dsync, running or next
//	signal TERM   the same with SIGTERM
type control struct {
	stop context.Context // the worker's lifetime

	mu      sync.Mutex
	cur     context.Context // the phase: canceled by quiesce
	cancel  context.CancelFunc
	resumed chan struct{} // closed by resume
	arm     map[string]bool
	goCh    chan struct{}
	signals chan syscall.Signal
}

func newControl(stop context.Context) *control {
	c := &control{stop: stop, arm: map[string]bool{}, goCh: make(chan struct{}, 1), signals: make(chan syscall.Signal, 1)}
	c.cur, c.cancel = context.WithCancel(stop)
	return c
}

// read applies commands until r ends.
func (c *control) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		c.mu.Lock()
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "quiesce":
			c.cancel()
			if c.resumed == nil {
				c.resumed = make(chan struct{})
			}
		case "resume":
			if c.resumed != nil {
				close(c.resumed)
				c.resumed = nil
				c.cur, c.cancel = context.WithCancel(c.stop)
			}
		case "arm acquire", "arm release", "arm hold":
			c.arm[strings.TrimPrefix(cmd, "arm ")] = true
		case "disarm":
			clear(c.arm)
		case "go":
			select {
			case c.goCh <- struct{}{}:
			default:
			}
		case "signal KILL", "signal TERM":
			sig := syscall.SIGTERM
			if cmd == "signal KILL" {
				sig = syscall.SIGKILL
			}
			select {
			case c.signals <- sig:
			default:
			}
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
}

// phase returns the context of the current phase, first reporting quiet
// and waiting for resume while quiesced. It reports false once stop is done.
func (c *control) phase(stop context.Context, out *emitter, session *atomic.Int64) (context.Context, bool) {
	for {
		c.mu.Lock()
		cur, resumed := c.cur, c.resumed
		c.mu.Unlock()
		if stop.Err() != nil {
			return nil, false
		}
		if resumed == nil {
			return cur, true
		}
		out.emit(record{Type: recQuiet, Session: session.Load()})
		select {
		case <-resumed:
		case <-stop.Done():
			return nil, false
		}
	}
}

// armed reports whether the coordinator armed the step at ("acquire",
// "release", "hold"), and disarms it.
func (c *control) armed(at string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	armed := c.arm[at]
	delete(c.arm, at)
	return armed
}

// wait reports that the worker is at step at, and waits for go.
func (c *control) wait(phase context.Context, at string, out *emitter) {
	out.emit(record{Type: recArmed, Kind: at})
	t := time.NewTimer(maxGoWait)
	defer t.Stop()
	select {
	case <-c.goCh:
	case <-phase.Done():
	case <-t.C:
	}
}
