package main

import (
	"fmt"
	"math"
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
// ratio of dsync's ops/s to each peer's), then the requests per cycle split
// into writes and reads, then how it was measured.
func report(info runInfo, sessions []int, results []cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# dsync benchmark results\n\n")
	fmt.Fprintf(&b, "`go run ./bench` (make bench), %s: %s, %d CPUs, ZooKeeper %s (standalone, loopback, fsync off),\n",
		info.date, info.goVersion, info.cpus, info.zkVersion)
	fmt.Fprintf(&b, "Curator 5.4 (Debian's jars); back-to-back acquire/release cycles: for dsync and zk.Lock the median of %d rounds of %v,\n"+
		"taking turns, for Curator one window of %v; session timeout %v; the run took %v.\n\n",
		info.rounds, info.duration, info.duration*time.Duration(info.rounds), info.sessionTimeout, info.took.Round(time.Second))

	fmt.Fprintf(&b, "## Throughput, acquire latency and ZooKeeper requests per cycle\n\n")
	fmt.Fprintf(&b, "ops/s: cycles per second, all sessions together. p50, p99: acquire latency in ms. req: requests the server received per cycle. dsync/peer: ratio of ops/s (above 1: dsync is faster).\n\n")
	table(&b, sessions, results, []string{"ops/s", "p50", "p99", "req"}, stats, true)

	fmt.Fprintf(&b, "\n## Requests per cycle: writes + reads\n\n")
	fmt.Fprintf(&b, "Writes: create, delete, multi (dsync's release is one multi) (mntr zk_cnt_updatelatency). Reads: getChildren, getData, exists, and pings (zk_cnt_readlatency).\n\n")
	table(&b, sessions, results, []string{""}, split, false)

	b.WriteString(method)
	fmt.Fprintf(&b, "  In this run that is at most %.3f requests per cycle in any dsync or zk.Lock cell.\n", pingBound(info, results))
	return b.String()
}

// table writes one Markdown row per workload and session count: the cells
// format makes of dsync's result and of each peer's (headed by cols, "—"
// where a peer has no such workload), then, with ratios, dsync's ops/s over
// each peer's.
func table(b *strings.Builder, sessions []int, results []cell, cols []string, format func(result) string, ratios bool) {
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
	for _, w := range workloads {
		for _, n := range sessions {
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

// stats formats ops/s, p50, p99 and requests per cycle as four cells.
func stats(r result) string {
	return fmt.Sprintf("%.0f | %.2f | %.2f | %.2f", r.opsPerSec(), ms(r.p50), ms(r.p99), r.perCycle(r.reqs.packets))
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
  Latency is that of the acquire call (Lock, Acquire(ctx, 1); Curator's acquire()).
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
