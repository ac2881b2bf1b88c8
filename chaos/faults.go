package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// The fault kinds, in the order the report lists them.
const (
	faultLeaderKill   = "leader killed and restarted"
	faultFollowerKill = "follower killed and restarted"
	faultPause        = "server paused past the session timeout"
	faultPartition    = "client partitioned past the session timeout"
	faultCutCreate    = "connection cut mid-create"
	faultCutRelease   = "connection cut mid-release"
	faultCutWrite     = "connection cut mid-write (Value)"
	faultDropReply    = "reply swallowed, connection left up"
	faultDeleteWaiter = "waiter's node deleted by an operator"
	faultRevoke       = "__REVOKE__ written into a holder's node"
	faultKill         = "client SIGKILL, restarted"
	faultTerm         = "client SIGTERM, restarted"
)

var faultKinds = []string{
	faultLeaderKill, faultFollowerKill, faultPause, faultPartition,
	faultCutCreate, faultCutRelease, faultCutWrite, faultDropReply,
	faultDeleteWaiter, faultRevoke, faultKill, faultTerm,
}

// errNotStruck means that a fault found nothing to strike (no waiter in
// line, say): the schedule moves on without counting it.
var errNotStruck = errors.New("not struck")

// fault strikes one fault of kind, heals it, and waits for the workers to
// recover. An error means the cluster did not come back, which ends the run.
func (c *coordinator) fault(kind string) error {
	at := now()
	var detail string
	var err error
	switch kind {
	case faultLeaderKill:
		detail, err = c.serverKill(true)
	case faultFollowerKill:
		detail, err = c.serverKill(false)
	case faultPause:
		detail, err = c.serverPause()
	case faultPartition:
		detail, err = c.partition()
	case faultCutCreate:
		detail, err = c.cutLock("acquire", zktest.OpCreate, c.cutOrLose())
	case faultCutRelease:
		detail, err = c.cutLock("release", zktest.OpDelete, c.cutOrLose())
	case faultCutWrite:
		detail, err = c.cutWrite(c.cutOrLose())
	case faultDropReply:
		detail, err = c.dropReply()
	case faultDeleteWaiter:
		detail, err = c.deleteWaiter()
	case faultRevoke:
		detail, err = c.revoke()
	case faultKill:
		detail, err = c.clientSignal(syscall.SIGKILL)
	case faultTerm:
		detail, err = c.clientSignal(syscall.SIGTERM)
	}
	if errors.Is(err, errNotStruck) {
		c.cfg.logf("%7.1fs %s: %v", time.Since(c.start).Seconds(), kind, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	healed := now()
	var live []string
	for _, s := range c.live() {
		live = append(live, s.cfg.name)
	}
	c.faults[kind]++
	c.st.add(record{Type: recFault, Kind: kind, At: at, Healed: healed, Detail: detail, Live: live})
	took := c.awaitRecovery(healed, live)
	c.cfg.logf("%7.1fs %s: %s; all workers acquired again within %v", time.Since(c.start).Seconds(), kind, detail, took.Round(time.Millisecond))
	return nil
}

// serverKill stops the leader (or a follower) and restarts it.
func (c *coordinator) serverKill(leader bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	i, err := c.ens.Leader(ctx)
	if err != nil {
		return "", err
	}
	if !leader {
		i = (i + 1 + c.rng.IntN(c.ens.Len()-1)) % c.ens.Len()
	}
	srv := c.ens.Server(i)
	if err := srv.Stop(); err != nil {
		return "", err
	}
	down := c.between(500*time.Millisecond, 2*time.Second)
	c.pause(down)
	if err := srv.Restart(); err != nil {
		return "", err
	}
	if err := c.ens.WaitQuorum(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("zk%d down for %v", i+1, down.Round(time.Millisecond)), nil
}

// serverPause freezes a random server (SIGSTOP) for longer than any session
// timeout, then lets it go on.
func (c *coordinator) serverPause() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	leader, err := c.ens.Leader(ctx)
	if err != nil {
		return "", err
	}
	i := c.rng.IntN(c.ens.Len())
	srv := c.ens.Server(i)
	if err := srv.Pause(); err != nil {
		return "", err
	}
	d := sessionTimeout + c.between(500*time.Millisecond, 1500*time.Millisecond)
	c.pause(d)
	if err := srv.Resume(); err != nil {
		return "", err
	}
	if err := c.ens.WaitQuorum(ctx); err != nil {
		return "", err
	}
	role := "follower"
	if i == leader {
		role = "leader"
	}
	return fmt.Sprintf("zk%d (%s) paused for %v", i+1, role, d.Round(time.Millisecond)), nil
}

// partition black-holes every connection of one worker for longer than
// any session timeout, then heals. Two times in three the worker is a lock
// worker in a hold armed to outlast the partition: it learns of the loss
// while others take the lock, the overlap the report counts as noticed.
func (c *coordinator) partition() (string, error) {
	var s *slot
	if c.rng.IntN(3) > 0 {
		if s = c.pick(c.live(lockKinds...)); !c.arm(s, "hold") {
			s = nil
		}
	}
	if s == nil {
		s = c.pick(c.live())
	}
	holding := c.holding(s)
	for _, p := range s.proxies {
		p.BlackHole()
	}
	d := sessionTimeout + c.between(500*time.Millisecond, 1500*time.Millisecond)
	c.pause(d)
	for _, p := range s.proxies {
		p.Heal()
	}
	return fmt.Sprintf("%s#%d (%s) cut off for %v", s.cfg.name, s.p.inc, holding, d.Round(time.Millisecond)), nil
}

// holding says whether s holds now.
func (c *coordinator) holding(s *slot) string {
	var n int
	c.st.do(func() { n = c.st.open[s.cfg.name] })
	if n > 0 {
		return "holding"
	}
	return "not holding"
}

// cutOrLose picks Cut (the connection drops before the request reaches the
// server) or Lose (it drops after the request was applied, its reply lost).
func (c *coordinator) cutOrLose() zktest.Action {
	return []zktest.Action{zktest.Cut, zktest.Lose}[c.rng.IntN(2)]
}

// dropReply strikes a lock worker's next create or delete, or a Value
// worker's next write, with Drop: the request is applied and its reply
// swallowed while the connection stays up, so the worker's session must
// notice the reply missing by itself (a later reply comes out of turn).
func (c *coordinator) dropReply() (string, error) {
	switch c.rng.IntN(3) {
	case 0:
		return c.cutLock("acquire", zktest.OpCreate, zktest.Drop)
	case 1:
		return c.cutLock("release", zktest.OpDelete, zktest.Drop)
	}
	return c.cutWrite(zktest.Drop)
}

// cutLock strikes a lock worker's next create (at "acquire") or delete (at
// "release") under its lock path with action. The worker is armed first,
// so that the strike meets the step it is meant for: it reports when it is
// about to take that step and waits for "go" while the faults are set.
func (c *coordinator) cutLock(at string, op zktest.Op, action zktest.Action) (string, error) {
	s := c.pick(c.live(lockKinds...))
	inc := s.p.inc
	if !c.arm(s, at) {
		return "", fmt.Errorf("%w: %s did not reach its next %s", errNotStruck, s.cfg.name, at)
	}
	struck := c.strike(s, zktest.Match{Op: op, Path: s.cfg.path + "/", Prefix: true}, action, func() { s.p.send("go") })
	if !struck {
		return "", fmt.Errorf("%w: %s sent no %v", errNotStruck, s.cfg.name, op)
	}
	return fmt.Sprintf("%s#%d: %v at its %v", s.cfg.name, inc, action, op), nil
}

// arm asks s to report when it reaches step at (see control), and waits
// up to maxGoWait for the report; if none comes, it disarms s.
func (c *coordinator) arm(s *slot, at string) bool {
	c.st.do(func() { delete(c.st.armed, s.cfg.name) })
	s.p.send("arm " + at)
	inc := s.p.inc
	if c.st.await(time.Now().Add(maxGoWait), func() bool {
		r, ok := c.st.armed[s.cfg.name]
		return ok && r.Inc == inc && r.Kind == at
	}) {
		return true
	}
	s.p.send("disarm")
	return false
}

// cutWrite strikes a Value worker's next write (setData) with action.
func (c *coordinator) cutWrite(action zktest.Action) (string, error) {
	vs := c.live(kindValue)
	if len(vs) == 0 {
		return "", fmt.Errorf("%w: no Value worker", errNotStruck)
	}
	s := c.pick(vs)
	if !c.strike(s, zktest.Match{Op: zktest.OpSetData, Path: countPath + "/", Prefix: true}, action, func() {}) {
		return "", fmt.Errorf("%w: %s sent no setData", errNotStruck, s.cfg.name)
	}
	return fmt.Sprintf("%s#%d: %v at its setData", s.cfg.name, s.p.inc, action), nil
}

// strike arms a fault on every proxy of s (it talks to one server at a
// time), calls then, and waits up to maxGoWait for the fault to strike;
// the faults left are disarmed.
func (c *coordinator) strike(s *slot, m zktest.Match, a zktest.Action, then func()) bool {
	var cases []reflect.SelectCase
	var faults []*zktest.Fault
	for _, p := range s.proxies {
		f := p.Strike(m, a)
		faults = append(faults, f)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.Struck())})
	}
	then()
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(maxGoWait))})
	chosen, _, _ := reflect.Select(cases)
	for _, f := range faults {
		f.Disarm()
	}
	return chosen < len(faults)
}

