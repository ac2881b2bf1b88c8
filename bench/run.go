package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// env is what every run needs.
type env struct {
	srv            *zktest.Server
	tool           *curator.Tool
	duration       time.Duration // timed window of a cell
	sessionTimeout time.Duration
}

// A contender is one simulated session's side of a Go workload: its own
// ZooKeeper session and its own instance of the primitive.
type contender struct {
	acquire func(context.Context) error
	release func() error
	close   func()
}

// runGo measures a workload in this process: sessions contenders, each
// made by newContender(i) on its own ZooKeeper session, run acquire/release
// cycles on their own goroutines for e.duration. Each first runs one untimed
// cycle (creating the parents, warming its connection); the server's
// counters are read right before and after the timed window, so nothing but
// cycles (and pings: see counters) falls in it.
func runGo(ctx context.Context, e *env, sessions int, newContender func(i int) (contender, error)) (res result, err error) {
	cs := make([]contender, 0, sessions)
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	for i := range sessions {
		c, err := newContender(i)
		if err != nil {
			return result{}, err
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		if err := cycle(ctx, c); err != nil {
			return result{}, fmt.Errorf("warm-up cycle: %w", err)
		}
	}

	before, err := readCounters(ctx, e.srv)
	if err != nil {
		return result{}, err
	}
	samples := make([][]time.Duration, sessions)
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(e.duration)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := c.acquire(ctx); err != nil {
					errs[i] = fmt.Errorf("acquire: %w", err)
					return
				}
				samples[i] = append(samples[i], time.Since(t0))
				if err := c.release(); err != nil {
					errs[i] = fmt.Errorf("release: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, err := readCounters(ctx, e.srv)
	if err != nil {
		return result{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	for _, s := range samples {
		res.ops += int64(len(s))
	}
	res.seconds = elapsed.Seconds()
	res.p50, res.p99 = latencies(samples)
	res.reqs = after.since(before)
	return res, nil
}

func cycle(ctx context.Context, c contender) error {
	if err := c.acquire(ctx); err != nil {
		return err
	}
	return c.release()
}

// dial opens a dsync Session of its own (one ZooKeeper session, one TCP
// connection).
func (e *env) dial(ctx context.Context) (*zkconn.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return zkconn.Dial(ctx, []string{e.srv.Addr()},
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
		return contender{
			acquire: func(context.Context) error { m.Lock(); return nil },
			release: func() error { m.Unlock(); return nil },
			close:   func() { s.Close() },
		}, nil
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
		return contender{
			acquire: func(context.Context) error { m.Lock(); return nil },
			release: func() error { m.Unlock(); return nil },
			close:   func() { s.Close() },
		}, nil
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
			return contender{
				acquire: func(ctx context.Context) error { return w.Acquire(ctx, 1) },
				release: func() error { w.Release(1); return nil },
				close:   func() { s.Close() },
			}, nil
		})
	}
}

// zkLock runs go-zookeeper's zk.Lock, one *zk.Conn per session.
func zkLock(ctx context.Context, e *env, path string, sessions int) (result, error) {
	return runGo(ctx, e, sessions, func(int) (contender, error) {
		c, _, err := zk.Connect([]string{e.srv.Addr()}, e.sessionTimeout,
			zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if err != nil {
			return contender{}, err
		}
		l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
		return contender{
			acquire: func(context.Context) error { return l.Lock() },
			release: func() error { return l.Unlock() },
			close:   c.Close,
		}, nil
	})
}

// quietZK drops go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// curatorRunner returns a runner of the Java program's bench command for
// kind (one JVM, one Curator client per session, see internal/curator).
//
// The program connects its clients and runs a warm-up cycle on each before
// its timed window, and closes them after, all in the JVM's run, and it
// prints only at the end: the counters read around the run include that
// traffic. To take it out, the same command is first run with a window of 0
// seconds (connect, warm up, close, no timed cycle), and its requests are
// subtracted. The warm-up cycles contend in both runs, so this is an
// estimate, good to a few requests in thousands.
func curatorRunner(kind string, max int) runner {
	return func(ctx context.Context, e *env, path string, sessions int) (result, error) {
		overhead, _, err := runJava(ctx, e, kind, path, sessions, 0, max)
		if err != nil {
			return result{}, fmt.Errorf("calibration run: %w", err)
		}
		total, res, err := runJava(ctx, e, kind, path, sessions, e.duration, max)
		if err != nil {
			return result{}, err
		}
		res.reqs = total.minus(overhead)
		return res, nil
	}
}

// runJava runs "bench KIND CONNECT PATH SESSIONS SECONDS [MAX]" and returns
// the requests the server received during the whole run, and the program's
// report.
func runJava(ctx context.Context, e *env, kind, path string, sessions int, d time.Duration, max int) (counters, result, error) {
	args := []string{"bench", kind, e.srv.Addr(), path, strconv.Itoa(sessions),
		strconv.FormatFloat(d.Seconds(), 'f', -1, 64)}
	if max > 0 {
		args = append(args, strconv.Itoa(max))
	}
	before, err := readCounters(ctx, e.srv)
	if err != nil {
		return counters{}, result{}, err
	}
	lines, err := e.tool.Run(ctx, args...)
	if err != nil {
		return counters{}, result{}, err
	}
	after, err := readCounters(ctx, e.srv)
	if err != nil {
		return counters{}, result{}, err
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "ops=") {
			res, err := parseJavaReport(l)
			return after.since(before), res, err
		}
	}
	return counters{}, result{}, fmt.Errorf("curator bench printed no report: %q", lines)
}

// parseJavaReport parses "ops=N seconds=S p50_us=P p99_us=Q".
func parseJavaReport(line string) (result, error) {
	var r result
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		var err error
		switch k {
		case "ops":
			r.ops, err = strconv.ParseInt(v, 10, 64)
		case "seconds":
			r.seconds, err = strconv.ParseFloat(v, 64)
		case "p50_us", "p99_us":
			var us int64
			us, err = strconv.ParseInt(v, 10, 64)
			if k == "p50_us" {
				r.p50 = time.Duration(us) * time.Microsecond
			} else {
				r.p99 = time.Duration(us) * time.Microsecond
			}
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
