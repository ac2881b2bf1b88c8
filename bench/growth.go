package main

// The growth section of the report (issue 12, "cost as the work grows"):
// how dsync's figures move as the work grows, each against N.
//
//   - One Mutex with N waiters spread over a few sessions: requests per
//     handoff, handoff latency, and the client's memory per waiter.
//   - One Session holding N distinct Mutexes at once, with and without loss
//     tracking: acquisitions per second, bytes and goroutines per hold.
//   - One Weighted of max 10 with N contenders: requests per grant, against
//     Curator's InterProcessSemaphoreV2 in the same run.
//
// Its flags are registered here, so that main.go only runs the section
// (runGrowth), puts its result in the report (runInfo.growth) and writes
// its chart (growthResult.writeChart).

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// growthKey names the section for -only.
const growthKey = "growth"

var (
	growthWaiters    = flag.String("growth-waiters", "10,100,1000", "growth: comma-separated numbers of waiters on one Mutex (empty: skip that part)")
	growthSessions   = flag.Int("growth-sessions", 50, "growth: sessions the Mutex waiters and the Weighted contenders are spread over (at most)")
	growthHolds      = flag.String("growth-holds", "100,1000,10000", "growth: comma-separated numbers of Mutexes held at once on one session (empty: skip that part)")
	growthContenders = flag.String("growth-contenders", "10,100,500", "growth: comma-separated numbers of contenders on one Weighted (empty: skip that part)")
	growthChartPath  = flag.String("growth-chart", "bench/growth.svg", "where to write the growth section's chart (empty: nowhere)")
)

const (
	growthSemMax = 10  // the Weighted's maximum
	holdWorkers  = 100 // acquirers at once in the holds part
)

// growthConfig is what the growth section does; run false skips it.
type growthConfig struct {
	run        bool
	waiters    []int
	sessions   int
	holds      []int
	contenders []int
	chartPath  string
}

// newGrowthConfig reads the growth flags (after flag.Parse). only is -only:
// the section runs if it is empty or names growth; a partial run writes the
// chart only if -growth-chart is on the command line, as main does for the
// other files.
func newGrowthConfig(only string) (growthConfig, error) {
	gc := growthConfig{run: only == "", sessions: *growthSessions, chartPath: *growthChartPath}
	for _, k := range strings.Split(only, ",") {
		gc.run = gc.run || strings.TrimSpace(k) == growthKey
	}
	if only != "" {
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "growth-chart" })
		if !set {
			gc.chartPath = ""
		}
	}
	if gc.sessions < 1 {
		return growthConfig{}, fmt.Errorf("-growth-sessions: %d; want at least 1", gc.sessions)
	}
	var err error
	for _, l := range []struct {
		name, list string
		dst        *[]int
	}{
		{"-growth-waiters", *growthWaiters, &gc.waiters},
		{"-growth-holds", *growthHolds, &gc.holds},
		{"-growth-contenders", *growthContenders, &gc.contenders},
	} {
		if strings.TrimSpace(l.list) == "" {
			continue // that part is skipped
		}
		if *l.dst, err = counts(l.name, l.list, 1, 1<<20); err != nil {
			return growthConfig{}, err
		}
	}
	return gc, nil
}

// growthResult is what the section measured.
type growthResult struct {
	window         time.Duration
	sessionTimeout time.Duration
	queue          []queueCell
	holds          []holdCell
	grants         []grantCell
}

// A queueCell is one Mutex with n waiters, each its own Mutex value (so its
// own node in ZooKeeper, as a process of its own would queue), spread
// round-robin over sessions sessions.
type queueCell struct {
	n, sessions int
	handoffs    int64   // in the window
	seconds     float64 // the window
	p50, p99    time.Duration
	reqs        counters // in the window
	respBytes   int64    // bytes of the server's replies in the window (mntr zk_response_bytes)
	// CPU time used in the window by this process and by the server.
	clientCPU, serverCPU time.Duration
	suspended            int // sessions' suspensions and losses in the window: 0, or its figures are suspect
	// With the n waiters queued, per waiter: live heap and goroutine
	// stacks of this process, goroutines beyond the waiter's own, and
	// watches set on the server.
	heap, stack, goroutines, watches float64
}

// A holdCell is one Session holding n distinct Mutexes at once: taken by
// Lock (track false) or LockContext (track true).
type holdCell struct {
	n         int
	track     bool
	seconds   float64       // to acquire all n
	reqs      counters      // requests of the acquisitions
	clientCPU time.Duration // this process's CPU time for them
	// With the n locks held, per hold: live heap, goroutine stacks,
	// goroutines, server watches.
	heap, stack, goroutines, watches float64
	lost                             int // tracked holds already lost then
}

// A grantCell is one implementation of the Weighted with n contenders.
type grantCell struct {
	n        int
	impl     string // dsync, Curator
	sessions int
	res      result
}

func (c queueCell) perHandoff(n int64) float64 {
	if c.handoffs == 0 {
		return 0
	}
	return float64(n) / float64(c.handoffs)
}

func (c holdCell) perHold(n int64) float64 { return float64(n) / float64(c.n) }

func (c holdCell) rate() float64 {
	if c.seconds <= 0 {
		return 0
	}
	return float64(c.n) / c.seconds
}

