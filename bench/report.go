package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runInfo describes the run, for the report's header.
type runInfo struct {
	date            string
	goVersion       string
	cpus            int
	zkVersion       string
	duration        time.Duration // of a round
	rounds          int
	sessionTimeout  time.Duration
	delayedMax      int // see sessionsIn
	took            time.Duration
	growth          *growthResult // the growth section (growth.go), if it ran
	failoverTimeout time.Duration // the failover section's session timeout
}

// A profileRun is what was measured in one network profile.
type profileRun struct {
	profile
	rtt time.Duration // a single request's round trip (median)
	txn time.Duration // a small transaction's round trip (median; see roundTrips)
	hop time.Duration // a relay's hop (mean; see relay)
	// rttLo, rttHi: the lowest and highest median round trip of a single
	// batch (see roundTrips.spread)
	rttLo, rttHi time.Duration
	cells        []cell
	failover     []failoverCell // the failover section's, if it ran in this profile
}

// heading returns the profile's title with its round trip.
func (r profileRun) heading() string {
	return fmt.Sprintf("%s (round trip %.2f ms)", capitalize(r.title()), ms(r.rtt))
}

// report formats the results as Markdown: the handoffs per round trip of
// the contended Mutex in every profile, then a section per profile (the
// main table: one row per primitive and session count, dsync and each peer
// side by side, with the ratio of dsync's ops/s to each peer's; the RWMutex
// table, reads and writes apart; the requests per cycle split into writes
// and reads), then how it was measured.
func report(info runInfo, plan []planned, runs []profileRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# dsync benchmark results\n\n")
	fmt.Fprintf(&b, "`go run ./bench` (make bench), %s: %s, %d CPUs, ZooKeeper %s (standalone, on loopback, full JIT, warmed up, fsync off),\n",
		info.date, info.goVersion, info.cpus, info.zkVersion)
	if len(plan) == 0 { // a partial run of the other sections
		profiles := ""
		if len(runs) > 0 {
			profiles = "network profiles: " + profileList(runs) + "; "
		}
		fmt.Fprintf(&b, "Curator 5.4 (Debian's jars); %sthe run took %v.\n", profiles, info.took.Round(time.Second))
	} else {
		fmt.Fprintf(&b, "Curator 5.4 (Debian's jars); back-to-back acquire/release cycles: for dsync and zk.Lock the median of %d rounds of %v,\n"+
			"taking turns, for Curator one window of %v; session timeout %v; network profiles: %s%s; the run took %v.\n\n",
			info.rounds, info.duration, info.duration*time.Duration(info.rounds), info.sessionTimeout, profileList(runs),
			delayedNote(info, runs), info.took.Round(time.Second))
	}

	if hasMutex(plan) && slices.ContainsFunc(runs, func(r profileRun) bool { return r.delay > 0 }) {
		fmt.Fprintf(&b, "## Contended Mutex: handoffs per round trip\n\n")
		b.WriteString(handoffIntro + "\n\n")
		handoffTable(&b, plan, runs)
	}
	for _, r := range runs {
		if len(plan) == 0 {
			break // a partial run of the other sections
		}
		fmt.Fprintf(&b, "\n## %s\n\n", r.heading())
		profileSection(&b, plan, r)
	}

	b.WriteString(info.growth.markdown())
	b.WriteString(failoverMarkdown(info, runs))
	if len(plan) == 0 && info.growth == nil {
		return b.String() // the failover section says how it measures
	}
	var all []cell
	for _, r := range runs {
		all = append(all, r.cells...)
	}
	b.WriteString(method(pingBound(info, all), tickBound(all), spreads(runs)))
	return b.String()
}

