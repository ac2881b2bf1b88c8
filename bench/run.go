package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/internal/syncbuf"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// env is what every run needs.
type env struct {
	srv            *zktest.Server
	serverPid      int    // of srv's JVM, for its CPU time
	addr           string // where clients connect: srv, or a proxy to it
	tool           *curator.Tool
	duration       time.Duration // timed window of a cell
	sessionTimeout time.Duration
}

// A contender is one simulated session's side of a Go workload: its own
// ZooKeeper session and its own instance of the primitive.
//
// Most workloads have one kind of cycle (kind 0). An RWMutex workload has
// two, read and write: pick chooses each cycle's kind.
type contender struct {
	acquire func(ctx context.Context, kind int) error
	release func(kind int) error
	kinds   int        // kinds of cycle: 1, or 2 (read, write)
	pick    func() int // the next cycle's kind; nil: always 0
	close   func()
}

// The kinds of cycle of an RWMutex workload.
const (
	kindRead  = 0
	kindWrite = 1
)

// runGo measures a workload in this process: sessions contenders, each
// made by newContender(i) on its own ZooKeeper session, run acquire/release
// cycles on their own goroutines for e.duration. Each first runs one untimed
// cycle of each kind (creating the parents, warming its connection); the
// contenders connect and warm up in parallel, and close in parallel after
// the window. The meters are read right before and after the timed window
// (see env.read), so nothing but cycles (and pings: see counters) falls in
// it.
func runGo(ctx context.Context, e *env, sessions int, newContender func(i int) (contender, error)) (res result, err error) {
	cs := make([]*contender, sessions)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range cs {
			if c != nil {
				wg.Go(c.close)
			}
		}
		wg.Wait()
	}()
	var g errgroup.Group
	for i := range sessions {
		g.Go(func() error {
			c, err := newContender(i)
			if err != nil {
				return err
			}
			cs[i] = &c
			for k := range max(1, c.kinds) {
				if err := cycle(ctx, c, k); err != nil {
					return fmt.Errorf("warm-up cycle: %w", err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return result{}, err
	}

	before, err := e.read(ctx)
	if err != nil {
		return result{}, err
	}
	// samples[k][i] are session i's acquire latencies of kind k.
	var samples [2][][]time.Duration
	for k := range samples {
		samples[k] = make([][]time.Duration, sessions)
	}
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(e.duration)
	for i, c := range cs {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				k := 0
				if c.pick != nil {
					k = c.pick()
				}
				t0 := time.Now()
				if err := c.acquire(ctx, k); err != nil {
					errs[i] = fmt.Errorf("acquire: %w", err)
					return
				}
				samples[k][i] = append(samples[k][i], time.Since(t0))
				if err := c.release(k); err != nil {
					errs[i] = fmt.Errorf("release: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	used, err := e.done(ctx, before)
	if err != nil {
		return result{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	all := slices.Concat(samples[kindRead], samples[kindWrite])
	for _, s := range all {
		res.ops += int64(len(s))
	}
	res.seconds = elapsed.Seconds()
	res.p50, res.p99 = latencies(all)
	res.reqs, res.clientCPU, res.serverCPU = used.reqs, used.self, used.server
	if cs[0].kinds == 2 {
		res.read, res.write = sideOf(samples[kindRead]), sideOf(samples[kindWrite])
	}
	return res, nil
}

// sideOf sums up one kind's latency samples.
func sideOf(samples [][]time.Duration) side {
	var s side
	for _, l := range samples {
		s.ops += int64(len(l))
	}
	s.p50, s.p99 = latencies(samples)
	return s
}

func cycle(ctx context.Context, c contender, kind int) error {
	if err := c.acquire(ctx, kind); err != nil {
		return err
	}
	return c.release(kind)
}

// simple makes the contender of a workload with one kind of cycle.
func simple(acquire func(context.Context) error, release func() error, close func()) contender {
	return contender{
		acquire: func(ctx context.Context, _ int) error { return acquire(ctx) },
		release: func(int) error { return release() },
		kinds:   1,
		close:   close,
	}
}

// dial opens a dsync Session of its own (one ZooKeeper session, one TCP
// connection).
func (e *env) dial(ctx context.Context) (*zkconn.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return zkconn.Dial(ctx, []string{e.addr},
		zkconn.WithSessionTimeout(e.sessionTimeout),
		zkconn.WithLogger(slog.New(slog.DiscardHandler)))
}

// dsyncMutex runs dsync's Mutex: Lock, then Unlock.
func dsyncMutex(ctx context.Context, e *env, path string, sessions int) (result, error) {
	return runGo(ctx, e, sessions, func(int) (contender, error) {
		s, err := e.dial(ctx)
		if err != nil {
			return contender{}, err
		}
		m := dsync.NewMutex(s, path)
		return simple(
			func(context.Context) error { m.Lock(); return nil },
			func() error { m.Unlock(); return nil },
			func() { s.Close() }), nil
	})
}

// dsyncSemaphoreMutex runs dsync's SemaphoreMutex: Lock, then Unlock.
func dsyncSemaphoreMutex(ctx context.Context, e *env, path string, sessions int) (result, error) {
	return runGo(ctx, e, sessions, func(int) (contender, error) {
		s, err := e.dial(ctx)
		if err != nil {
			return contender{}, err
		}
		m := dsync.NewSemaphoreMutex(s, path)
		return simple(
			func(context.Context) error { m.Lock(); return nil },
			func() error { m.Unlock(); return nil },
			func() { s.Close() }), nil
	})
}

// dsyncWeighted returns a runner of dsync's Weighted of max leases:
// Acquire(ctx, 1), then Release(1).
func dsyncWeighted(max int64) runner {
	return func(ctx context.Context, e *env, path string, sessions int) (result, error) {
		return runGo(ctx, e, sessions, func(int) (contender, error) {
			s, err := e.dial(ctx)
			if err != nil {
				return contender{}, err
			}
			w := dsync.NewWeighted(s, path, max)
			return simple(
				func(ctx context.Context) error { return w.Acquire(ctx, 1) },
				func() error { w.Release(1); return nil },
				func() { s.Close() }), nil
		})
	}
}

// dsyncRWMutex returns a runner of dsync's RWMutex with readPct % read
// cycles: each cycle takes the read lock (RLock, then RUnlock) with
// probability readPct/100, else the write lock (Lock, then Unlock), as the
// Curator program's "bench rw" does.
func dsyncRWMutex(readPct int) runner {
	return func(ctx context.Context, e *env, path string, sessions int) (result, error) {
		return runGo(ctx, e, sessions, func(int) (contender, error) {
			s, err := e.dial(ctx)
			if err != nil {
				return contender{}, err
			}
			rw := dsync.NewRWMutex(s, path)
			return contender{
				acquire: func(_ context.Context, kind int) error {
					if kind == kindRead {
						rw.RLock()
					} else {
						rw.Lock()
					}
					return nil
				},
				release: func(kind int) error {
					if kind == kindRead {
						rw.RUnlock()
					} else {
						rw.Unlock()
					}
					return nil
				},
				kinds: 2,
				pick:  func() int { return pickKind(rand.IntN(100), readPct) },
				close: func() { s.Close() },
			}, nil
		})
	}
}

// pickKind returns the kind of a cycle whose die shows roll (0–99) when
// readPct % of cycles read.
func pickKind(roll, readPct int) int {
	if roll < readPct {
		return kindRead
	}
	return kindWrite
}

// zkLock runs go-zookeeper's zk.Lock, one *zk.Conn per session.
func zkLock(ctx context.Context, e *env, path string, sessions int) (result, error) {
	return runGo(ctx, e, sessions, func(int) (contender, error) {
		c, _, err := zk.Connect([]string{e.addr}, e.sessionTimeout,
			zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if err != nil {
			return contender{}, err
		}
		l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
		return simple(
			func(context.Context) error { return l.Lock() },
			l.Unlock,
			c.Close), nil
	})
}

// quietZK drops go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// curatorRunner returns a runner of the Java program's bench command for
// kind (one JVM, one Curator client per session, see internal/curator).
//
// The program connects its clients and runs a warm-up cycle on each, says
// "ready" and waits; the meters are read, and it is told to go; once it has
// reported its window, they are read again, and only then may it close its
// clients. So the server's requests and CPU time, and the JVM's CPU time
// (/proc/PID/stat), are those of the window alone, as for dsync and zk.Lock.
//
// extra are the command's arguments after SECONDS: MAX for sem, READPCT for
// rw.
func curatorRunner(kind string, extra ...string) runner {
	return func(ctx context.Context, e *env, path string, sessions int) (result, error) {
		args := append([]string{"bench", kind, e.addr, path, strconv.Itoa(sessions),
			strconv.FormatFloat(e.duration.Seconds(), 'f', -1, 64)}, extra...)
		return runJava(ctx, e, args)
	}
}

// runJava runs the Java program with args, a bench command, and reads the
// meters around its window.
func runJava(ctx context.Context, e *env, args []string) (res result, err error) {
	cmd := e.tool.Command(ctx, args...)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return result{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		stdin.Close() // the program closes its clients and exits
		if err != nil {
			cmd.Process.Kill()
		}
		io.Copy(io.Discard, stdout)
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = werr
		}
		if err != nil {
			err = fmt.Errorf("curator bench: %w\nstderr:\n%s", err, strings.TrimSpace(stderr.String()))
		}
	}()
	lines := bufio.NewScanner(stdout)
	await := func(prefix string) (string, error) {
		for lines.Scan() {
			if l := lines.Text(); strings.HasPrefix(l, prefix) {
				return l, nil
			}
		}
		return "", fmt.Errorf("ended before it printed %q", prefix)
	}
	if _, err := await("ready"); err != nil {
		return result{}, err
	}
	before, err := e.read(ctx)
	if err != nil {
		return result{}, err
	}
	jvm0, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return result{}, fmt.Errorf("JVM CPU time: %w", err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return result{}, err
	}
	report, err := await("ops=")
	if err != nil {
		return result{}, err
	}
	jvm1, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return result{}, fmt.Errorf("JVM CPU time: %w", err)
	}
	used, err := e.done(ctx, before)
	if err != nil {
		return result{}, err
	}
	if res, err = parseJavaReport(report); err != nil {
		return result{}, err
	}
	res.reqs, res.serverCPU, res.clientCPU = used.reqs, used.server, jvm1-jvm0
	return res, nil
}

// parseJavaReport parses "ops=N seconds=S p50_us=P p99_us=Q", and the
// fields "bench rw" adds: read_ops, read_p50_us, read_p99_us, write_ops,
// write_p50_us, write_p99_us. It ignores other keys.
func parseJavaReport(line string) (result, error) {
	var r result
	durations := map[string]*time.Duration{
		"p50_us": &r.p50, "p99_us": &r.p99,
		"read_p50_us": &r.read.p50, "read_p99_us": &r.read.p99,
		"write_p50_us": &r.write.p50, "write_p99_us": &r.write.p99,
	}
	counts := map[string]*int64{"ops": &r.ops, "read_ops": &r.read.ops, "write_ops": &r.write.ops}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		var err error
		switch n, d := counts[k], durations[k]; {
		case n != nil:
			*n, err = strconv.ParseInt(v, 10, 64)
		case d != nil:
			var us int64
			us, err = strconv.ParseInt(v, 10, 64)
			*d = time.Duration(us) * time.Microsecond
		case k == "seconds":
			r.seconds, err = strconv.ParseFloat(v, 64)
		}
		if err != nil {
			return result{}, fmt.Errorf("curator bench report %q: %s: %w", line, k, err)
		}
	}
	if r.seconds <= 0 {
		return result{}, fmt.Errorf("curator bench report %q: no seconds", line)
	}
	return r, nil
}
