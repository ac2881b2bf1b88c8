// Command bench measures dsync against its peers in one run (make bench):
// dsync's Mutex against go-zookeeper's zk.Lock and Curator's
// InterProcessMutex, its Weighted against Curator's InterProcessSemaphoreV2,
// and its SemaphoreMutex against Curator's InterProcessSemaphoreMutex, each
// on 1, 8 and 32 sessions; its RWMutex against Curator's
// InterProcessReadWriteLock at 90 % and at 50 % reads, on 8 and 32 sessions;
// and how soon its Election has a new leader after the leader goes, against
// Curator's LeaderLatch (the failover section).
//
// It starts one ZooKeeper server (zkconn/zktest: standalone, on loopback,
// without fsync) and builds the Curator 5.4 program of internal/curator. It
// measures the cells in each network profile of -delays: loopback, where the
// clients connect to the server directly, then through a zktest Proxy (in a
// process of its own: this program run as "bench serve-proxy TARGET DELAY")
// that delays every packet by 1 ms, then by 5 ms, each way. In each profile
// it times a single request's round trip in batches of a hundred, before
// the cells and after each (the median of all), the unit of the handoffs per
// round trip it reports for the contended Mutex. The delayed profiles run
// the workloads other than Mutex on at most 8 sessions
// (-delayed-max-sessions): there a queue is bound by round trips,
// not by CPU, so 32 sessions tell little more than 8 and take the longest (a
// JVM with 32 clients to connect and warm up through the proxy).
//
// For every cell (workload × sessions × implementation) it runs
// acquire/release cycles, back to back, for a fixed time on that many
// sessions — each its own ZooKeeper session and TCP connection: a
// zkconn.Session for dsync, a *zk.Conn for zk.Lock, a Curator client (in one
// JVM) for Curator — and records cycles per second, the median and 99th
// percentile of the acquire latency, the requests the server received per
// cycle (from its mntr counters), and the CPU time per cycle of the clients
// (getrusage for this process, /proc/self/stat for the JVM, over the timed
// window) and of the server (/proc/PID/stat). In an RWMutex cell each cycle
// takes the read lock with the workload's probability, else the write lock,
// and the cycles and latencies of reads and writes are also kept apart. The
// implementations in this process (dsync, zk.Lock) run in rounds, taking
// turns, and each cell keeps its median round (by cycles per second), so
// that a passing load on a shared machine does not decide a ratio; Curator,
// a JVM per run, runs once for as long as the rounds take.
//
// It prints a Markdown report and writes it to bench/results.md, with a
// chart of ops/s against sessions, one row of panels per profile, to
// bench/chart.svg, and the main table of the 1 ms profile to README.md,
// between the lines <!-- bench:begin --> and <!-- bench:end -->. Run it
// from the module root:
//
//	go run ./bench [-delays 0,1ms,5ms] [-delayed-max-sessions 8] [-d 2s] [-rounds 3] [-sessions 1,8,32] [-rw-sessions 8,32] [-rw-mix 90,50] [-only rw]
//	go run ./bench -only failover [-failover-reps 5] [-failover-kill-reps 3] [-failover-session-timeout 4s] [-failover-delays 0,1ms] -readme README.md
//
// -only runs some workloads (mutex, sem, semmutex, rw for every RWMutex mix,
// or one mix such as rw90), or growth: how the costs grow with the work (see
// growth.go; -growth-* flags), or failover: how long an election takes to
// elect the next leader when its leader resigns, is sent SIGTERM or is
// killed, against Curator's LeaderLatch, in every profile (see failover.go;
// -failover-* flags; its leaders run in processes of their own: this
// program run as "bench elect-leader CONNECT PATH ID SESSION_TIMEOUT", or
// the Curator program's "lead latch"); README.md gets its table between
// <!-- failover:begin --> and <!-- failover:end -->. A partial run measures
// only the profiles its parts run in, and writes only the files named by
// -results, -chart, -readme and -growth-chart on its command line.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// A runner measures one implementation of a workload on path with sessions
// sessions.
type runner func(ctx context.Context, e *env, path string, sessions int) (result, error)

// An impl is one implementation of a workload.
type impl struct {
	name   string // table column: dsync, zk.Lock, Curator
	legend string // chart legend
	color  colorName
	run    runner
}

type colorName int

const (
	implDsync colorName = iota
	implZkLock
	implCurator
)