// profileSection writes the tables of one profile.
func profileSection(b *strings.Builder, plan []planned, r profileRun) {
	fmt.Fprintf(b, "%s\n\n", profileIntro(r.profile))
	fmt.Fprintf(b, "### Throughput, acquire latency, requests and CPU time per cycle\n\n")
	b.WriteString(mainIntro + "\n\n")
	table(b, plan, r.cells, mainCols, stats, true)
	if hasRW(plan) {
		fmt.Fprintf(b, "\n### RWMutex: reads and writes\n\n")
		b.WriteString(rwIntro + "\n\n")
		rwTable(b, plan, r.cells)
		b.WriteString(scaling(plan, r.cells))
	}
	fmt.Fprintf(b, "\n### Requests per cycle: writes + reads\n\n")
	fmt.Fprintf(b, "Writes: create, delete, multi (dsync's release is one multi) (mntr zk_cnt_updatelatency). Reads: getChildren, getData, exists, and pings (zk_cnt_readlatency).\n\n")
	table(b, plan, r.cells, []string{""}, split, false)
}

// delayedNote says, if it applies, on how many sessions the delayed
// profiles run the workloads other than Mutex.
func delayedNote(info runInfo, runs []profileRun) string {
	if info.delayedMax <= 0 || !slices.ContainsFunc(runs, func(r profileRun) bool { return r.delay > 0 }) {
		return ""
	}
	return fmt.Sprintf(" (where they delay, workloads other than Mutex run on at most %d sessions: their queues are bound by round trips there)", info.delayedMax)
}

// profileIntro says how the clients reach the server in p.
func profileIntro(p profile) string {
	if p.delay == 0 {
		return "The clients connect to the server directly, on loopback."
	}
	return fmt.Sprintf("Every client, Go and Java, connects through a zktest Proxy (a process of its own) that delays every packet by %s ms each way.",
		strconv.FormatFloat(ms(p.delay), 'f', -1, 64))
}

// profileList names the profiles, in order.
func profileList(runs []profileRun) string {
	var names []string
	for _, r := range runs {
		names = append(names, r.title())
	}
	return strings.Join(names, ", ")
}

// readmeProfile returns the run README.md shows: the 1 ms profile, else the
// first with a delay, else the first.
func readmeProfile(runs []profileRun) profileRun {
	for _, r := range runs {
		if r.delay == time.Millisecond {
			return r
		}
	}
	for _, r := range runs {
		if r.delay > 0 {
			return r
		}
	}
	return runs[0]
}

// readmeTables formats what README.md shows between the bench markers: the
// main table of one profile (readmeProfile) and its handoffs per round trip.
func readmeTables(info runInfo, plan []planned, runs []profileRun) string {
	if len(runs) == 0 {
		return ""
	}
	r := readmeProfile(runs)
	var b strings.Builder
	var others []profileRun
	for _, o := range runs {
		if o.profile != r.profile {
			others = append(others, o)
		}
	}
	rest := "The RWMutex tables"
	if len(others) > 0 {
		rest = "The other profiles (" + profileList(others) + "), the RWMutex tables"
	}
	fmt.Fprintf(&b, "`make bench` of %s (%d CPUs), profile %s. %s A request's round trip is %.2f ms. "+
		"%s and how it was measured: [bench/results.md](bench/results.md).\n\n",
		info.date, info.cpus, r.title(), profileIntro(r.profile), ms(r.rtt), rest)
	b.WriteString(mainIntro + "\n\n")
	table(&b, plan, r.cells, mainCols, stats, true)
	if line := handoffLine(plan, r); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	return b.String()
}

// mainCols are the columns of each implementation in the main table.
var mainCols = []string{"ops/s", "p50", "p99", "req", "cpu", "zk cpu"}

const mainIntro = "ops/s: cycles per second, all sessions together. p50, p99: acquire latency in ms. " +
	"req: requests the server received per cycle. cpu: the clients' CPU time per cycle in µs (this Go process for " +
	"dsync and zk.Lock, the JVM for Curator); zk cpu: the ZooKeeper server's. dsync/peer: ratio of ops/s (above 1: dsync is faster)."