// runGrowth runs the growth section, or returns nil if gc says not to.
func runGrowth(ctx context.Context, e *env, gc growthConfig) (*growthResult, error) {
	if !gc.run {
		return nil, nil
	}
	begin := time.Now()
	g := &growthResult{window: e.duration, sessionTimeout: e.sessionTimeout}
	log.Printf("growth: %d queue lengths, %d hold counts, %d contender counts (dsync and Curator), windows of %v",
		len(gc.waiters), len(gc.holds), len(gc.contenders), e.duration)
	for _, n := range gc.waiters {
		t0 := time.Now()
		c, err := measureQueue(ctx, e, n, gc.sessions)
		if err != nil {
			return nil, fmt.Errorf("growth: Mutex with %d waiters: %w", n, err)
		}
		log.Printf("growth: Mutex, %4d waiters: %7.1f handoffs/s  %5.2f req/handoff  p50 %6.2fms  p99 %6.2fms  heap %6.0f B/waiter  %4.2f watches/waiter  %d suspensions  (%v)",
			n, float64(c.handoffs)/c.seconds, c.perHandoff(c.reqs.packets), ms(c.p50), ms(c.p99), c.heap, c.watches,
			c.suspended, time.Since(t0).Round(100*time.Millisecond))
		g.queue = append(g.queue, c)
	}
	for _, n := range gc.holds {
		t0 := time.Now()
		cs, err := measureHolds(ctx, e, n)
		if err != nil {
			return nil, fmt.Errorf("growth: %d holds on one session: %w", n, err)
		}
		for _, c := range cs {
			log.Printf("growth: %5d holds, tracked %-5v: %8.0f acquisitions/s  %5.2f req/hold  heap %6.0f B/hold  %4.2f goroutines/hold  %d lost  (%v)",
				n, c.track, c.rate(), c.perHold(c.reqs.packets), c.heap, c.goroutines, c.lost, time.Since(t0).Round(100*time.Millisecond))
		}
		g.holds = append(g.holds, cs...)
	}
	for _, n := range gc.contenders {
		t0 := time.Now()
		cs, err := measureGrants(ctx, e, n, gc.sessions)
		if err != nil {
			return nil, fmt.Errorf("growth: Weighted with %d contenders: %w", n, err)
		}
		for _, c := range cs {
			log.Printf("growth: Weighted, %3d contenders, %-7s (%3d sessions): %7.1f grants/s  %5.2f req/grant  %6d grants in %.1fs  (%v)",
				n, c.impl, c.sessions, c.res.opsPerSec(), c.res.perCycle(c.res.reqs.packets), c.res.ops, c.res.seconds,
				time.Since(t0).Round(100*time.Millisecond))
		}
		g.grants = append(g.grants, cs...)
	}
	log.Printf("growth: took %v", time.Since(begin).Round(time.Second))
	return g, nil
}

// gauges are what the growth section reads from mntr besides the request
// counters (env.read has those). It reads them outside the windows that
// count requests: its mntr is a packet too.
type gauges struct {
	watches   int64 // zk_watch_count: watches set now
	respBytes int64 // zk_response_bytes: bytes of the replies sent so far
}

// readGauges reads the server's mntr.
func readGauges(ctx context.Context, e *env) (gauges, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := e.srv.Mntr(ctx)
	if err != nil {
		return gauges{}, err
	}
	return parseGauges(m)
}

// parseGauges picks the gauges out of mntr's figures.
func parseGauges(m map[string]string) (gauges, error) {
	var g gauges
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"zk_watch_count", &g.watches},
		{"zk_response_bytes", &g.respBytes},
	} {
		v, err := strconv.ParseInt(m[f.key], 10, 64)
		if err != nil {
			return gauges{}, fmt.Errorf("mntr: %s = %q: %w", f.key, m[f.key], err)
		}
		*f.dst = v
	}
	return g, nil
}

// A memSnap is this process's memory after a collection.
type memSnap struct {
	heap, stack uint64 // live heap (HeapAlloc after GC), goroutine stacks (see stackMetric)
	goroutines  int
}

// stackMetric is the stack bytes the last collection scanned: the used part
// of every live goroutine's stack. StackInuse is no measure of those: it
// also counts the stacks of the runtime's threads, one more with each
// thread a burst of blocking calls makes (they stay), and the spans of freed
// stacks that a live one keeps in use; between two snapshots with the same
// 8 goroutines it moved by -230 KB to +850 KB.
const stackMetric = "/gc/scan/stack:bytes"

func memSnapshot() memSnap {
	// Each collection halves the stacks that use less than a quarter of
	// theirs: a few let them settle, so the stacks of goroutines that have
	// nothing to do with the cell move less between two snapshots.
	for range 4 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	stack := []metrics.Sample{{Name: stackMetric}}
	metrics.Read(stack)
	return memSnap{heap: m.HeapAlloc, stack: stack[0].Value.Uint64(), goroutines: runtime.NumGoroutine()}
}

// whole rounds x to a whole number for a table, where a difference of
// snapshots slightly below zero would print as "-0".
func whole(x float64) float64 {
	if r := math.Round(x); r != 0 {
		return r
	}
	return 0
}

// per returns (b - a) / n for each figure of a snapshot.
func per(a, b memSnap, n int) (heap, stack, goroutines float64) {
	f := float64(n)
	return (float64(b.heap) - float64(a.heap)) / f, (float64(b.stack) - float64(a.stack)) / f,
		float64(b.goroutines-a.goroutines) / f
}