// A workload is one primitive, measured on dsync and its peers.
type workload struct {
	key   string // path segment, and its name for -only
	title string // table row and chart panel title
	impls []impl // dsync first
	// rw marks an RWMutex workload: readPct % of its cycles read.
	rw      bool
	readPct int
}

// peers are the columns of the table after dsync, in order.
var peers = []string{"zk.Lock", "Curator"}

// semMax is the maximum of the semaphore workload.
const semMax = 3

var workloads = []workload{
	{key: "mutex", title: "Mutex", impls: []impl{
		{"dsync", "dsync Mutex", implDsync, dsyncMutex},
		{"zk.Lock", "go-zookeeper zk.Lock", implZkLock, zkLock},
		{"Curator", "Curator InterProcessMutex", implCurator, curatorRunner(curator.Mutex)},
	}},
	{key: "sem", title: "Weighted (max " + strconv.Itoa(semMax) + ")", impls: []impl{
		{"dsync", "dsync Weighted", implDsync, dsyncWeighted(semMax)},
		{"Curator", "Curator InterProcessSemaphoreV2", implCurator, curatorRunner(curator.Semaphore, strconv.Itoa(semMax))},
	}},
	{key: "semmutex", title: "SemaphoreMutex", impls: []impl{
		{"dsync", "dsync SemaphoreMutex", implDsync, dsyncSemaphoreMutex},
		{"Curator", "Curator InterProcessSemaphoreMutex", implCurator, curatorRunner(curator.SemaphoreMutex)},
	}},
}

// rwWorkload returns the RWMutex workload with readPct % read cycles.
func rwWorkload(readPct int) workload {
	mix := fmt.Sprintf("%d %% reads", readPct)
	return workload{
		key:   "rw" + strconv.Itoa(readPct),
		title: "RWMutex, " + mix,
		impls: []impl{
			{"dsync", "dsync RWMutex, " + mix, implDsync, dsyncRWMutex(readPct)},
			{"Curator", "Curator RW lock, " + mix, implCurator, curatorRunner(curator.ReadWrite, strconv.Itoa(readPct))},
		},
		rw:      true,
		readPct: readPct,
	}
}

// A planned workload is one to run, on each of its session counts.
type planned struct {
	workload
	sessions []int
}

// A cell is one measurement.
type cell struct {
	workload string
	sessions int
	impl     string
	res      result
}

