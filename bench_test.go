package dsync_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/semaphore"
)

// The benchmarks run b.N acquire/release cycles spread over several
// simulated sessions (each its own ZooKeeper session and TCP connection, and
// its own goroutine pulling cycles from a shared counter) against the shared
// server, and report, besides ns/op:
//
//	ops/s     cycles per second of wall time
//	p50-ms    median acquire latency (Lock, or Acquire), per acquisition
//	p99-ms    99th percentile of the same
//	zkreq/op  requests the server received per cycle (mntr deltas)
//	syscalls/op  read and write calls of the system this process made per
//	          cycle (/proc/self/io: syscr and syscw), which the CPU time
//	          per cycle follows and noise does not move
//
// zkreq/op is the delta of mntr's zk_packets_received over the timed cycles,
// less the mntr request that reads it. ZooKeeper 3.8 has no counter that
// tells pings apart (a ping counts as a packet and as a read in
// zk_cnt_readlatency, like getData), so pings are counted as requests.
// go-zookeeper pings every sessionTimeout/3 whether or not the connection is
// busy; with benchSessionTimeout that is at most one ping per session per
// 10s (plus one), so pings add at most sessions×(seconds/10+1)/b.N: below
// 0.001 for one session, up to a few hundredths for 32 slow sessions. The
// full comparison with Curator is `make bench` (see bench/).

// benchSessionTimeout is the session timeout of every benchmark session.
const benchSessionTimeout = 30 * time.Second

// sessionPool dials Sessions and zk.Conns on the shared server as
// sub-benchmarks need them and keeps them for the next sub-benchmark (and
// the next b.N round); the benchmark that made the pool closes them.
type sessionPool struct {
	mu    sync.Mutex
	sess  []*zkconn.Session
	conns []*zk.Conn
}

func newSessionPool(b *testing.B) *sessionPool {
	p := &sessionPool{}
	b.Cleanup(p.close)
	return p
}

func (p *sessionPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sess {
		s.Close()
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.sess, p.conns = nil, nil
}

// sessions returns n dsync Sessions, each with its own ZooKeeper session.
func (p *sessionPool) sessions(b *testing.B, n int) []*zkconn.Session {
	b.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(p.sess) < n {
		s, err := zkconn.Dial(ctx, []string{shared.Addr()},
			zkconn.WithSessionTimeout(benchSessionTimeout),
			zkconn.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatalf("Dial: %v", err)
		}
		p.sess = append(p.sess, s)
	}
	return p.sess[:n]
}

// zkConns returns n go-zookeeper connections, each with its own session.
func (p *sessionPool) zkConns(b *testing.B, n int) []*zk.Conn {
	b.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.conns) < n {
		c, _, err := zk.Connect([]string{shared.Addr()}, benchSessionTimeout,
			zk.WithLogInfo(false), zk.WithLogger(benchQuietZK{}))
		if err != nil {
			b.Fatalf("zk.Connect: %v", err)
		}
		p.conns = append(p.conns, c)
	}
	return p.conns[:n]
}

// benchQuietZK drops go-zookeeper's log lines.
type benchQuietZK struct{}

func (benchQuietZK) Printf(string, ...any) {}

// packetsReceived reads mntr's zk_packets_received from the shared server.
func packetsReceived(b *testing.B) int64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := shared.Mntr(ctx)
	if err != nil {
		b.Fatalf("mntr: %v", err)
	}
	n, err := strconv.ParseInt(m["zk_packets_received"], 10, 64)
	if err != nil {
		b.Fatalf("mntr: zk_packets_received = %q: %v", m["zk_packets_received"], err)
	}
	return n
}

// runCycles runs b.N cycles over len(workers) goroutines, worker i calling
// workers[i] once per cycle; a worker returns its acquire latency. Each
// worker first runs one untimed cycle (creating the lock's parents,
// warming its connection). Then runCycles reports the metrics above.
func runCycles(b *testing.B, workers []func() (time.Duration, error)) {
	b.Helper()
	for _, w := range workers {
		if _, err := w(); err != nil {
			b.Fatalf("warm-up cycle: %v", err)
		}
	}
	before := packetsReceived(b)
	calls := syscalls(b)
	var next atomic.Int64
	lats := make([][]time.Duration, len(workers))
	errs := make(chan error, len(workers))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				lat, err := w()
				if err != nil {
					errs <- err
					return
				}
				lats[i] = append(lats[i], lat)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	calls = syscalls(b) - calls
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	after := packetsReceived(b)

	all := slices.Concat(lats...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(benchMillis(benchPercentile(all, 0.50)), "p50-ms")
	b.ReportMetric(benchMillis(benchPercentile(all, 0.99)), "p99-ms")
	b.ReportMetric(float64(after-before-1)/float64(b.N), "zkreq/op")
	b.ReportMetric(float64(calls)/float64(b.N), "syscalls/op")
}

// syscalls returns the read and write calls of the system this process has
// made (syscr + syscw of /proc/self/io).
func syscalls(b *testing.B) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatalf("syscalls: %v", err)
	}
	var n int64
	for line := range strings.SplitSeq(string(data), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		if name == "syscr" || name == "syscw" {
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				b.Fatalf("syscalls: /proc/self/io: %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

// benchPercentile returns the q-quantile of sorted (nearest rank), 0 if empty.
func benchPercentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

func benchMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// lockerCycle is one Lock+Unlock cycle of a sync.Locker, timing Lock.
func lockerCycle(l sync.Locker) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		t0 := time.Now()
		l.Lock()
		lat := time.Since(t0)
		l.Unlock()
		return lat, nil
	}
}

// semCycle is one Acquire(1)+Release(1) cycle of a semaphore, timing
// Acquire.
func semCycle(s dsync.Semaphore) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		t0 := time.Now()
		if err := s.Acquire(context.Background(), 1); err != nil {
			return 0, err
		}
		lat := time.Since(t0)
		s.Release(1)
		return lat, nil
	}
}