// dialSessions opens n dsync Sessions; closeAll closes those opened.
func dialSessions(ctx context.Context, e *env, n int) (ss []*zkconn.Session, closeAll func(), err error) {
	closeAll = func() {
		for _, s := range ss {
			s.Close()
		}
	}
	for range n {
		s, err := e.dial(ctx)
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		ss = append(ss, s)
	}
	return ss, closeAll, nil
}

// A handoff is one acquisition in the queue part: when it happened, and how
// long after the previous holder's Unlock was called.
type handoff struct {
	at, latency time.Duration // at: since the cell's start
}

// measureQueue measures one Mutex with n waiters spread over sessions
// sessions (fewer if n is smaller). A holder takes the lock first; the n
// waiters queue behind it, and once all of them have set their watches the
// process's memory is read. Then the holder lets go, and for the window
// each waiter, when it gets the lock, stamps the time, unlocks and queues
// again at the back, so the queue stays n long. A handoff's latency runs from
// the stamp taken right before one holder's Unlock to the next holder's
// LockContext returning: one process, one monotonic clock.
func measureQueue(ctx context.Context, e *env, n, sessions int) (queueCell, error) {
	ctx, cancel := context.WithTimeout(ctx, e.duration+5*time.Minute)
	defer cancel()
	sessions = min(sessions, n)
	ss, closeAll, err := dialSessions(ctx, e, sessions)
	if err != nil {
		return queueCell{}, err
	}
	defer closeAll()
	path := fmt.Sprintf("/bench/growth/queue-%d", n)
	holder := dsync.NewMutex(ss[0], path)
	if _, err := holder.LockContext(ctx); err != nil {
		return queueCell{}, err
	}
	g0, err := readGauges(ctx, e)
	if err != nil {
		return queueCell{}, err
	}
	m0 := memSnapshot()

	var (
		stop     atomic.Bool
		last     atomic.Int64 // since start, when the last Unlock was called
		handoffs atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	samples := make([][]handoff, n)
	errs := make([]error, n)
	for i := range n {
		m := dsync.NewMutex(ss[i%sessions], path)
		wg.Go(func() {
			for {
				if _, err := m.LockContext(ctx); err != nil {
					errs[i] = err
					return
				}
				now := time.Since(start)
				samples[i] = append(samples[i], handoff{now, now - time.Duration(last.Load())})
				handoffs.Add(1)
				last.Store(int64(time.Since(start)))
				m.Unlock()
				if stop.Load() {
					return
				}
			}
		})
	}
	held := true
	fail := func(err error) (queueCell, error) {
		stop.Store(true)
		if held {
			holder.Unlock()
		}
		wg.Wait()
		return queueCell{}, errors.Join(append(errs, err)...)
	}
	if err := awaitQueued(ctx, e, ss[0], path, n+1); err != nil {
		return fail(err)
	}
	m1 := memSnapshot()
	g1, err := readGauges(ctx, e)
	if err != nil {
		return fail(err)
	}

	c := queueCell{n: n, sessions: sessions}
	c.heap, c.stack, c.goroutines = per(m0, m1, n)
	c.goroutines-- // the waiter's own
	c.watches = float64(g1.watches-g0.watches) / float64(n)

	trouble := watchTrouble(ss)
	before, err := e.read(ctx)
	if err != nil {
		return fail(err)
	}
	last.Store(int64(time.Since(start)))
	t0 := time.Since(start)
	holder.Unlock()
	held = false
	select {
	case <-time.After(e.duration):
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	t1 := time.Since(start)
	c.handoffs = handoffs.Load()
	used, err := e.done(ctx, before)
	c.suspended = trouble()
	if err != nil {
		return fail(err)
	}
	g2, err := readGauges(ctx, e)
	stop.Store(true)
	wg.Wait() // each waiter still queued takes the lock once more
	if err != nil {
		return queueCell{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return queueCell{}, err
	}
	c.seconds = (t1 - t0).Seconds()
	c.reqs, c.clientCPU, c.serverCPU = used.reqs, used.self, used.server
	c.respBytes = g2.respBytes - g1.respBytes
	var lat []time.Duration
	for _, s := range samples {
		for _, h := range s {
			if h.at <= t1 {
				lat = append(lat, h.latency)
			}
		}
	}
	slices.Sort(lat)
	c.p50, c.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return c, nil
}

// watchTrouble subscribes to the state of each of ss; the function it
// returns stops the subscriptions and counts the suspensions and losses
// they saw meanwhile.
func watchTrouble(ss []*zkconn.Session) (count func() int) {
	subs := make([]*zkconn.Subscription, len(ss))
	for i, s := range ss {
		subs[i] = s.Subscribe()
	}
	return func() int {
		n := 0
		for _, sub := range subs {
			for more := true; more; {
				select {
				case ev, ok := <-sub.C():
					more = ok
					if ev.State == zkconn.StateSuspended || ev.State == zkconn.StateLost {
						n++
					}
				default:
					more = false
				}
			}
			sub.Stop()
		}
		return n
	}
}

// awaitQueued returns once path has want children and the server's watch
// count and this process's goroutines have stopped changing: the waiters
// are then blocked, their watches set. Nothing signals that last part, so it
// is polled, every 100 ms.
func awaitQueued(ctx context.Context, e *env, s *zkconn.Session, path string, want int) error {
	h, err := s.Current(ctx)
	if err != nil {
		return err
	}
	for {
		var children []string
		var watch <-chan zk.Event
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			children, _, watch, err = c.ChildrenW(path)
			return err
		})
		if err != nil {
			return err
		}
		if len(children) >= want {
			break
		}
		if _, err := h.Wait(ctx, watch); err != nil {
			return err
		}
	}
	last, lastG := int64(-1), -1
	for {
		st, err := readGauges(ctx, e)
		if err != nil {
			return err
		}
		g := runtime.NumGoroutine()
		if st.watches == last && g == lastG {
			return nil
		}
		last, lastG = st.watches, g
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// measureHolds measures one Session taking n distinct Mutexes, holdWorkers
// at a time, and holding them all: once with Lock (no loss tracking), once
// with LockContext (tracked). Each lock path's parent exists beforehand
// (made here as plain nodes), as it does in steady use: the figures leave
// out creating them.
func measureHolds(ctx context.Context, e *env, n int) ([]holdCell, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	s, err := e.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	dir := fmt.Sprintf("/bench/growth/holds-%d", n)
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/l%05d", dir, i)
	}
	if err := makeParents(ctx, s, dir, paths); err != nil {
		return nil, err
	}
	ms := make([]*dsync.Mutex, n)
	for i, p := range paths {
		ms[i] = dsync.NewMutex(s, p)
	}
	var cells []holdCell
	for _, track := range []bool{false, true} {
		base := runtime.NumGoroutine()
		m0 := memSnapshot()
		g0, err := readGauges(ctx, e)
		if err != nil {
			return nil, err
		}
		before, err := e.read(ctx)
		if err != nil {
			return nil, err
		}
		held := make([]context.Context, n)
		t0 := time.Now()
		err = inParallel(n, holdWorkers, func(i int) error {
			if !track {
				ms[i].Lock()
				return nil
			}
			var err error
			held[i], err = ms[i].LockContext(ctx)
			return err
		})
		took := time.Since(t0)
		if err != nil {
			return nil, err
		}
		used, err := e.done(ctx, before)
		if err != nil {
			return nil, err
		}
		g1, err := readGauges(ctx, e)
		if err != nil {
			return nil, err
		}
		m1 := memSnapshot()
		c := holdCell{n: n, track: track, seconds: took.Seconds(), reqs: used.reqs, clientCPU: used.self}
		c.heap, c.stack, c.goroutines = per(m0, m1, n)
		c.watches = float64(g1.watches-g0.watches) / float64(n)
		for _, h := range held {
			if h != nil && h.Err() != nil {
				c.lost++
			}
		}
		cells = append(cells, c)
		inParallel(n, holdWorkers, func(i int) error { ms[i].Unlock(); return nil })
		if err := settle(ctx, s, base); err != nil {
			return nil, err
		}
	}
	return cells, nil
}

// settle waits until the releases sent through s are done: Unlock does not
// wait for its delete, which goes on from a goroutine of its own. A request
// sent after them is answered after them (one connection keeps the order);
// then their goroutines end, and this process is down to base goroutines
// again. Nothing signals that, so it is polled, every 10 ms, for at most 10 s.
func settle(ctx context.Context, s *zkconn.Session, base int) error {
	h, err := s.Current(ctx)
	if err != nil {
		return err
	}
	if err := h.Do(ctx, func(c *zk.Conn) error { _, _, err := c.Exists("/"); return err }); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > base && time.Now().Before(deadline); {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// makeParents creates dir (and its missing ancestors) and paths under it, as
// persistent nodes, a thousand to a transaction.
func makeParents(ctx context.Context, s *zkconn.Session, dir string, paths []string) error {
	h, err := s.Current(ctx)
	if err != nil {
		return err
	}
	acl := zk.WorldACL(zk.PermAll)
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		err := h.Do(ctx, func(c *zk.Conn) error {
			_, err := c.Create(dir[:i], nil, 0, acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	for batch := range slices.Chunk(paths, 1000) {
		ops := make([]any, len(batch))
		for i, p := range batch {
			ops[i] = &zk.CreateRequest{Path: p, Acl: acl}
		}
		if err := h.Do(ctx, func(c *zk.Conn) error { _, err := c.Multi(ops...); return err }); err != nil {
			return err
		}
	}
	return nil
}

// inParallel calls f(0) … f(n-1) on workers goroutines and returns their
// errors; a worker stops at its first.
func inParallel(n, workers int, f func(i int) error) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if errs[w] = f(i); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measureGrants measures a Weighted of max growthSemMax with n contenders:
// dsync's, each contender its own Weighted value on one of at most sessions
// sessions (round-robin), and Curator's, whose bench command gives each
// contender a client (a session) of its own.
func measureGrants(ctx context.Context, e *env, n, sessions int) ([]grantCell, error) {
	sessions = min(sessions, n)
	path := fmt.Sprintf("/bench/growth/sem-%d", n)
	ss, closeAll, err := dialSessions(ctx, e, sessions)
	if err != nil {
		return nil, err
	}
	d, err := runGo(ctx, e, n, func(i int) (contender, error) {
		w := dsync.NewWeighted(ss[i%sessions], path+"/dsync", growthSemMax)
		return simple(
			func(ctx context.Context) error { return w.Acquire(ctx, 1) },
			func() error { w.Release(1); return nil },
			func() {}), nil
	})
	closeAll()
	if err != nil {
		return nil, fmt.Errorf("dsync: %w", err)
	}
	c, err := curatorRunner(curator.Semaphore, strconv.Itoa(growthSemMax))(ctx, e, path+"/curator", n)
	if err != nil {
		return nil, fmt.Errorf("Curator: %w", err)
	}
	return []grantCell{{n, "dsync", sessions, d}, {n, "Curator", n, c}}, nil
}

// markdown formats the section; "" for nil.
func (g *growthResult) markdown() string {
	if g == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Cost as the work grows\n\n")
	fmt.Fprintf(&b, "How each figure moves with N, on loopback (`go run ./bench -only growth` runs this section alone; "+
		"chart: [growth.svg](growth.svg)). Windows of %v. req: requests the server received (mntr zk_packets_received), "+
		"split as writes + reads; CPU: this process's (getrusage) or the JVM's, and the server's (/proc), in µs.\n\n", g.window)

	if len(g.queue) > 0 {
		b.WriteString("### One Mutex, N waiters\n\n")
		b.WriteString("Each waiter is a Mutex value of its own (its own node in the queue, as a process of its own would have), " +
			"on one of the sessions, round-robin. Each one that gets the lock unlocks at once and queues again at the back, " +
			"so N stay queued. Latency: from a stamp taken right before one holder's Unlock to the next holder's LockContext " +
			"returning (one process, one clock). KB/handoff: the server's reply bytes (zk_response_bytes). Memory: this " +
			"process after a GC with the N waiters queued and their watches set, less the same before, per waiter: live heap " +
			"(HeapAlloc), goroutine stacks (the part in use of every live goroutine's, as the collection scanned them), " +
			"goroutines beyond the waiter's own; watches: the server's " +
			"zk_watch_count, per waiter.\n\n")
		b.WriteString("| waiters | sessions | handoffs/s | req/handoff | writes + reads | KB/handoff | CPU client | CPU server | p50 ms | p99 ms | heap B/waiter | stack B/waiter | goroutines/waiter | watches/waiter |\n")
		b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, c := range g.queue {
			fmt.Fprintf(&b, "| %d | %d | %.0f | %.2f | %.2f + %.2f | %.1f | %.0f | %.0f | %.2f | %.2f | %.0f | %.0f | %.2f | %.2f |\n",
				c.n, c.sessions, float64(c.handoffs)/c.seconds, c.perHandoff(c.reqs.packets),
				c.perHandoff(c.reqs.writes), c.perHandoff(c.reqs.reads), c.perHandoff(c.respBytes)/1024,
				c.perHandoff(c.clientCPU.Microseconds()), c.perHandoff(c.serverCPU.Microseconds()),
				ms(c.p50), ms(c.p99), whole(c.heap), whole(c.stack), c.goroutines, c.watches)
		}
		b.WriteString("\nRequests per handoff stay flat; what grows with N is one reply. A waiter that queues again lists " +
			"the lock path to find the node just ahead of its own (the node layout offers no other way: a node's name " +
			"begins with a random UUID its creator chose), and that listing holds all N names. Reply bytes per handoff grow in " +
			"proportion to N, and with them the client's CPU (decoding and scanning the names) and the server's " +
			"(writing them); on loopback, where CPU bounds a handoff, handoffs/s and latency follow. The handoff's other " +
			"requests each name a single node.\n")
		for _, c := range g.queue {
			if c.suspended > 0 {
				fmt.Fprintf(&b, "\nWith %d waiters, sessions were suspended or lost %d times in the window: those figures are suspect.\n",
					c.n, c.suspended)
			}
		}
		b.WriteString("\n")
	}

	if len(g.holds) > 0 {
		b.WriteString("### One session, N distinct Mutexes held at once\n\n")
		fmt.Fprintf(&b, "One Session takes N Mutexes on N paths, %d goroutines at a time, and holds them all; then again "+
			"with loss tracking. Lock does not track a hold; LockContext does (it watches the node and the connection, and "+
			"cancels the hold's context on loss). Each path's parent exists beforehand, as in steady use. acq/s: N over the "+
			"time to take them all; req and CPU: per hold, for the acquisitions; then per hold with all N held, after a GC: "+
			"live heap, goroutine stacks (the part in use, as the collection scanned them), goroutines, watches "+
			"on the server.\n\n", holdWorkers)
		b.WriteString("| holds | tracking | acq/s | req/hold | CPU client | heap B/hold | stack B/hold | goroutines/hold | watches/hold |\n")
		b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, c := range g.holds {
			mode := "Lock (untracked)"
			if c.track {
				mode = "LockContext (tracked)"
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.2f | %.0f | %.0f | %.0f | %.2f | %.2f |\n",
				c.n, mode, c.rate(), c.perHold(c.reqs.packets), c.perHold(c.clientCPU.Microseconds()),
				whole(c.heap), whole(c.stack), c.goroutines, c.watches)
		}
		if slices.ContainsFunc(g.holds, func(c holdCell) bool { return c.n <= holdWorkers }) {
			fmt.Fprintf(&b, "\nAt %d holds or fewer the acquisitions are one wave of concurrent requests, over a few tens of "+
				"milliseconds, so their acq/s moves between runs more than with N: compare the larger N.\n", holdWorkers)
		}
		b.WriteString("\n")
	}

	if len(g.grants) > 0 {
		fmt.Fprintf(&b, "### Weighted (max %d), N contenders\n\n", growthSemMax)
		b.WriteString("Each contender loops Acquire(ctx, 1), Release(1) (Curator: acquire(), returnLease()), so the internal " +
			"lock's queue is N long and the maximum seldom binds. dsync: a Weighted value per contender on the sessions shown, " +
			"round-robin; Curator: internal/curator's bench command, which gives every contender a client, so a session, of " +
			"its own (it has no way to share one). p50: acquire latency. Per grant: requests, and CPU of the client (this " +
			"process; Curator's JVM) and of the server.\n\n")
		b.WriteString("| contenders | dsync sessions | grants/s | p50 ms | req/grant | writes + reads | CPU client | CPU server " +
			"| Curator sessions | grants/s | p50 ms | req/grant | writes + reads | CPU client | CPU server | Curator/dsync req |\n")
		b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, n := range g.contenderCounts() {
			d, okD := g.grant(n, "dsync")
			c, okC := g.grant(n, "Curator")
			cells := func(gc grantCell, ok bool) string {
				if !ok {
					return "— | — | — | — | — | — | —"
				}
				r := gc.res
				return fmt.Sprintf("%d | %.0f | %.2f | %.2f | %s | %.0f | %.0f", gc.sessions, r.opsPerSec(), ms(r.p50),
					r.perCycle(r.reqs.packets), split(r), r.perCycle(r.clientCPU.Microseconds()), r.perCycle(r.serverCPU.Microseconds()))
			}
			ratio := "—"
			if dq := d.res.perCycle(d.res.reqs.packets); okD && okC && dq > 0 {
				ratio = fmt.Sprintf("%.2f×", c.res.perCycle(c.res.reqs.packets)/dq)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", n, cells(d, okD), cells(c, okC), ratio)
		}
		b.WriteString("\n")
	}

	if lines := g.trends(); len(lines) > 0 {
		b.WriteString("From the smallest N to the largest:\n\n")
		for _, l := range lines {
			b.WriteString("- " + l + "\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Pings count as requests here too (mntr cannot tell them apart): a go-zookeeper session pings every %v "+
		"(a third of the session timeout) and so does an idle Curator client; in this section that is at most %.3f "+
		"requests per handoff or grant.\n", (g.sessionTimeout / 3).Round(time.Second), g.pingBound())
	return b.String()
}

// contenderCounts returns the Weighted's contender counts, in the order run.
func (g *growthResult) contenderCounts() []int {
	var ns []int
	for _, c := range g.grants {
		if !slices.Contains(ns, c.n) {
			ns = append(ns, c.n)
		}
	}
	return ns
}

func (g *growthResult) grant(n int, impl string) (grantCell, bool) {
	for _, c := range g.grants {
		if c.n == n && c.impl == impl {
			return c, true
		}
	}
	return grantCell{}, false
}

// trends says how the figures that should stay flat moved from the first N
// to the last.
func (g *growthResult) trends() []string {
	var out []string
	move := func(what string, n0, n1 int, a, z float64, format string) {
		ratio := "—"
		if a != 0 {
			ratio = fmt.Sprintf("×%.2f", z/a)
		}
		out = append(out, fmt.Sprintf("%s, N = %d → %d: "+format+" → "+format+" (%s)", what, n0, n1, a, z, ratio))
	}
	if q := g.queue; len(q) > 1 {
		a, z := q[0], q[len(q)-1]
		move("Mutex requests per handoff", a.n, z.n, a.perHandoff(a.reqs.packets), z.perHandoff(z.reqs.packets), "%.2f")
		move("Mutex reply bytes per handoff (KB)", a.n, z.n, a.perHandoff(a.respBytes)/1024, z.perHandoff(z.respBytes)/1024, "%.1f")
		move("Mutex client CPU per handoff (µs)", a.n, z.n,
			a.perHandoff(a.clientCPU.Microseconds()), z.perHandoff(z.clientCPU.Microseconds()), "%.0f")
		move("Mutex server CPU per handoff (µs)", a.n, z.n,
			a.perHandoff(a.serverCPU.Microseconds()), z.perHandoff(z.serverCPU.Microseconds()), "%.0f")
		move("Mutex handoffs/s", a.n, z.n, float64(a.handoffs)/a.seconds, float64(z.handoffs)/z.seconds, "%.0f")
		move("Mutex handoff p50 (ms)", a.n, z.n, ms(a.p50), ms(z.p50), "%.2f")
		move("Mutex heap per waiter (B)", a.n, z.n, a.heap, z.heap, "%.0f")
	}
	for _, track := range []bool{false, true} {
		var hs []holdCell
		for _, c := range g.holds {
			if c.track == track {
				hs = append(hs, c)
			}
		}
		if len(hs) < 2 {
			continue
		}
		a, z := hs[0], hs[len(hs)-1]
		name := "Lock"
		if track {
			name = "LockContext"
		}
		move(name+" acquisitions/s", a.n, z.n, a.rate(), z.rate(), "%.0f")
		move(name+" heap per hold (B)", a.n, z.n, a.heap, z.heap, "%.0f")
	}
	for _, impl := range []string{"dsync", "Curator"} {
		ns := g.contenderCounts()
		if len(ns) < 2 {
			break
		}
		a, okA := g.grant(ns[0], impl)
		z, okZ := g.grant(ns[len(ns)-1], impl)
		if okA && okZ {
			move(impl+" Weighted requests per grant", a.n, z.n,
				a.res.perCycle(a.res.reqs.packets), z.res.perCycle(z.res.reqs.packets), "%.2f")
		}
	}
	return out
}

// pingBound returns the most that pings can add to requests per handoff or
// grant in any cell with a go-zookeeper client: each session pings at most
// once per session timeout / 3, plus one. (Curator's bench subtracts its
// calibration run, and its clients are busy, but for its idle waiters the
// same bound holds.)
func (g *growthResult) pingBound() float64 {
	every := g.sessionTimeout.Seconds() / 3
	if every <= 0 {
		return 0
	}
	bound := 0.0
	for _, c := range g.queue {
		if c.handoffs > 0 {
			bound = max(bound, float64(c.sessions)*(math.Floor(c.seconds/every)+1)/float64(c.handoffs))
		}
	}
	for _, c := range g.grants {
		if c.res.ops > 0 {
			bound = max(bound, float64(c.sessions)*(math.Floor(c.res.seconds/every)+1)/float64(c.res.ops))
		}
	}
	return bound
}

// writeChart writes the section's chart as SVG to path, and adds path to
// wrote; nothing for a nil g or an empty path.
func (g *growthResult) writeChart(path string, wrote []string) ([]string, error) {
	if g == nil || path == "" {
		return wrote, nil
	}
	if err := os.WriteFile(path, []byte(g.chart().svg()), 0o644); err != nil {
		return wrote, err
	}
	return append(wrote, path), nil
}

// The chart: a row of small panels per part, each one figure against N
// (log scale), one line per series.

type gChart struct {
	title string
	rows  [][]gPanel
}

type gPanel struct {
	title, xLabel string
	series        []gSeries
}

type gSeries struct {
	label  string
	color  string
	dashed bool
	points []gPoint
}

type gPoint struct{ x, y float64 }

const (
	gColorDsync   = "#1f5fbf" // the main chart's colours
	gColorCurator = "#2a9d3a"
	gColorAlt     = "#e07b10"
)

// chart builds the section's chart from its results.
func (g *growthResult) chart() gChart {
	c := gChart{title: "dsync: cost as the work grows (N across, log scale; figures up, linear from 0)"}
	line := func(label, color string, dashed bool, pts []gPoint) gSeries {
		return gSeries{label: label, color: color, dashed: dashed, points: pts}
	}
	if len(g.queue) > 0 {
		var req, watches, cpuC, cpuS, p50, p99, heap, stack []gPoint
		for _, q := range g.queue {
			x := float64(q.n)
			req = append(req, gPoint{x, q.perHandoff(q.reqs.packets)})
			watches = append(watches, gPoint{x, q.watches})
			cpuC = append(cpuC, gPoint{x, q.perHandoff(q.clientCPU.Microseconds())})
			cpuS = append(cpuS, gPoint{x, q.perHandoff(q.serverCPU.Microseconds())})
			p50 = append(p50, gPoint{x, ms(q.p50)})
			p99 = append(p99, gPoint{x, ms(q.p99)})
			heap = append(heap, gPoint{x, q.heap / 1024})
			stack = append(stack, gPoint{x, q.stack / 1024})
		}
		c.rows = append(c.rows, []gPanel{
			{"Mutex: requests per handoff", "waiters", []gSeries{
				line("requests per handoff", gColorDsync, false, req),
				line("server watches per waiter", gColorAlt, true, watches)}},
			{"Mutex: CPU per handoff, µs", "waiters", []gSeries{
				line("client (this process)", gColorDsync, false, cpuC),
				line("server", gColorAlt, true, cpuS)}},
			{"Mutex: handoff latency, ms", "waiters", []gSeries{
				line("p50", gColorDsync, false, p50),
				line("p99", gColorDsync, true, p99)}},
			{"Mutex: client memory per waiter, KB", "waiters", []gSeries{
				line("live heap", gColorDsync, false, heap),
				line("goroutine stack", gColorDsync, true, stack)}},
		})
	}
	if len(g.holds) > 0 {
		var rate, cpu, mem, gor [2][]gPoint
		for _, h := range g.holds {
			k, x := 0, float64(h.n)
			if h.track {
				k = 1
			}
			rate[k] = append(rate[k], gPoint{x, h.rate()})
			cpu[k] = append(cpu[k], gPoint{x, h.perHold(h.clientCPU.Microseconds())})
			mem[k] = append(mem[k], gPoint{x, (h.heap + h.stack) / 1024})
			gor[k] = append(gor[k], gPoint{x, h.goroutines})
		}
		pair := func(title string, pts [2][]gPoint) gPanel {
			return gPanel{title, "locks held", []gSeries{
				line("Lock (untracked)", gColorDsync, true, pts[0]),
				line("LockContext (tracked)", gColorDsync, false, pts[1])}}
		}
		c.rows = append(c.rows, []gPanel{
			pair("One session: acquisitions/s", rate),
			pair("One session: client CPU per hold, µs", cpu),
			pair("One session: KB per hold (heap + stack)", mem),
			pair("One session: goroutines per hold", gor),
		})
	}
	if len(g.grants) > 0 {
		var req, p50, cpu [2][]gPoint
		for _, gc := range g.grants {
			k := 0
			if gc.impl == "Curator" {
				k = 1
			}
			x, r := float64(gc.n), gc.res
			req[k] = append(req[k], gPoint{x, r.perCycle(r.reqs.packets)})
			p50[k] = append(p50[k], gPoint{x, ms(r.p50)})
			cpu[k] = append(cpu[k], gPoint{x, r.perCycle(r.clientCPU.Microseconds())})
		}
		pair := func(title string, pts [2][]gPoint) gPanel {
			return gPanel{title, "contenders", []gSeries{
				line("dsync Weighted", gColorDsync, false, pts[0]),
				line("Curator InterProcessSemaphoreV2", gColorCurator, false, pts[1])}}
		}
		c.rows = append(c.rows, []gPanel{
			pair(fmt.Sprintf("Weighted (max %d): requests per grant", growthSemMax), req),
			pair(fmt.Sprintf("Weighted (max %d): client CPU per grant, µs", growthSemMax), cpu),
			pair(fmt.Sprintf("Weighted (max %d): acquire p50, ms", growthSemMax), p50),
		})
	}
	return c
}

// Layout of the SVG, in pixels.
const (
	gPanelW     = 330
	gPanelH     = 300
	gHeaderH    = 40
	gPlotLeft   = 56
	gPlotRight  = 16
	gPlotTop    = 34
	gPlotBottom = 96 // x labels, axis name, legend
)

// svg renders c as a standalone SVG document; text stays text.
func (c gChart) svg() string {
	cols := 1
	for _, r := range c.rows {
		cols = max(cols, len(r))
	}
	w, h := cols*gPanelW, gHeaderH+len(c.rows)*gPanelH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="15" text-anchor="middle">%s</text>`+"\n", w/2, gEsc(c.title))
	for i, r := range c.rows {
		for j, p := range r {
			p.svg(&b, j*gPanelW, gHeaderH+i*gPanelH)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// svg draws p with its top left corner at x0, y0.
func (p gPanel) svg(b *strings.Builder, x0, y0 int) {
	left, right := float64(x0+gPlotLeft), float64(x0+gPanelW-gPlotRight)
	top, bottom := float64(y0+gPlotTop), float64(y0+gPanelH-gPlotBottom)
	fmt.Fprintf(b, `<g><text x="%d" y="%d" font-size="12" font-weight="bold" text-anchor="middle">%s</text>`+"\n",
		x0+gPanelW/2, y0+18, gEsc(p.title))

	var xs []float64
	ymax := 0.0
	for _, s := range p.series {
		for _, pt := range s.points {
			if !slices.Contains(xs, pt.x) && pt.x > 0 {
				xs = append(xs, pt.x)
			}
			ymax = max(ymax, pt.y)
		}
	}
	slices.Sort(xs)
	step, top1 := gTicks(ymax)
	xpos := logScale(xs, left, right)
	ypos := func(v float64) float64 { return bottom - (max(v, 0)/top1)*(bottom-top) }

	// Grid and y ticks.
	for v := 0.0; v <= top1+step/2; v += step {
		y := ypos(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e2e2e2"/>`+"\n", left, y, right, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-5, y+4, gEsc(gTickLabel(v, step)))
	}
	// x ticks at the measured N.
	for _, x := range xs {
		px := xpos(x)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e2e2e2"/>`+"\n", px, top, px, bottom)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, bottom+15, gEsc(gNumber(x)))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#b0b0b0"/>`+"\n",
		left, top, right-left, bottom-top)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#707070">%s (log scale)</text>`+"\n",
		(left+right)/2, bottom+31, gEsc(p.xLabel))

	// Later series first, each wider than the one after it, so that a line
	// lying on another still shows at its edges.
	for i, s := range slices.Backward(p.series) {
		var pts []string
		for _, pt := range s.points {
			if pt.x > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xpos(pt.x), ypos(pt.y)))
			}
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		width := 2 + 2*i
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%d"%s/>`+"\n",
				strings.Join(pts, " "), s.color, width, dash)
		}
		for _, pt := range pts {
			xy := strings.Split(pt, ",")
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="%.1f" fill="%s"/>`+"\n", xy[0], xy[1], 2.5+float64(width)/2, s.color)
		}
		// Legend, below the axis name.
		ly := bottom + 50 + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n",
			left, ly-4, left+24, ly-4, s.color, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+30, ly, gEsc(s.label))
	}
	b.WriteString("</g>\n")
}

// logScale maps the sorted positive xs onto left..right by log10, the
// smallest at left and the largest at right (one value: in the middle).
func logScale(xs []float64, left, right float64) func(float64) float64 {
	if len(xs) < 2 || xs[0] == xs[len(xs)-1] {
		return func(float64) float64 { return (left + right) / 2 }
	}
	lo, hi := math.Log10(xs[0]), math.Log10(xs[len(xs)-1])
	pad := (right - left) * 0.06
	return func(x float64) float64 {
		return left + pad + (math.Log10(x)-lo)/(hi-lo)*(right-left-2*pad)
	}
}

// gTicks returns a round step and the top of a 0-based axis that holds ymax
// (1, 2 or 5 times a power of ten; 4 to 8 steps).
func gTicks(ymax float64) (step, top float64) {
	if ymax <= 0 || math.IsNaN(ymax) || math.IsInf(ymax, 0) {
		return 1, 1
	}
	raw := ymax / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; raw <= step {
			break
		}
	}
	return step, math.Ceil(ymax/step-1e-9) * step
}

// gTickLabel formats a tick value with as many decimals as step needs.
func gTickLabel(v, step float64) string {
	d := 0
	if step < 1 {
		d = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// gNumber formats N with thousands separators (10,000).
func gNumber(x float64) string {
	s := strconv.FormatFloat(x, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// esc escapes s for SVG text and attributes.
func gEsc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