var handoffIntro = fmt.Sprintf("A contended Mutex hands the lock on at best once per round trip: the release travels to the "+
	"server, the next holder is told, and its own release travels back. ops/s × RTT, where RTT is a single "+
	"request's round trip through the same network (the median of batches of %d exists requests, timed before the "+
	"profile's cells and after each, with no cell running), is the share of that limit a lock reaches: 1 is one handoff per round trip. "+
	"A handoff waits on a write, though, which the server logs before it answers: × txn uses the round trip of a "+
	"small transaction instead (a multi of a create and a delete, timed the same way), the limit for a handoff that "+
	"waits on one write and its notification. × hop uses the mean hop of a relay, timed in the same batches: two "+
	"go-zookeeper clients hand a token on by such a transaction each, which the other learns of by a watch set "+
	"beforehand, and a hop runs from one notification to the next: a handoff with no lock around it, the most a "+
	"lock on this client library can reach through that network (a mean, as ops/s are). "+
	"On loopback a round trip is scheduling and CPU rather than network, so the limit says little there and "+
	"the table leaves loopback out.", rttSamples)

func hasMutex(plan []planned) bool {
	return slices.ContainsFunc(plan, func(p planned) bool { return p.key == "mutex" })
}

// handoffTable writes one row per profile and contended session count of
// the Mutex workload: each implementation's ops/s and ops/s × RTT.
func handoffTable(b *strings.Builder, plan []planned, runs []profileRun) {
	i := slices.IndexFunc(plan, func(p planned) bool { return p.key == "mutex" })
	w := plan[i]
	b.WriteString("| profile | RTT (ms) | txn (ms) | hop (ms) | sessions |")
	rule := "|---|--:|--:|--:|--:|"
	for _, im := range w.impls {
		fmt.Fprintf(b, " %s ops/s | × RTT | × txn | × hop |", im.name)
		rule += "--:|--:|--:|--:|"
	}
	b.WriteString("\n" + rule + "\n")
	for _, r := range runs {
		if r.delay == 0 {
			continue
		}
		for _, n := range w.sessions {
			if n < 2 {
				continue
			}
			fmt.Fprintf(b, "| %s | %.2f | %.2f | %.2f | %d |", r.title(), ms(r.rtt), ms(r.txn), ms(r.hop), n)
			for _, im := range w.impls {
				if c, ok := find(r.cells, w.key, n, im.name); ok {
					perRTT, perTxn, perHop := r.perTrip(c)
					fmt.Fprintf(b, " %.0f | %.2f | %.2f | %.2f |", c.opsPerSec(), perRTT, perTxn, perHop)
				} else {
					b.WriteString(" — | — | — | — |")
				}
			}
			b.WriteString("\n")
		}
	}
}

// perTrip returns c's handoffs per round trip in r: ops/s × RTT, × txn and
// × hop (see handoffIntro).
func (r profileRun) perTrip(c result) (perRTT, perTxn, perHop float64) {
	ops := c.opsPerSec()
	return ops * r.rtt.Seconds(), ops * r.txn.Seconds(), ops * r.hop.Seconds()
}

