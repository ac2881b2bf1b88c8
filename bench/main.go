// Command bench measures dsync against its peers in one run (make bench):
// dsync's Mutex against go-zookeeper's zk.Lock and Curator's
// InterProcessMutex, its Weighted against Curator's InterProcessSemaphoreV2,
// and its SemaphoreMutex against Curator's InterProcessSemaphoreMutex, each
// on 1, 8 and 32 sessions; and its RWMutex against Curator's
// InterProcessReadWriteLock at 90 % and at 50 % reads, on 8 and 32 sessions.
//
// It starts one ZooKeeper server (zkconn/zktest: standalone, on loopback,
// without fsync) and builds the Curator 5.4 program of internal/curator. For
// every cell (workload × sessions × implementation) it runs acquire/release
// cycles, back to back, for a fixed time on that many sessions — each its own
// ZooKeeper session and TCP connection: a zkconn.Session for dsync, a
// *zk.Conn for zk.Lock, a Curator client (in one JVM) for Curator — and
// records cycles per second, the median and 99th percentile of the acquire
// latency, and the requests the server received per cycle (from its mntr
// counters). In an RWMutex cell each cycle takes the read lock with the
// workload's probability, else the write lock, and the cycles and latencies
// of reads and writes are also kept apart. The implementations in this
// process (dsync, zk.Lock) run in rounds, taking turns, and each cell keeps
// its median round (by cycles per second), so that a passing load on a
// shared machine does not decide a ratio; Curator, a JVM per run, runs once
// for as long as the rounds take.
//
// It prints a Markdown report and writes it to bench/results.md, with a
// chart of ops/s against sessions to bench/chart.png, and its tables to
// README.md, between the lines <!-- bench:begin --> and <!-- bench:end -->.
// Run it from the module root:
//
//	go run ./bench [-d 2s] [-rounds 3] [-sessions 1,8,32] [-rw-sessions 8,32] [-rw-mix 90,50] [-only rw]
//
// -only runs some workloads (mutex, sem, semmutex, rw for every RWMutex mix,
// or one mix such as rw90); a partial run writes only the files named by
// -results, -chart and -readme on its command line.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
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
	duration := flag.Duration("d", 2*time.Second, "timed window of each round")
	rounds := flag.Int("rounds", 3, "rounds of the in-process implementations per cell (the median is kept)")
	sessionList := flag.String("sessions", "1,8,32", "comma-separated session counts (Mutex, Weighted, SemaphoreMutex)")
	rwSessionList := flag.String("rw-sessions", "8,32", "comma-separated session counts of the RWMutex workloads")
	rwMix := flag.String("rw-mix", "90,50", "comma-separated shares of read cycles of the RWMutex workloads, in % (0–100)")
	only := flag.String("only", "", "comma-separated workloads to run (mutex, sem, semmutex, rw or rwNN); default all")
	timeout := flag.Duration("session-timeout", 30*time.Second, "ZooKeeper session timeout of every client")
	resultsPath := flag.String("results", "bench/results.md", "where to write the Markdown report (empty: nowhere)")
	chartPath := flag.String("chart", "bench/chart.png", "where to write the chart (empty: nowhere)")
	readmePath := flag.String("readme", "README.md", "write the tables between the bench markers of this file (empty: nowhere)")
	flag.Parse()

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
	cfg := config{
		duration: *duration, rounds: *rounds, sessionTimeout: *timeout, plan: plan,
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
	for k := range want {
		return nil, fmt.Errorf("-only: no workload %q (have mutex, sem, semmutex, rw and the mixes of -rw-mix: rw90, …)", k)
	}
	return keep, nil
}