// queueParents are the lock paths where contenders queue.
var queueParents = []string{mutexPath, weightedPath + "/locks", semPath + "/locks", cmdPath, electionPath}

// deleteWaiter deletes a node that waits in line (not the head) on one of
// the lock paths, as an operator cleaning up by hand would.
func (c *coordinator) deleteWaiter() (string, error) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, i := range c.rng.Perm(len(queueParents)) {
			parent := queueParents[i]
			line := c.line(parent)
			if len(line) < 2 {
				continue
			}
			k := 1 + c.rng.IntN(len(line)-1)
			node := parent + "/" + line[k]
			data, _, err := c.zk.Get(node)
			if err != nil {
				continue
			}
			if err := c.zk.Delete(node, -1); err != nil {
				continue
			}
			return fmt.Sprintf("deleted %s, %d of %d in line, made by %s", node, k+1, len(line), c.creator(string(data))), nil
		}
		c.pause(20 * time.Millisecond)
	}
	return "", fmt.Errorf("%w: no waiter in line for 3s", errNotStruck)
}

// revokeParents are where holders' nodes are: a Mutex's head, and the
// leases of the semaphores.
var revokeParents = []string{mutexPath, semPath + "/leases", weightedPath + "/leases", cmdPath}

// revoke writes __REVOKE__ into a holder's node, as Curator's Revoker does.
func (c *coordinator) revoke() (string, error) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		parent := revokeParents[c.rng.IntN(len(revokeParents))]
		line := c.line(parent)
		if len(line) == 0 {
			c.pause(20 * time.Millisecond)
			continue
		}
		k := 0
		if parent != mutexPath && parent != cmdPath {
			k = c.rng.IntN(len(line))
		}
		node := parent + "/" + line[k]
		data, _, err := c.zk.Get(node)
		if err != nil {
			continue
		}
		if _, err := c.zk.Set(node, []byte("__REVOKE__"), -1); err != nil {
			continue
		}
		return fmt.Sprintf("into %s, made by %s", node, c.creator(string(data))), nil
	}
	return "", fmt.Errorf("%w: no holder for 3s", errNotStruck)
}