// handoffLine says, in one sentence, the contended Mutex's ops/s × RTT of
// each implementation in r.
func handoffLine(plan []planned, r profileRun) string {
	i := slices.IndexFunc(plan, func(p planned) bool { return p.key == "mutex" })
	if i < 0 {
		return ""
	}
	w := plan[i]
	var parts []string
	for _, n := range w.sessions {
		if n < 2 {
			continue
		}
		var vals []string
		for _, im := range w.impls {
			if c, ok := find(r.cells, w.key, n, im.name); ok {
				perRTT, perTxn, perHop := r.perTrip(c)
				vals = append(vals, fmt.Sprintf("%s %.2f (× txn %.2f, × hop %.2f)", im.name, perRTT, perTxn, perHop))
			}
		}
		if len(vals) > 0 {
			parts = append(parts, fmt.Sprintf("%d sessions: %s", n, strings.Join(vals, ", ")))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Contended Mutex, handoffs per round trip (ops/s × RTT; 1 is the limit, one handoff per round trip; "+
		"× txn: per round trip of a small transaction, %.2f ms, the write a handoff waits on; × hop: per mean hop of a "+
		"relay of such transactions between two clients, %.2f ms, a handoff with no lock around it): ", ms(r.txn), ms(r.hop)) +
		strings.Join(parts, "; ") + "."
}

const rwIntro = "RWMutex (Curator: InterProcessReadWriteLock): each cycle takes the read lock (RLock, RUnlock; Curator's " +
	"readLock()) with the workload's probability, else the write lock (Lock, Unlock; writeLock()). ops/s: that kind's " +
	"cycles per second; p50, p99: their acquire latency in ms; dsync/Curator: ratio of ops/s. The server's counters " +
	"cannot tell a reader's requests from a writer's (every session does both), so requests per cycle (req) are over " +
	"all cycles, in the main table."

func hasRW(plan []planned) bool {
	return slices.ContainsFunc(plan, func(p planned) bool { return p.rw })
}

// table writes one Markdown row per workload and session count: the cells
// format makes of dsync's result and of each peer's (headed by cols, "—"
// where a peer has no such workload), then, with ratios, dsync's ops/s over
// each peer's.
func table(b *strings.Builder, plan []planned, results []cell, cols []string, format func(result) string, ratios bool) {
	heads := func(name string) string { // the first column names the implementation
		h := append([]string{strings.TrimSpace(name + " " + cols[0])}, cols[1:]...)
		return strings.Join(h, " | ")
	}
	right := strings.Repeat("--:|", len(cols))
	missing := strings.TrimSuffix(strings.Repeat(" — |", len(cols)), " |")
	b.WriteString("| primitive | sessions | " + heads("dsync") + " |")
	rule := "\n|---|--:|" + right
	for _, p := range peers {
		b.WriteString(" " + heads(p) + " |")
		rule += right
	}
	if ratios {
		for _, p := range peers {
			fmt.Fprintf(b, " dsync/%s |", p)
			rule += "--:|"
		}
	}
	b.WriteString(rule + "\n")
	for _, w := range plan {
		for _, n := range w.sessions {
			d, ok := find(results, w.key, n, "dsync")
			if !ok {
				continue
			}
			fmt.Fprintf(b, "| %s | %d | %s |", w.title, n, format(d))
			for _, p := range peers {
				if r, ok := find(results, w.key, n, p); ok {
					fmt.Fprintf(b, " %s |", format(r))
				} else {
					b.WriteString(missing + " |")
				}
			}
			for _, p := range peers {
				if !ratios {
					break
				}
				if r, ok := find(results, w.key, n, p); ok && r.opsPerSec() > 0 {
					fmt.Fprintf(b, " %.2f× |", d.opsPerSec()/r.opsPerSec())
				} else {
					b.WriteString(" — |")
				}
			}
			b.WriteString("\n")
		}
	}
}

// rwTable writes two rows per RWMutex workload and session count, reads
// then writes: dsync's ops/s, p50 and p99 of that kind, Curator's, and the
// ratio of their ops/s.
func rwTable(b *strings.Builder, plan []planned, results []cell) {
	b.WriteString("| RWMutex | sessions | cycles | dsync ops/s | p50 | p99 | Curator ops/s | p50 | p99 | dsync/Curator |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, w := range plan {
		if !w.rw {
			continue
		}
		for _, n := range w.sessions {
			d, ok := find(results, w.key, n, "dsync")
			if !ok {
				continue
			}
			c, hasC := find(results, w.key, n, "Curator")
			for _, k := range []struct {
				name string
				side func(result) side
			}{
				{"reads", func(r result) side { return r.read }},
				{"writes", func(r result) side { return r.write }},
			} {
				fmt.Fprintf(b, "| %d %% reads | %d | %s | %s |", w.readPct, n, k.name, sideStats(d, k.side(d)))
				if !hasC {
					b.WriteString(" — | — | — | — |\n")
					continue
				}
				fmt.Fprintf(b, " %s |", sideStats(c, k.side(c)))
				if co := c.sideOpsPerSec(k.side(c)); co > 0 {
					fmt.Fprintf(b, " %.2f× |\n", d.sideOpsPerSec(k.side(d))/co)
				} else {
					b.WriteString(" — |\n")
				}
			}
		}
	}
}

// scaling says, for each RWMutex workload measured on more than one session
// count, how read cycles per second grew from the fewest sessions to the
// most.
func scaling(plan []planned, results []cell) string {
	var b strings.Builder
	for _, w := range plan {
		if !w.rw || len(w.sessions) < 2 {
			continue
		}
		lo, hi := slices.Min(w.sessions), slices.Max(w.sessions)
		var parts []string
		for _, name := range []string{"dsync", "Curator"} {
			a, okA := find(results, w.key, lo, name)
			z, okZ := find(results, w.key, hi, name)
			if !okA || !okZ || a.sideOpsPerSec(a.read) <= 0 {
				continue
			}
			ra, rz := a.sideOpsPerSec(a.read), z.sideOpsPerSec(z.read)
			parts = append(parts, fmt.Sprintf("%s %.0f → %.0f (×%.2f)", name, ra, rz, rz/ra))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "\nReads per second at %d %% reads, %d → %d sessions: %s.\n", w.readPct, lo, hi, strings.Join(parts, "; "))
		}
	}
	return b.String()
}

// stats formats ops/s, p50, p99, requests per cycle and the client's and
// the server's CPU time per cycle as six cells.
func stats(r result) string {
	return fmt.Sprintf("%.0f | %.2f | %.2f | %.2f | %.0f | %.0f", r.opsPerSec(), ms(r.p50), ms(r.p99), r.perCycle(r.reqs.packets),
		us(r.cpuPerCycle(r.clientCPU)), us(r.cpuPerCycle(r.serverCPU)))
}

// sideStats formats a kind of cycle's ops/s, p50 and p99 as three cells
// (no percentiles without cycles).
func sideStats(r result, s side) string {
	if s.ops == 0 {
		return "0 | — | —"
	}
	return fmt.Sprintf("%.0f | %.2f | %.2f", r.sideOpsPerSec(s), ms(s.p50), ms(s.p99))
}

// split formats requests per cycle as writes + reads.
func split(r result) string {
	return fmt.Sprintf("%.2f + %.2f", r.perCycle(r.reqs.writes), r.perCycle(r.reqs.reads))
}

// spreads lists each profile's range of single batches' median round trips.
func spreads(runs []profileRun) string {
	var parts []string
	for _, r := range runs {
		if r.rttHi > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f–%.2f ms", r.title(), ms(r.rttLo), ms(r.rttHi)))
		}
	}
	if len(parts) == 0 {
		return "no profile"
	}
	return strings.Join(parts, ", ")
}