// config is what one run of the benchmark does.
type config struct {
	growth         growthConfig   // the growth section (growth.go)
	failover       failoverConfig // the failover section (failover.go)
	profiles       []profile
	delayedMax     int           // see sessionsIn
	duration       time.Duration // of a round
	rounds         int
	sessionTimeout time.Duration
	plan           []planned
	// Where to write the report, the chart and README's tables; none if
	// empty.
	resultsPath, chartPath, readmePath string
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	if len(os.Args) == 4 && os.Args[1] == proxyCommand {
		log.SetPrefix("bench proxy: ")
		if err := serveProxy(os.Args[2], os.Args[3]); err != nil {
			log.Fatal(err)
		}
		return
	}
	if len(os.Args) == 6 && os.Args[1] == leaderCommand {
		log.SetPrefix("bench elect-leader: ")
		if err := serveLeader(os.Args[2], os.Args[3], os.Args[4], os.Args[5]); err != nil {
			log.Fatal(err)
		}
		return
	}
	delays := flag.String("delays", "0,1ms,5ms", "comma-separated network profiles: delays each way through a proxy, 0 for loopback")
	delayedMax := flag.Int("delayed-max-sessions", 8, "in the delayed profiles, run workloads other than Mutex on at most this many sessions (0: no limit)")
	duration := flag.Duration("d", 2*time.Second, "timed window of each round")
	rounds := flag.Int("rounds", 3, "rounds of the in-process implementations per cell (the median is kept)")
	sessionList := flag.String("sessions", "1,8,32", "comma-separated session counts (Mutex, Weighted, SemaphoreMutex)")
	rwSessionList := flag.String("rw-sessions", "8,32", "comma-separated session counts of the RWMutex workloads")
	rwMix := flag.String("rw-mix", "90,50", "comma-separated shares of read cycles of the RWMutex workloads, in % (0–100)")
	only := flag.String("only", "", "comma-separated workloads to run (mutex, sem, semmutex, rw or rwNN, growth, failover); default all")
	timeout := flag.Duration("session-timeout", 30*time.Second, "ZooKeeper session timeout of every client")
	resultsPath := flag.String("results", "bench/results.md", "where to write the Markdown report (empty: nowhere)")
	chartPath := flag.String("chart", "bench/chart.svg", "where to write the SVG chart (empty: nowhere)")
	readmePath := flag.String("readme", "README.md", "write the tables between the bench markers of this file (empty: nowhere)")
	flag.Parse()

	profiles, err := parseProfiles(*delays)
	if err != nil {
		log.Fatal(err)
	}
	sessions, err := counts("-sessions", *sessionList, 1, 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	rwSessions, err := counts("-rw-sessions", *rwSessionList, 1, 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	mixes, err := counts("-rw-mix", *rwMix, 0, 100)
	if err != nil {
		log.Fatal(err)
	}
	if *rounds < 1 {
		log.Fatalf("-rounds: %d; want at least 1", *rounds)
	}
	plan, err := makePlan(sessions, rwSessions, mixes, *only)
	if err != nil {
		log.Fatal(err)
	}
	growth, err := newGrowthConfig(*only)
	if err != nil {
		log.Fatal(err)
	}
	failover, err := newFailoverConfig(*only)
	if err != nil {
		log.Fatal(err)
	}
	cfg := config{
		growth: growth, failover: failover, profiles: profiles, delayedMax: *delayedMax, duration: *duration, rounds: *rounds, sessionTimeout: *timeout, plan: plan,
		resultsPath: *resultsPath, chartPath: *chartPath, readmePath: *readmePath,
	}
	if *only != "" { // a partial run overwrites only what it was told to
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, p := range map[string]*string{"results": &cfg.resultsPath, "chart": &cfg.chartPath, "readme": &cfg.readmePath} {
			if !set[name] {
				*p = ""
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		stop()
		log.Fatal(err)
	}
}

// counts parses a flag's comma-separated list of integers within lo..hi.
func counts(name, list string, lo, hi int) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s: bad value %q; want an integer within %d..%d", name, f, lo, hi)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// makePlan lists the workloads to run: those only names (comma-separated
// keys; "rw" names every RWMutex mix), or all of them if only is empty.
func makePlan(sessions, rwSessions, mixes []int, only string) ([]planned, error) {
	var plan []planned
	for _, w := range workloads {
		plan = append(plan, planned{w, sessions})
	}
	for _, pct := range mixes {
		plan = append(plan, planned{rwWorkload(pct), rwSessions})
	}
	if only == "" {
		return plan, nil
	}
	want := map[string]bool{}
	for _, k := range strings.Split(only, ",") {
		want[strings.TrimSpace(k)] = true
	}
	var keep []planned
	for _, p := range plan {
		if want[p.key] || p.rw && want["rw"] {
			keep = append(keep, p)
			delete(want, p.key)
		}
	}
	delete(want, "rw")
	delete(want, growthKey)   // not a workload: see growth.go
	delete(want, failoverKey) // nor this: see failover.go
	for k := range want {
		return nil, fmt.Errorf("-only: no workload %q (have mutex, sem, semmutex, rw and the mixes of -rw-mix: rw90, …, growth and failover)", k)
	}
	return keep, nil
}

func run(ctx context.Context, cfg config) error {
	begin := time.Now()
	log.Printf("%d profiles of up to %d cells, %d rounds of %v; expect about %v",
		len(cfg.profiles), cellCount(cfg.plan), cfg.rounds, cfg.duration, estimate(cfg).Round(10*time.Second))

	// fsync off for everyone: zktest's default (zookeeper.forceSync=no).
	// The numbers compare clients, not disks.
	srv, err := zktest.StartServer(serverJVM)
	if err != nil {
		return err
	}
	defer srv.Close()
	pid, err := serverPid(srv.Addr())
	if err != nil {
		return fmt.Errorf("the server's pid, for its CPU time: %w", err)
	}
	dir, err := os.MkdirTemp("", "dsync-bench-curator")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tool, err := curator.Build(dir)
	if err != nil {
		return err
	}
	tool.Env = []string{"INTEROP_SESSION_MS=" + strconv.FormatInt(cfg.sessionTimeout.Milliseconds(), 10)}
	e := &env{srv: srv, serverPid: pid, addr: srv.Addr(), tool: tool, duration: cfg.duration, sessionTimeout: cfg.sessionTimeout}
	version := "?"
	if m, err := srv.Mntr(ctx); err == nil {
		version, _, _ = strings.Cut(m["zk_version"], ",")
	}

	if err := warmUp(ctx, e); err != nil {
		return err
	}
	var runs []profileRun
	for _, p := range cfg.profiles {
		if len(cfg.plan) == 0 && !cfg.failover.runsIn(p) {
			continue // nothing to measure there
		}
		r, err := runProfile(ctx, e, cfg, p)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	growth, err := runGrowth(ctx, e, cfg.growth)
	if err != nil {
		return err
	}

	info := runInfo{
		growth:          growth,
		failoverTimeout: cfg.failover.sessionTimeout,
		date:            begin.UTC().Format("2006-01-02 15:04 UTC"),
		goVersion:       runtime.Version(),
		cpus:            runtime.NumCPU(),
		zkVersion:       version,
		duration:        cfg.duration,
		rounds:          cfg.rounds,
		sessionTimeout:  cfg.sessionTimeout,
		delayedMax:      cfg.delayedMax,
		took:            time.Since(begin),
	}
	return write(cfg, info, runs, begin)
}

// cellCount returns the number of cells of plan in one profile.
func cellCount(plan []planned) int {
	n := 0
	for _, p := range plan {
		n += len(p.impls) * len(p.sessions)
	}
	return n
}

// estimate guesses how long cfg takes. Each Curator cell runs a JVM, a few
// seconds to start and connect; each Go round a moment to connect and close.
func estimate(cfg config) time.Duration {
	total := 20*time.Second + 3*warmUpWindow
	window := time.Duration(cfg.rounds) * cfg.duration
	for _, pr := range cfg.profiles {
		total += cfg.failover.estimate(pr)
		for _, p := range cfg.plan {
			n := time.Duration(len(sessionsIn(p, pr, cfg.delayedMax)))
			// a batch of round trips after each cell: a read, a
			// transaction and a relay's hop each time, about a delay
			// each way each
			total += n * (rttSamples + 5) * (6*pr.delay + time.Millisecond)
			for _, im := range p.impls {
				if im.color == implCurator {
					total += n * (window + 3*time.Second)
				} else {
					total += n * time.Duration(cfg.rounds) * (cfg.duration + 300*time.Millisecond)
				}
			}
		}
	}
	return total
}

// sessionsIn returns the session counts of w to run in profile p: all of
// them on loopback, and for the Mutex (its contended cells are the measure
// of handoffs per round trip); in a delayed profile, the others' up to
// delayedMax (0: all).
func sessionsIn(w planned, p profile, delayedMax int) []int {
	if p.delay == 0 || w.key == "mutex" || delayedMax <= 0 {
		return w.sessions
	}
	var ns []int
	for _, n := range w.sessions {
		if n <= delayedMax {
			ns = append(ns, n)
		}
	}
	return ns
}

// runProfile measures every cell of cfg's plan in profile p, then the
// failover section if it runs there: through a delaying proxy if p has a
// delay, after timing a round trip.
func runProfile(ctx context.Context, base *env, cfg config, p profile) (profileRun, error) {
	e := *base
	if p.delay > 0 {
		proxy, err := startProxy(base.srv.Addr(), p.delay)
		if err != nil {
			return profileRun{}, err
		}
		defer proxy.close()
		e.addr = proxy.addr
	}
	var trips roundTrips
	timeTrips := func() error {
		if err := trips.time(ctx, e.addr, cfg.sessionTimeout, rttSamples); err != nil {
			return fmt.Errorf("%s: %w", p.title(), err)
		}
		return nil
	}
	if err := timeTrips(); err != nil {
		return profileRun{}, err
	}
	run := profileRun{profile: p}
	d, rounds := cfg.duration, cfg.rounds
	for _, w := range cfg.plan {
		for _, n := range sessionsIn(w, p, cfg.delayedMax) {
			runs := map[string][]result{}
			for round := range rounds {
				for _, im := range w.impls {
					if im.color == implCurator && round > 0 {
						continue
					}
					span := d
					if im.color == implCurator {
						span = time.Duration(rounds) * d
					}
					res, err := measure(ctx, &e, p, w.workload, im, n, span)
					if err != nil {
						return profileRun{}, err
					}
					runs[im.name] = append(runs[im.name], res)
				}
			}
			for _, im := range w.impls {
				run.cells = append(run.cells, cell{w.key, n, im.name, median(runs[im.name])})
			}
			if err := timeTrips(); err != nil {
				return profileRun{}, err
			}
		}
	}
	run.rtt, run.txn = trips.medians()
	run.hop = trips.hop()
	run.rttLo, run.rttHi = trips.spread()
	log.Printf("profile %s: round trip %.2f ms, of a transaction %.2f ms (medians), a relay's hop %.2f ms (mean), over %d batches of %d; one batch's round trip %.2f–%.2f ms",
		p.title(), ms(run.rtt), ms(run.txn), ms(run.hop), len(trips.batchReads), rttSamples, ms(run.rttLo), ms(run.rttHi))
	if cfg.failover.runsIn(p) {
		var err error
		if run.failover, err = runFailover(ctx, &e, cfg.failover, p); err != nil {
			return profileRun{}, err
		}
	}
	return run, nil
}

// write prints the report and writes the files cfg names.
func write(cfg config, info runInfo, runs []profileRun, begin time.Time) error {
	md := report(info, cfg.plan, runs)
	fmt.Print(md)
	var wrote []string
	if cfg.resultsPath != "" {
		if err := os.WriteFile(cfg.resultsPath, []byte(md), 0o644); err != nil {
			return err
		}
		wrote = append(wrote, cfg.resultsPath)
	}
	if cfg.chartPath != "" {
		if err := os.WriteFile(cfg.chartPath, []byte(makeChart(cfg.plan, runs).svg()), 0o644); err != nil {
			return err
		}
		wrote = append(wrote, cfg.chartPath)
	}
	if cfg.readmePath != "" && len(cfg.plan) > 0 {
		if err := splice(cfg.readmePath, beginMarker, endMarker, readmeTables(info, cfg.plan, runs)); err != nil {
			return err
		}
		wrote = append(wrote, cfg.readmePath)
	}
	if text := readmeFailover(info, runs); cfg.readmePath != "" && text != "" {
		if err := splice(cfg.readmePath, failoverBegin, failoverEnd, text); err != nil {
			return err
		}
		if !slices.Contains(wrote, cfg.readmePath) {
			wrote = append(wrote, cfg.readmePath)
		}
	}
	wrote, err := info.growth.writeChart(cfg.growth.chartPath, wrote)
	if err != nil {
		return err
	}
	log.Printf("wrote %s in %v", cmp.Or(strings.Join(wrote, ", "), "nothing"), time.Since(begin).Round(time.Second))
	return nil
}

// The lines of README.md between which the bench writes its tables: the
// locks' main table, and the failover table.
const (
	beginMarker   = "<!-- bench:begin -->"
	endMarker     = "<!-- bench:end -->"
	failoverBegin = "<!-- failover:begin -->"
	failoverEnd   = "<!-- failover:end -->"
)

// splice replaces what lies between the lines begin and end of the file at
// path with text.
func splice(path, begin, end, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return errors.New(path + ": no " + begin + " … " + end + " markers")
	}
	out := s[:i+len(begin)] + "\n" + text + s[j:]
	return os.WriteFile(path, []byte(out), 0o644)
}

// measure runs im's side of workload w on n sessions for window in profile
// p, and logs the result.
func measure(ctx context.Context, e *env, p profile, w workload, im impl, n int, window time.Duration) (result, error) {
	path := fmt.Sprintf("/bench/%s/%s/%s-%d", p.key(), w.key, strings.ToLower(strings.ReplaceAll(im.name, ".", "")), n)
	cctx, cancel := context.WithTimeout(ctx, window+3*time.Minute)
	defer cancel()
	t0 := time.Now()
	run := *e
	run.duration = window
	res, err := im.run(cctx, &run, path, n)
	if err != nil {
		return result{}, fmt.Errorf("%s, %s, %s, %d sessions: %w", p.title(), w.title, im.name, n, err)
	}
	log.Printf("%-8s %-16s %-8s %2d sessions: %7.1f ops/s  p50 %7.2fms  p99 %7.2fms  %5.2f req  cpu %4.0f+%4.0fµs  (%v)",
		p.key(), w.title, im.name, n, res.opsPerSec(), ms(res.p50), ms(res.p99), res.perCycle(res.reqs.packets),
		us(res.cpuPerCycle(res.clientCPU)), us(res.cpuPerCycle(res.serverCPU)), time.Since(t0).Round(100*time.Millisecond))
	return res, nil
}

// median returns the result with the median cycles per second (the lower
// middle one of an even number).
func median(rs []result) result {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.opsPerSec(), b.opsPerSec()) })
	return rs[(len(rs)-1)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func find(results []cell, workload string, sessions int, impl string) (result, bool) {
	for _, c := range results {
		if c.workload == workload && c.sessions == sessions && c.impl == impl {
			return c.res, true
		}
	}
	return result{}, false
}
