package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// counters are the server's cumulative request counts, from mntr.
//
// ZooKeeper 3.8 counts every packet a client sends in zk_packets_received:
// requests, pings, connect requests, and the four-letter words such as the
// mntr that reads it. It times every request it processes in one of two
// summaries: zk_cnt_updatelatency for requests that change the tree (create,
// delete, setData, createSession, closeSession) and zk_cnt_readlatency for
// the rest — reads, and pings too: no counter tells pings apart.
type counters struct {
	packets int64 // zk_packets_received
	writes  int64 // zk_cnt_updatelatency
	reads   int64 // zk_cnt_readlatency (pings included)
}

// readCounters asks srv for its counters.
func readCounters(ctx context.Context, srv *zktest.Server) (counters, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := srv.Mntr(ctx)
	if err != nil {
		return counters{}, err
	}
	var c counters
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"zk_packets_received", &c.packets},
		{"zk_cnt_updatelatency", &c.writes},
		{"zk_cnt_readlatency", &c.reads},
	} {
		v, err := strconv.ParseInt(m[f.key], 10, 64)
		if err != nil {
			return counters{}, fmt.Errorf("mntr: %s = %q: %w", f.key, m[f.key], err)
		}
		*f.dst = v
	}
	return c, nil
}

// since returns what the clients sent between the reading b and the reading
// c (c taken after b): the delta less the mntr request that read c.
func (c counters) since(b counters) counters {
	return counters{packets: c.packets - b.packets - 1, writes: c.writes - b.writes, reads: c.reads - b.reads}
}

func (c counters) minus(d counters) counters {
	return counters{packets: c.packets - d.packets, writes: c.writes - d.writes, reads: c.reads - d.reads}
}

// A reading is what the meters say at one moment: the server's request
// counters and CPU time, and this process's CPU time.
type reading struct {
	reqs   counters
	server time.Duration // the ZooKeeper JVM's (/proc/PID/stat)
	self   time.Duration // this process's (getrusage)
}

// read reads the meters: this process's CPU time last, so that the server's
// answering mntr falls outside a window that starts here, and first when a
// window ends (see done).
func (e *env) read(ctx context.Context) (reading, error) {
	reqs, err := readCounters(ctx, e.srv)
	if err != nil {
		return reading{}, err
	}
	server, err := procCPU(e.serverPid)
	if err != nil {
		return reading{}, fmt.Errorf("server CPU time: %w", err)
	}
	self, err := selfCPU()
	if err != nil {
		return reading{}, err
	}
	return reading{reqs, server, self}, nil
}

// done reads the meters at the end of a window that began at the reading
// b, and returns what the window used: the requests and CPU time of the
// server, and this process's CPU time.
func (e *env) done(ctx context.Context, b reading) (reading, error) {
	self, err := selfCPU()
	if err != nil {
		return reading{}, err
	}
	server, err := procCPU(e.serverPid)
	if err != nil {
		return reading{}, fmt.Errorf("server CPU time: %w", err)
	}
	reqs, err := readCounters(ctx, e.srv)
	if err != nil {
		return reading{}, err
	}
	return reading{reqs.since(b.reqs), server - b.server, self - b.self}, nil
}

func (r reading) minus(s reading) reading {
	return reading{r.reqs.minus(s.reqs), r.server - s.server, r.self - s.self}
}

// A result is one implementation's measurement of one workload on some
// number of sessions.
type result struct {
	ops      int64         // cycles completed in the timed window
	seconds  float64       // the window's wall time
	p50, p99 time.Duration // acquire latency
	reqs     counters      // requests the server received in the window
	// CPU time used in the window by the client (this process for dsync and
	// zk.Lock, the JVM for Curator), and by the server.
	clientCPU, serverCPU time.Duration
	// read and write split ops, p50 and p99 between an RWMutex workload's
	// read cycles and write cycles; zero for the other workloads.
	read, write side
}

// A side is one kind of cycle of an RWMutex workload: its cycles in the
// window and their acquire latency (0 without cycles).
type side struct {
	ops      int64
	p50, p99 time.Duration
}

// sideOpsPerSec returns s's cycles per second of r's window.
func (r result) sideOpsPerSec(s side) float64 {
	if r.seconds <= 0 {
		return 0
	}
	return float64(s.ops) / r.seconds
}

func (r result) opsPerSec() float64 {
	if r.seconds <= 0 {
		return 0
	}
	return float64(r.ops) / r.seconds
}

// perCycle returns n requests per cycle.
func (r result) perCycle(n int64) float64 {
	if r.ops == 0 {
		return 0
	}
	return float64(n) / float64(r.ops)
}

// cpuPerCycle returns d per cycle.
func (r result) cpuPerCycle(d time.Duration) time.Duration {
	if r.ops == 0 {
		return 0
	}
	return d / time.Duration(r.ops)
}

// percentile returns the q-quantile of sorted (nearest rank), 0 if empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

// latencies merges per-session latency samples and returns p50 and p99.
func latencies(samples [][]time.Duration) (p50, p99 time.Duration) {
	all := slices.Concat(samples...)
	slices.Sort(all)
	return percentile(all, 0.50), percentile(all, 0.99)
}