// method says how it was measured, with the bounds of this run on what
// pings add to the requests per cycle and on what a clock tick is per cycle,
// and the spread of its round trips (see spreads).
func method(pingBound, tickBound float64, spreads string) string {
	return fmt.Sprintf(`
## How it was measured

- One ZooKeeper 3.8 server (zkconn/zktest), fsync off (zookeeper.forceSync=no) for every implementation, on
  the same machine as the clients. Each cell uses its own lock path.
- The server's JVM has the full JIT and a 512 MiB heap from its start, as a production server does (zktest's
  test servers stop at the quick JIT tier and start with a 16 MiB heap, to start fast), and is warmed up
  before the first cell: 8 sessions each of dsync's Mutex, zk.Lock and dsync's Weighted, 5s each, untimed,
  so that every request path is compiled before anything is measured: without that, the first cells would
  pay for the compiling, on the server's CPU and in its latency, and the later ones would not.
- Network profiles: on loopback the clients connect to the server directly. In a delayed profile every client
  (this program's and the JVM's) connects through a zktest Proxy that holds every packet for the delay in each
  direction (Proxy.SetDelay), run as a process of its own ("bench serve-proxy") so that its CPU time is not
  the Go clients'. The proxy sleeps on Linux timerfds, not on Go's timers, which wait for the runtime's poller
  in whole milliseconds: with them a packet left 0.15 ms after its time idle and, under 8 sessions' contended
  Mutex, 0.34 ms after it at the median and 0.81 ms at the 90th percentile; with timerfds, 0.07 ms at the
  median, idle or loaded (0.14 ms at the 90th percentile). Still, the round trip (RTT) is measured, not
  assumed — a go-zookeeper client's exists("/") %d times in a row through the same proxy (then as many small
  transactions, and a relay of as many between two clients: see the handoff section), in a batch before
  the profile's cells and one after each cell, the median of all: a single batch's median describes a
  moment rather than the network the cells ran on (in this run it ranged over %s).
- Every simulated session is a ZooKeeper session of its own on its own TCP connection: a zkconn.Session with
  its own dsync primitive (dsync), a *zk.Conn with its own zk.NewLock (zk.Lock), a Curator client with its
  own recipe instance, one thread each, all in one JVM (Curator, internal/curator's "bench" command).
- Each session runs acquire/release cycles back to back until the window ends, then finishes its cycle.
  Latency is that of the acquire call (Lock, Acquire(ctx, 1), RLock; Curator's acquire()). An RWMutex
  session draws each cycle's kind at random (read with the workload's probability), and runs one untimed
  cycle of each kind first.
- Requests: the delta of mntr's zk_packets_received over the window, less the mntr request itself, read right
  before and right after the window, after one untimed warm-up cycle per session and before any session
  closes. The Curator program says when its clients are warm and waits to be told to go, and keeps its
  clients open after its report until it is told to close them, so its window is metered the same way.
- Curator's window is timed by the JVM (from its start signal to the end of the last thread's last cycle);
  dsync's and zk.Lock's by this program. The Go sessions of a cell connect, warm up and close in parallel,
  outside the window.
- Pings count as requests: ZooKeeper 3.8's mntr has no counter that tells them apart (a ping is a packet and
  a read in zk_cnt_readlatency). go-zookeeper (dsync, zk.Lock) pings every session timeout / 3 even when
  busy; Curator pings only idle connections, and its sessions are never idle in the window.
  In this run that is at most %.3f requests per cycle in any dsync or zk.Lock cell.
- CPU time is read with the request counters, around the same window. The clients': getrusage(RUSAGE_SELF)
  of this process for dsync and zk.Lock (nothing else runs in it meanwhile: the proxy has its own process),
  the JVM's utime + stime from /proc/PID/stat for Curator. The server's: the ZooKeeper JVM's utime + stime
  from /proc/PID/stat. Both JVMs' figures include their garbage collection and JIT compilation. /proc counts
  in clock ticks of 10 ms, so those figures are good to a tick per window: in this run at most %.0f µs per
  cycle in any cell.
`, rttSamples, spreads, pingBound, tickBound)
}

// tickBound returns the most that one clock tick of /proc's CPU times
// amounts to per cycle in any cell, in µs.
func tickBound(cells []cell) float64 {
	bound := 0.0
	for _, c := range cells {
		if c.res.ops > 0 {
			bound = max(bound, us(clockTick)/float64(c.res.ops))
		}
	}
	return bound
}

// pingBound returns the most that pings can add to the requests per cycle
// of any go-zookeeper cell: each session pings at most once per session
// timeout / 3, plus one.
func pingBound(info runInfo, results []cell) float64 {
	bound := 0.0
	every := info.sessionTimeout.Seconds() / 3
	for _, c := range results {
		if c.impl == "Curator" || c.res.ops == 0 {
			continue
		}
		pings := float64(c.sessions) * (math.Floor(c.res.seconds/every) + 1)
		bound = max(bound, pings/float64(c.res.ops))
	}
	return bound
}
