// Command bench measures dsync against its peers in one run (make bench):
// dsync's Mutex against go-zookeeper's zk.Lock and Curator's
// InterProcessMutex, its Weighted against Curator's InterProcessSemaphoreV2,
// and its SemaphoreMutex against Curator's InterProcessSemaphoreMutex, each
// on 1, 8 and 32 sessions.
//
// It starts one ZooKeeper server (zkconn/zktest: standalone, on loopback,
// without fsync) and builds the Curator 5.4 program of internal/curator. For
// every cell (workload × sessions × implementation) it runs acquire/release
// cycles, back to back, for a fixed time on that many sessions — each its own
// ZooKeeper session and TCP connection: a zkconn.Session for dsync, a
// *zk.Conn for zk.Lock, a Curator client (in one JVM) for Curator — and
// records cycles per second, the median and 99th percentile of the acquire
// latency, and the requests the server received per cycle (from its mntr
// counters). The implementations in this process (dsync, zk.Lock) run in
// rounds, taking turns, and each cell keeps its median round (by cycles per
// second), so that a passing load on a shared machine does not decide a
// ratio; Curator, a JVM per run, runs once for as long as the rounds take.
//
// It prints a Markdown table and writes it to bench/results.md, with a chart
// of ops/s against sessions to bench/chart.png. Run it from the module root:
//
//	go run ./bench [-d 2s] [-rounds 3] [-sessions 1,8,32]
package main

import (
	"cmp"
	"context"
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
	key   string // path segment and Curator KIND
	title string // table row and chart panel title
	impls []impl // dsync first
}

// peers are the columns of the table after dsync, in order.
var peers = []string{"zk.Lock", "Curator"}

// semMax is the maximum of the semaphore workload.
const semMax = 3

var workloads = []workload{
	{"mutex", "Mutex", []impl{
		{"dsync", "dsync Mutex", implDsync, dsyncMutex},
		{"zk.Lock", "go-zookeeper zk.Lock", implZkLock, zkLock},
		{"Curator", "Curator InterProcessMutex", implCurator, curatorRunner(curator.Mutex, 0)},
	}},
	{"sem", "Weighted (max " + strconv.Itoa(semMax) + ")", []impl{
		{"dsync", "dsync Weighted", implDsync, dsyncWeighted(semMax)},
		{"Curator", "Curator InterProcessSemaphoreV2", implCurator, curatorRunner(curator.Semaphore, semMax)},
	}},
	{"semmutex", "SemaphoreMutex", []impl{
		{"dsync", "dsync SemaphoreMutex", implDsync, dsyncSemaphoreMutex},
		{"Curator", "Curator InterProcessSemaphoreMutex", implCurator, curatorRunner(curator.SemaphoreMutex, 0)},
	}},
}

// A cell is one measurement.
type cell struct {
	workload string
	sessions int
	impl     string
	res      result
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	duration := flag.Duration("d", 2*time.Second, "timed window of each round")
	rounds := flag.Int("rounds", 3, "rounds of the in-process implementations per cell (the median is kept)")
	sessionList := flag.String("sessions", "1,8,32", "comma-separated session counts")
	timeout := flag.Duration("session-timeout", 30*time.Second, "ZooKeeper session timeout of every client")
	resultsPath := flag.String("results", "bench/results.md", "where to write the Markdown table")
	chartPath := flag.String("chart", "bench/chart.png", "where to write the chart")
	flag.Parse()

	var sessions []int
	for _, f := range strings.Split(*sessionList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("-sessions: bad count %q", f)
		}
		sessions = append(sessions, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *rounds < 1 {
		log.Fatalf("-rounds: %d; want at least 1", *rounds)
	}
	if err := run(ctx, *duration, *rounds, *timeout, sessions, *resultsPath, *chartPath); err != nil {
		stop()
		log.Fatal(err)
	}
}

func run(ctx context.Context, d time.Duration, rounds int, sessionTimeout time.Duration, sessions []int, resultsPath, chartPath string) error {
	begin := time.Now()
	cells := 0
	javaCells := 0
	for _, w := range workloads {
		for _, im := range w.impls {
			cells += len(sessions)
			if im.name == "Curator" {
				javaCells += len(sessions)
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
	tool.Env = []string{"INTEROP_SESSION_MS=" + strconv.FormatInt(sessionTimeout.Milliseconds(), 10)}
	e := &env{srv: srv, tool: tool, duration: d, sessionTimeout: sessionTimeout}
	version := "?"
	if m, err := srv.Mntr(ctx); err == nil {
		version, _, _ = strings.Cut(m["zk_version"], ",")
	}

	var results []cell
	for _, w := range workloads {
		for _, n := range sessions {
			runs := map[string][]result{}
			for round := range rounds {
				for _, im := range w.impls {
					if im.color == implCurator && round > 0 {
						continue
					}
					span := d
					if im.color == implCurator {
						span = window
					}
					res, err := measure(ctx, e, w, im, n, span)
					if err != nil {
						return err
					}
					runs[im.name] = append(runs[im.name], res)
				}
			}
			for _, im := range w.impls {
				results = append(results, cell{w.key, n, im.name, median(runs[im.name])})
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
		sessionTimeout: sessionTimeout,
		took:           time.Since(begin),
	}
	md := report(info, sessions, results)
	fmt.Print(md)
	if err := os.WriteFile(resultsPath, []byte(md), 0o644); err != nil {
		return err
	}
	f, err := os.Create(chartPath)
	if err != nil {
		return err
	}
	if err := png.Encode(f, makeChart(sessions, results).render()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	log.Printf("wrote %s and %s in %v", resultsPath, chartPath, time.Since(begin).Round(time.Second))
	return nil
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

// makeChart plots ops/s against sessions, one panel per workload.
func makeChart(sessions []int, results []cell) chart {
	c := chart{title: "dsync vs go-zookeeper zk.Lock vs Curator 5.4: acquire/release cycles per second"}
	for _, w := range workloads {
		p := panel{title: w.title}
		for _, im := range w.impls {
			s := series{label: im.legend}
			switch im.color {
			case implDsync:
				s.color, s.marker = colorDsync, markCircle
			case implZkLock:
				s.color, s.marker = colorZkLock, markSquare
			default:
				s.color, s.marker = colorCurator, markDiamond
			}
			for _, n := range sessions {
				if r, ok := find(results, w.key, n, im.name); ok {
					s.points = append(s.points, point{n, r.opsPerSec()})
				}
			}
			p.series = append(p.series, s)
		}
		c.panels = append(c.panels, p)
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
