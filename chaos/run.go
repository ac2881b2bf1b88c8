package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// The paths the workers share.
const (
	root         = "/chaos"
	mutexPath    = root + "/mutex"
	weightedPath = root + "/weighted"
	semPath      = root + "/semmutex"
	countPath    = root + "/count"
	cmdPath      = root + "/cmdlock"
	electionPath = root + "/election"
)

// lockParents are the parents of every lock and lease node: where an
// orphan would be.
var lockParents = []string{
	mutexPath,
	weightedPath + "/locks", weightedPath + "/leases",
	semPath + "/locks", semPath + "/leases",
	cmdPath, electionPath,
}

// Session timeouts. The servers grant at most serverMaxSession; workers ask
// in turn for each of askedTimeouts, the second above that maximum, so the
// run has clients whose granted timeout is below what they asked.
const serverMaxSession = 3 * time.Second

var askedTimeouts = []time.Duration{2 * time.Second, 4 * time.Second}

// The bounds the checks hold the run to.
const (
	sessionTimeout = 4 * time.Second                // the longest any client asks for
	recoveryBound  = sessionTimeout + 5*time.Second // every live worker acquires again within this of a heal
	overrunBound   = 100 * time.Millisecond         // a call returns within this of its deadline
	termBound      = 10 * time.Second               // a worker exits within this of SIGTERM
)

// A config says what a run does.
type config struct {
	seed        uint64
	duration    time.Duration // run at least this long
	holds       int           // and until this many holds were entered
	perKind     int           // and each fault kind struck this often
	maxDuration time.Duration // but no longer than this
	gap         [2]time.Duration
	workers     map[string]int // per kind
	// checkTimeout bounds the linearizability check; a history it cannot
	// decide in time fails the run.
	checkTimeout time.Duration
	exe          string // the binary workers run (it calls workerMain for -worker)
	dsync        string // the dsync binary the cmdlock workers run: built by run
	dir          string // the run's log and the workers' stderr
	logf         func(format string, args ...any)
}

// defaultWorkers is how many workers of each kind a run starts.
var defaultWorkers = map[string]int{kindMutex: 3, kindWeighted: 3, kindSemMutex: 3, kindValue: 2, kindCmdLock: 2, kindElection: 2}

// kinds lists the worker kinds in a fixed order.
var kinds = []string{kindMutex, kindWeighted, kindSemMutex, kindValue, kindCmdLock, kindElection}

var lockKinds = []string{kindMutex, kindWeighted, kindSemMutex, kindCmdLock, kindElection}

func kindPath(kind string) string {
	switch kind {
	case kindMutex:
		return mutexPath
	case kindWeighted:
		return weightedPath
	case kindSemMutex:
		return semPath
	case kindCmdLock:
		return cmdPath
	case kindElection:
		return electionPath
	}
	return countPath
}

// A coordinator runs the cluster, the workers and the fault schedule.
type coordinator struct {
	cfg     config
	ens     *zktest.Ensemble
	zk      *zk.Conn
	rng     *rand.Rand
	st      *state
	slots   []*slot
	start   time.Time
	faults  map[string]int
	wg      sync.WaitGroup // one goroutine per worker process
	problem func(string)   // notes a failure the checks do not see
}

// A slot is one worker across its incarnations: its proxies (one per
// server) stay; its process is replaced after a kill.
type slot struct {
	cfg     workerConfig
	proxies []*zktest.Proxy
	p       *proc
}

// A proc is one incarnation of a worker.
type proc struct {
	cmd  *exec.Cmd
	inc  int
	mu   sync.Mutex // orders writes to stdin
	in   io.WriteCloser
	done chan struct{} // closed once it exited and its output is read
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// send writes a command line to the worker; a dead worker ignores it.
func (p *proc) send(cmd string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.in, cmd+"\n")
}

// run starts a 3-server ensemble for tb and the workers, strikes faults
// until cfg is satisfied, stops everything and returns the log.
func run(tb testing.TB, cfg config) ([]record, error) {
	ens := zktest.StartEnsemble(tb, 3, zktest.WithMaxSessionTimeout(serverMaxSession))
	st, err := newState(filepath.Join(cfg.dir, "records.jsonl"))
	if err != nil {
		return nil, err
	}
	c := &coordinator{
		cfg:    cfg,
		ens:    ens,
		rng:    rand.New(rand.NewPCG(cfg.seed, 0x6368616f73)),
		st:     st,
		faults: map[string]int{},
	}
	st.add(record{Type: recRun, At: now(), Seed: cfg.seed})
	c.problem = func(s string) {
		cfg.logf("PROBLEM: %s", s)
		c.st.add(record{Type: recProblem, At: now(), Detail: s})
	}
	err = c.run()
	if cerr := st.close(); err == nil {
		err = cerr
	}
	return st.records(), err
}

