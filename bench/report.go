package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// runInfo describes the run, for the report's header.
type runInfo struct {
	date           string
	goVersion      string
	cpus           int
	zkVersion      string
	duration       time.Duration // of a round
	rounds         int
	sessionTimeout time.Duration
	took           time.Duration
}

// report formats the results as Markdown: the main table (one row per
// primitive and session count, dsync and each peer side by side, with the
// ratio of dsync's ops/s to each peer's), the RWMutex table (reads and
// writes apart), then the requests per cycle split into writes and reads,
// then how it was measured.
func report(info runInfo, plan []planned, results []cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# dsync benchmark results\n\n")
	fmt.Fprintf(&b, "`go run ./bench` (make bench), %s: %s, %d CPUs, ZooKeeper %s (standalone, loopback, fsync off),\n",
		info.date, info.goVersion, info.cpus, info.zkVersion)
	fmt.Fprintf(&b, "Curator 5.4 (Debian's jars); back-to-back acquire/release cycles: for dsync and zk.Lock the median of %d rounds of %v,\n"+
		"taking turns, for Curator one window of %v; session timeout %v; the run took %v.\n\n",
		info.rounds, info.duration, info.duration*time.Duration(info.rounds), info.sessionTimeout, info.took.Round(time.Second))

	fmt.Fprintf(&b, "## Throughput, acquire latency and ZooKeeper requests per cycle\n\n")
	fmt.Fprintf(&b, "ops/s: cycles per second, all sessions together. p50, p99: acquire latency in ms. req: requests the server received per cycle. dsync/peer: ratio of ops/s (above 1: dsync is faster).\n\n")
	table(&b, plan, results, []string{"ops/s", "p50", "p99", "req"}, stats, true)
	if hasRW(plan) {
		fmt.Fprintf(&b, "\n## RWMutex: reads and writes\n\n")
		b.WriteString(rwIntro + "\n\n")
		rwTable(&b, plan, results)
		b.WriteString(scaling(plan, results))
	}

	fmt.Fprintf(&b, "\n## Requests per cycle: writes + reads\n\n")
	fmt.Fprintf(&b, "Writes: create, delete, multi (dsync's release is one multi) (mntr zk_cnt_updatelatency). Reads: getChildren, getData, exists, and pings (zk_cnt_readlatency).\n\n")
	table(&b, plan, results, []string{""}, split, false)

	b.WriteString(method)
	fmt.Fprintf(&b, "  In this run that is at most %.3f requests per cycle in any dsync or zk.Lock cell.\n", pingBound(info, results))
	return b.String()
}

// readmeTables formats what README.md shows between the bench markers: the
// main table and the RWMutex table.
func readmeTables(info runInfo, plan []planned, results []cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`make bench` of %s (%d CPUs; the whole report: [bench/results.md](bench/results.md)):\n\n", info.date, info.cpus)
	table(&b, plan, results, []string{"ops/s", "p50", "p99", "req"}, stats, true)
	if hasRW(plan) {
		b.WriteString("\n" + rwIntro + "\n\n")
		rwTable(&b, plan, results)
		b.WriteString(scaling(plan, results))
	}
	return b.String()
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

// stats formats ops/s, p50, p99 and requests per cycle as four cells.
func stats(r result) string {
	return fmt.Sprintf("%.0f | %.2f | %.2f | %.2f", r.opsPerSec(), ms(r.p50), ms(r.p99), r.perCycle(r.reqs.packets))
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

const method = `
## How it was measured

- One ZooKeeper 3.8 server (zkconn/zktest), fsync off (zookeeper.forceSync=no) for every implementation, on
  the same machine as the clients. Each cell uses its own lock path.
- Every simulated session is a ZooKeeper session of its own on its own TCP connection: a zkconn.Session with
  its own dsync primitive (dsync), a *zk.Conn with its own zk.NewLock (zk.Lock), a Curator client with its
  own recipe instance, one thread each, all in one JVM (Curator, internal/curator's "bench" command).
- Each session runs acquire/release cycles back to back until the window ends, then finishes its cycle.
  Latency is that of the acquire call (Lock, Acquire(ctx, 1), RLock; Curator's acquire()). An RWMutex
  session draws each cycle's kind at random (read with the workload's probability), and runs one untimed
  cycle of each kind first.
- Requests: the delta of mntr's zk_packets_received over the window, less the mntr request itself. For dsync
  and zk.Lock, mntr is read right before and right after the window, after one untimed warm-up cycle per
  session. The Curator program reports only at its end, so its count covers the whole JVM run (connect,
  one warm-up cycle per session, close); the same command run with a 0 s window measures that overhead,
  which is subtracted (an estimate: warm-up cycles contend differently from run to run).
- Curator's window is timed by the JVM (from its start signal to the end of the last thread, closing its
  client included); dsync's and zk.Lock's by this program.
- Pings count as requests: ZooKeeper 3.8's mntr has no counter that tells them apart (a ping is a packet and
  a read in zk_cnt_readlatency). go-zookeeper (dsync, zk.Lock) pings every session timeout / 3 even when
  busy; Curator pings only idle connections, and its sessions are never idle in the window.
`

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