var benchSessions = []int{1, 8, 32}

func BenchmarkMutex(b *testing.B) {
	pool := newSessionPool(b)
	for _, n := range benchSessions {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			path := lockPath(b)
			var workers []func() (time.Duration, error)
			for _, s := range pool.sessions(b, n) {
				workers = append(workers, lockerCycle(dsync.NewMutex(s, path)))
			}
			runCycles(b, workers)
		})
	}
}

func BenchmarkZkLock(b *testing.B) {
	pool := newSessionPool(b)
	for _, n := range benchSessions {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			path := lockPath(b)
			var workers []func() (time.Duration, error)
			for _, c := range pool.zkConns(b, n) {
				l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
				workers = append(workers, func() (time.Duration, error) {
					t0 := time.Now()
					if err := l.Lock(); err != nil {
						return 0, fmt.Errorf("zk.Lock.Lock: %w", err)
					}
					lat := time.Since(t0)
					if err := l.Unlock(); err != nil {
						return 0, fmt.Errorf("zk.Lock.Unlock: %w", err)
					}
					return lat, nil
				})
			}
			runCycles(b, workers)
		})
	}
}

func BenchmarkWeighted(b *testing.B) {
	pool := newSessionPool(b)
	b.Run("sessions=8,max=3", func(b *testing.B) {
		path := lockPath(b)
		var workers []func() (time.Duration, error)
		for _, s := range pool.sessions(b, 8) {
			workers = append(workers, semCycle(dsync.NewWeighted(s, path, 3)))
		}
		runCycles(b, workers)
	})
}

// BenchmarkXSyncWeighted is the same workload as BenchmarkWeighted on
// x/sync's local semaphore: the cost of a semaphore without ZooKeeper.
func BenchmarkXSyncWeighted(b *testing.B) {
	sem := semaphore.NewWeighted(3)
	workers := make([]func() (time.Duration, error), 8)
	for i := range workers {
		workers[i] = semCycle(sem)
	}
	runCycles(b, workers)
}

// BenchmarkRWMutex runs RWMutex cycles, each taking the read lock (RLock,
// RUnlock) with probability reads/100, else the write lock, and reports the
// readers' and writers' acquire latencies apart too (read-p50-ms, …). The
// comparison with Curator's InterProcessReadWriteLock is `make bench`.
func BenchmarkRWMutex(b *testing.B) {
	pool := newSessionPool(b)
	for _, reads := range []int{90, 50} {
		for _, n := range []int{8, 32} {
			b.Run(fmt.Sprintf("reads=%d,sessions=%d", reads, n), func(b *testing.B) {
				path := lockPath(b)
				sess := pool.sessions(b, n)
				// lats[k][i]: worker i's latencies of kind k (0 read, 1 write).
				var lats [2][][]time.Duration
				for k := range lats {
					lats[k] = make([][]time.Duration, n)
				}
				workers := make([]func() (time.Duration, error), n)
				for i, s := range sess {
					rw := dsync.NewRWMutex(s, path)
					rw.RLock() // a read warm-up cycle; runCycles' own is a write
					rw.RUnlock()
					warm := true
					workers[i] = func() (time.Duration, error) {
						k := 1
						if !warm && rand.IntN(100) < reads {
							k = 0
						}
						t0 := time.Now()
						var lat time.Duration
						if k == 0 {
							rw.RLock()
							lat = time.Since(t0)
							rw.RUnlock()
						} else {
							rw.Lock()
							lat = time.Since(t0)
							rw.Unlock()
						}
						if !warm {
							lats[k][i] = append(lats[k][i], lat)
						}
						warm = false
						return lat, nil
					}
				}
				runCycles(b, workers)
				for k, name := range []string{"read", "write"} {
					all := slices.Concat(lats[k]...)
					slices.Sort(all)
					b.ReportMetric(float64(len(all))/float64(b.N), name+"s/op")
					b.ReportMetric(benchMillis(benchPercentile(all, 0.50)), name+"-p50-ms")
					b.ReportMetric(benchMillis(benchPercentile(all, 0.99)), name+"-p99-ms")
				}
			})
		}
	}
}

func BenchmarkSemaphoreMutex(b *testing.B) {
	pool := newSessionPool(b)
	b.Run("sessions=8", func(b *testing.B) {
		path := lockPath(b)
		var workers []func() (time.Duration, error)
		for _, s := range pool.sessions(b, 8) {
			workers = append(workers, lockerCycle(dsync.NewSemaphoreMutex(s, path)))
		}
		runCycles(b, workers)
	})
}