func (c *coordinator) run() error {
	conn, _, err := zk.Connect(c.ens.Addrs(), serverMaxSession, zk.WithLogger(quiet{}))
	if err != nil {
		return err
	}
	c.zk = conn
	defer conn.Close()
	if err := c.prepare(); err != nil {
		return err
	}
	if err := c.buildDsync(); err != nil {
		return err
	}
	defer c.closeProxies()
	defer c.killAll() // after an error; does nothing after a clean stop
	if err := c.startWorkers(); err != nil {
		return err
	}
	c.start = time.Now()
	if !c.st.await(time.Now().Add(60*time.Second), func() bool {
		for _, s := range c.slots {
			if c.st.ok[s.cfg.name] == 0 {
				return false
			}
		}
		return true
	}) {
		return errors.New("not every worker acquired within 60s of starting")
	}
	c.cfg.logf("all %d workers are up; striking faults", len(c.slots))
	for !c.done() {
		for _, kind := range c.shuffledKinds() {
			if c.done() {
				break
			}
			c.pause(c.between(c.cfg.gap[0], c.cfg.gap[1]))
			if err := c.fault(kind); err != nil {
				return err
			}
			c.checkpoint()
		}
	}
	c.cfg.logf("stopping the workers")
	c.stopWorkers()
	left := c.leftovers(time.Now().Add(serverMaxSession + 2*time.Second))
	c.reportOrphans("after the final stop", left, nil)
	return nil
}

// done reports whether the run has done what cfg asks, or run out of time.
func (c *coordinator) done() bool {
	elapsed := time.Since(c.start)
	if elapsed >= c.cfg.maxDuration {
		return true
	}
	if elapsed < c.cfg.duration {
		return false
	}
	var holds int
	c.st.do(func() { holds = c.st.holds })
	if holds < c.cfg.holds {
		return false
	}
	for _, k := range faultKinds {
		if c.faults[k] < c.cfg.perKind {
			return false
		}
	}
	return true
}

// shuffledKinds returns every fault kind once, in random order: each round
// of the schedule strikes each kind.
func (c *coordinator) shuffledKinds() []string {
	ks := slices.Clone(faultKinds)
	c.rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
	return ks
}

// prepare creates the Count's node holding 0 at version 0: the initial
// state of the history the linearizability check replays.
func (c *coordinator) prepare() error {
	zero, _ := dsync.Int32Codec{}.Encode(0)
	for _, p := range []string{root, countPath} {
		data := []byte(nil)
		if p == countPath {
			data = zero
		}
		if _, err := c.zk.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// buildDsync builds the dsync command for the cmdlock workers, with the
// race detector if this binary has it.
func (c *coordinator) buildDsync() error {
	if c.cfg.workers[kindCmdLock] == 0 {
		return nil
	}
	c.cfg.dsync = filepath.Join(c.cfg.dir, "dsync")
	args := []string{"build", "-o", c.cfg.dsync}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "github.com/dsync-go/dsync/dsync")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build dsync: %v\n%s", err, out)
	}
	return nil
}