func run(ctx context.Context, cfg config) error {
	begin := time.Now()
	d, rounds := cfg.duration, cfg.rounds
	cells := 0
	javaCells := 0
	for _, p := range cfg.plan {
		for _, im := range p.impls {
			cells += len(p.sessions)
			if im.color == implCurator {
				javaCells += len(p.sessions)
			}
		}
	}
	// Each Curator cell runs two JVMs (calibration and timed run), a few
	// seconds each to start and connect; each Go round a moment to connect
	// and close.
	goRuns := (cells - javaCells) * rounds
	window := time.Duration(rounds) * d
	est := time.Duration(goRuns)*(d+200*time.Millisecond) + time.Duration(javaCells)*(window+4*time.Second) + 20*time.Second
	log.Printf("%d cells, %d rounds of %v; expect about %v", cells, rounds, d, est.Round(10*time.Second))

	// fsync off for everyone: zktest's default (zookeeper.forceSync=no).
	// The numbers compare clients, not disks.
	srv, err := zktest.StartServer()
	if err != nil {
		return err
	}
	defer srv.Close()
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
	e := &env{srv: srv, tool: tool, duration: d, sessionTimeout: cfg.sessionTimeout}
	version := "?"
	if m, err := srv.Mntr(ctx); err == nil {
		version, _, _ = strings.Cut(m["zk_version"], ",")
	}

	var results []cell
	for _, p := range cfg.plan {
		for _, n := range p.sessions {
			runs := map[string][]result{}
			for round := range rounds {
				for _, im := range p.impls {
					if im.color == implCurator && round > 0 {
						continue
					}
					span := d
					if im.color == implCurator {
						span = window
					}
					res, err := measure(ctx, e, p.workload, im, n, span)
					if err != nil {
						return err
					}
					runs[im.name] = append(runs[im.name], res)
				}
			}
			for _, im := range p.impls {
				results = append(results, cell{p.key, n, im.name, median(runs[im.name])})
			}
		}
	}

	info := runInfo{
		date:           begin.UTC().Format("2006-01-02 15:04 UTC"),
		goVersion:      runtime.Version(),
		cpus:           runtime.NumCPU(),
		zkVersion:      version,
		duration:       d,
		rounds:         rounds,
		sessionTimeout: cfg.sessionTimeout,
		took:           time.Since(begin),
	}
	md := report(info, cfg.plan, results)
	fmt.Print(md)
	var wrote []string
	if cfg.resultsPath != "" {
		if err := os.WriteFile(cfg.resultsPath, []byte(md), 0o644); err != nil {
			return err
		}
		wrote = append(wrote, cfg.resultsPath)
	}
	if cfg.chartPath != "" {
		if err := writeChart(cfg.chartPath, makeChart(cfg.plan, results)); err != nil {
			return err
		}
		wrote = append(wrote, cfg.chartPath)
	}
	if cfg.readmePath != "" {
		if err := splice(cfg.readmePath, readmeTables(info, cfg.plan, results)); err != nil {
			return err
		}
		wrote = append(wrote, cfg.readmePath)
	}
	log.Printf("wrote %s in %v", cmp.Or(strings.Join(wrote, ", "), "nothing"), time.Since(begin).Round(time.Second))
	return nil
}

func writeChart(path string, c chart) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.render()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// The lines of README.md between which the bench writes its tables.
const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

// splice replaces what lies between the bench markers of the file at path
// with text.
func splice(path, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return errors.New(path + ": no " + beginMarker + " … " + endMarker + " markers")
	}
	out := s[:i+len(beginMarker)] + "\n" + text + s[j:]
	return os.WriteFile(path, []byte(out), 0o644)
}

// measure runs im's side of workload w on n sessions for window, and logs
// the result.
func measure(ctx context.Context, e *env, w workload, im impl, n int, window time.Duration) (result, error) {
	path := fmt.Sprintf("/bench/%s/%s-%d", w.key, strings.ToLower(strings.ReplaceAll(im.name, ".", "")), n)
	cctx, cancel := context.WithTimeout(ctx, window+3*time.Minute)
	defer cancel()
	t0 := time.Now()
	run := *e
	run.duration = window
	res, err := im.run(cctx, &run, path, n)
	if err != nil {
		return result{}, fmt.Errorf("%s, %s, %d sessions: %w", w.title, im.name, n, err)
	}
	log.Printf("%-16s %-8s %2d sessions: %8.1f ops/s  p50 %7.2fms  p99 %7.2fms  %5.2f req/cycle  (%v)",
		w.title, im.name, n, res.opsPerSec(), ms(res.p50), ms(res.p99), res.perCycle(res.reqs.packets),
		time.Since(t0).Round(100*time.Millisecond))
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

// makeChart plots ops/s against sessions, one panel per workload but for
// the RWMutex workloads, which share one: the first mix in the usual
// colours, the others lighter, with triangles.
func makeChart(plan []planned, results []cell) chart {
	c := chart{title: "dsync vs go-zookeeper zk.Lock vs Curator 5.4: acquire/release cycles per second"}
	rwPanel := -1
	for _, p := range plan {
		i := len(c.panels)
		if p.rw && rwPanel >= 0 {
			i = rwPanel
		} else {
			title := p.title
			if p.rw {
				title, rwPanel = "RWMutex vs Curator's RW lock", i
			}
			c.panels = append(c.panels, panel{title: title})
		}
		light := p.rw && len(c.panels[i].series) > 0
		for _, im := range p.impls {
			s := series{label: im.legend}
			switch im.color {
			case implDsync:
				s.color, s.marker = colorDsync, markCircle
			case implZkLock:
				s.color, s.marker = colorZkLock, markSquare
			default:
				s.color, s.marker = colorCurator, markDiamond
			}
			if light {
				s.color, s.marker = lighter(s.color), markTriangle
			}
			for _, n := range p.sessions {
				if r, ok := find(results, p.key, n, im.name); ok {
					s.points = append(s.points, point{n, r.opsPerSec()})
				}
			}
			c.panels[i].series = append(c.panels[i].series, s)
		}
	}
	return c
}

func find(results []cell, workload string, sessions int, impl string) (result, bool) {
	for _, c := range results {
		if c.workload == workload && c.sessions == sessions && c.impl == impl {
			return c.res, true
		}
	}
	return result{}, false
}