// line returns the children of parent in queue order (by the sequence
// number every dsync node name ends with).
func (c *coordinator) line(parent string) []string {
	var children []string
	if err := c.retry(func() (err error) {
		children, _, err = c.zk.Children(parent)
		return err
	}); err != nil {
		return nil
	}
	seq := func(name string) int64 {
		n, _ := strconv.ParseInt(name[max(0, len(name)-10):], 10, 32)
		return n
	}
	slices.SortFunc(children, func(a, b string) int { return int(seq(a) - seq(b)) })
	return children
}

// clientSignal sends sig to a worker (a holder of a Mutex or SemaphoreMutex
// most of the time, whose successor's wait is the handover the report
// times) and starts it again once it has exited. For a dsync lock worker,
// the process signaled is dsync, whose worker goes on.
func (c *coordinator) clientSignal(sig syscall.Signal) (string, error) {
	var s *slot
	switch r := c.rng.Float64(); {
	case r < 0.3 && c.cfg.workers[kindCmdLock] > 0:
		s = c.holder(kindCmdLock)
	case r < 0.8:
		s = c.holder(kindMutex, kindSemMutex, kindElection)
	}
	if s == nil {
		s = c.pick(c.live())
	}
	if s.cfg.kind == kindCmdLock {
		return c.signalDsync(s, sig)
	}
	holding, inc := c.holding(s), s.p.inc
	if sig == syscall.SIGKILL {
		c.signal(s, sig)
		<-s.p.done
	} else {
		c.terminate(s)
	}
	if err := c.launch(s); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s#%d (%s)", s.cfg.name, inc, holding), nil
}

// signalDsync has a dsync lock worker send sig to its dsync (running, or
// the next one), and waits until the worker reports that run over: CMD's
// process group gone.
func (c *coordinator) signalDsync(s *slot, sig syscall.Signal) (string, error) {
	holding, inc := c.holding(s), s.p.inc
	c.st.do(func() { delete(c.st.cmdEnd, s.cfg.name) })
	s.p.send("signal " + strings.TrimPrefix(sigName(sig), "SIG"))
	var end record
	if !c.st.await(time.Now().Add(termBound), func() bool {
		end = c.st.cmdEnd[s.cfg.name]
		return end.Signal != ""
	}) {
		c.problem(fmt.Sprintf("%s#%d: its dsync did not end within %v of %v", s.cfg.name, inc, termBound, sigName(sig)))
	}
	detail := fmt.Sprintf("dsync of %s#%d (%s), run %d: %s", s.cfg.name, inc, holding, end.Run, end.Status)
	if end.Survivors > 0 {
		detail += fmt.Sprintf("; %d processes of CMD's group outlived it, killed by the worker", end.Survivors)
	}
	return detail, nil
}