// startWorkers starts cfg.workers of each kind, each behind its own proxies.
func (c *coordinator) startWorkers() error {
	for _, kind := range kinds {
		for i := 1; i <= c.cfg.workers[kind]; i++ {
			s := &slot{cfg: workerConfig{
				kind:    kind,
				name:    fmt.Sprintf("%s-%d", kind, i),
				index:   len(c.slots),
				path:    kindPath(kind),
				timeout: askedTimeouts[len(c.slots)%len(askedTimeouts)],
				dsync:   c.cfg.dsync,
			}}
			for _, addr := range c.ens.Addrs() {
				p, err := zktest.StartProxy(addr)
				if err != nil {
					return err
				}
				s.proxies = append(s.proxies, p)
				s.cfg.zk = append(s.cfg.zk, p.Addr())
			}
			c.slots = append(c.slots, s)
			if err := c.launch(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// launch starts the next incarnation of s.
func (c *coordinator) launch(s *slot) error {
	s.cfg.inc++
	s.cfg.seed = c.cfg.seed ^ uint64(s.cfg.index+1)<<32
	cmd := exec.Command(c.cfg.exe, s.cfg.args()...)
	errf, err := os.Create(filepath.Join(c.cfg.dir, fmt.Sprintf("%s.%d.log", s.cfg.name, s.cfg.inc)))
	if err != nil {
		return err
	}
	defer errf.Close() // the child has its own copy
	cmd.Stderr = errf
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker %s: %w", s.cfg.name, err)
	}
	p := &proc{cmd: cmd, inc: s.cfg.inc, in: in, done: make(chan struct{})}
	s.p = p
	name := s.cfg.name
	c.wg.Go(func() {
		c.read(name, p.inc, out)
		err := cmd.Wait()
		status := "exit 0"
		if err != nil {
			status = err.Error()
		}
		c.st.add(record{Type: recExitProc, Worker: name, Inc: p.inc, At: now(), Status: status})
		close(p.done)
	})
	return nil
}

// read adds the records a worker writes until its stdout ends.
func (c *coordinator) read(name string, inc int, out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Worker != name || r.Inc != inc {
			c.st.add(record{Type: recGarbage, Worker: name, Inc: inc, At: now(), Detail: sc.Text()})
			continue
		}
		c.st.add(r)
	}
}

// live returns the slots of the given kinds (all if none) whose process runs.
func (c *coordinator) live(ks ...string) []*slot {
	var out []*slot
	for _, s := range c.slots {
		if (len(ks) == 0 || slices.Contains(ks, s.cfg.kind)) && s.p.running() {
			out = append(out, s)
		}
	}
	return out
}

// holder returns a live worker of the given kinds that holds now, waiting
// up to 2s for one, or nil.
func (c *coordinator) holder(ks ...string) *slot {
	var got []*slot
	cands := c.live(ks...)
	c.st.await(time.Now().Add(2*time.Second), func() bool {
		got = got[:0]
		for _, s := range cands {
			if c.st.open[s.cfg.name] > 0 {
				got = append(got, s)
			}
		}
		return len(got) > 0
	})
	if len(got) == 0 {
		return nil
	}
	return got[c.rng.IntN(len(got))]
}

func (c *coordinator) pick(ss []*slot) *slot { return ss[c.rng.IntN(len(ss))] }

// between returns a random duration in [lo, hi].
func (c *coordinator) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
}

// pause is the schedule's sleep, between and within faults (never a way to
// wait for something to happen).
func (c *coordinator) pause(d time.Duration) { time.Sleep(d) }

// awaitRecovery waits until every worker live after a fault has entered a
// hold (or, for Value workers, completed an operation) since healed, or
// recoveryBound passes. The checks measure it again from the records.
func (c *coordinator) awaitRecovery(healed int64, live []string) time.Duration {
	c.st.await(time.Unix(0, healed).Add(recoveryBound), func() bool {
		for _, w := range live {
			if c.st.ok[w] < healed {
				return false
			}
		}
		return true
	})
	return time.Duration(now() - healed)
}

// checkpoint quiesces the lock workers (each leaves its hold or wait and
// reports quiet), checks that no lock or lease node outlives them, and
// lets them go on.
func (c *coordinator) checkpoint() {
	lock := c.live(lockKinds...)
	c.st.do(func() { clear(c.st.quiet) })
	for _, s := range lock {
		s.p.send("quiesce")
	}
	ok := c.st.await(time.Now().Add(termBound), func() bool {
		for _, s := range lock {
			if _, quiet := c.st.quiet[s.cfg.name]; !quiet && s.p.running() {
				return false
			}
		}
		return true
	})
	if !ok {
		c.problem(fmt.Sprintf("checkpoint: a lock worker did not quiesce within %v", termBound))
	}
	sessions := map[int64]string{}
	c.st.do(func() {
		for w, id := range c.st.quiet {
			sessions[id] = w
		}
	})
	left := c.leftovers(time.Now().Add(serverMaxSession + 2*time.Second))
	c.reportOrphans("at a checkpoint", left, sessions)
	for _, s := range lock {
		s.p.send("resume")
	}
}

// leftovers returns the ephemeral nodes under the lock paths, once there
// are none, or whatever is left at deadline. It waits on child watches.
func (c *coordinator) leftovers(deadline time.Time) []record {
	for {
		var left []record
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(time.Until(deadline)))}}
		for _, parent := range lockParents {
			var children []string
			var w <-chan zk.Event
			err := c.retry(func() (err error) {
				children, _, w, err = c.zk.ChildrenW(parent)
				return err
			})
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				c.problem(fmt.Sprintf("orphan check: list %s: %v", parent, err))
				continue
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
			for _, child := range children {
				var data []byte
				var stat *zk.Stat
				err := c.retry(func() (err error) {
					data, stat, err = c.zk.Get(parent + "/" + child)
					return err
				})
				if err != nil || stat.EphemeralOwner == 0 {
					continue // gone meanwhile, or not a lock node
				}
				left = append(left, record{Type: recOrphan, Path: parent, Node: child, Session: stat.EphemeralOwner,
					Token: stat.Czxid, Detail: string(data)})
			}
		}
		if len(left) == 0 || !time.Now().Before(deadline) {
			return left
		}
		if chosen, _, _ := reflect.Select(cases); chosen == 0 {
			return c.leftovers(time.Now()) // one last look
		}
	}
}

// reportOrphans logs the nodes left, naming their owners where it can.
func (c *coordinator) reportOrphans(when string, left []record, sessions map[int64]string) {
	for _, r := range left {
		r.At = now()
		owner := "a session of no live worker"
		if w, ok := sessions[r.Session]; ok {
			owner = "the live session of " + w
		}
		if w := c.creator(r.Detail); w != "" {
			owner += ", created by " + w
		}
		r.Detail = fmt.Sprintf("%s: %s/%s owned by session %#x (%s)", when, r.Path, r.Node, r.Session, owner)
		c.cfg.logf("ORPHAN %s", r.Detail)
		c.st.add(r)
	}
}

// creator returns the worker incarnation whose process id the node data
// ("host=… pid=…") names, or "".
func (c *coordinator) creator(data string) string {
	i := strings.Index(data, "pid=")
	var pid int
	if i < 0 {
		return ""
	}
	if _, err := fmt.Sscanf(data[i:], "pid=%d", &pid); err != nil {
		return ""
	}
	var w string
	c.st.do(func() { w = c.st.pids[pid] })
	return w
}

// retry runs op until it fails other than by a dropped connection, for up
// to 30s: the coordinator's own client rides out the faults it strikes.
func (c *coordinator) retry(op func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil || !(errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
			errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)) || time.Now().After(deadline) {
			return err
		}
		c.pause(50 * time.Millisecond)
	}
}

// signal sends sig to s's process and records it.
func (c *coordinator) signal(s *slot, sig syscall.Signal) {
	c.st.add(record{Type: recSignal, Worker: s.cfg.name, Inc: s.p.inc, Kind: s.cfg.kind, Path: s.cfg.path,
		Signal: sigName(sig), At: now()})
	_ = s.p.cmd.Process.Signal(sig)
}

func sigName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// terminate sends SIGTERM to s and waits until it exits; after termBound it
// notes a problem and kills it.
func (c *coordinator) terminate(s *slot) {
	c.signal(s, syscall.SIGTERM)
	select {
	case <-s.p.done:
	case <-time.After(termBound):
		c.problem(fmt.Sprintf("%s#%d did not exit within %v of SIGTERM", s.cfg.name, s.p.inc, termBound))
		c.signal(s, syscall.SIGKILL)
		<-s.p.done
	}
}

// stopWorkers terminates every live worker at once, as a deploy would.
func (c *coordinator) stopWorkers() {
	var wg sync.WaitGroup
	for _, s := range c.live() {
		wg.Go(func() { c.terminate(s) })
	}
	wg.Wait()
	c.wg.Wait()
}

// killAll kills whatever worker still runs and waits for the readers.
func (c *coordinator) killAll() {
	for _, s := range c.live() {
		_ = s.p.cmd.Process.Kill()
	}
	c.wg.Wait()
}

func (c *coordinator) closeProxies() {
	for _, s := range c.slots {
		for _, p := range s.proxies {
			p.Close()
		}
	}
}

// quiet is a zk.Logger that drops what go-zookeeper says: the coordinator's
// own client reconnects through the faults it strikes.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
