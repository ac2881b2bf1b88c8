// Command workers is several processes' worth of errgroup workers, all
// bounded by one distributed semaphore: each process runs at most -local
// jobs at once (errgroup's SetLimit), and all processes together at most
// -global (a dsync.Weighted on ZooKeeper).
//
// Run three copies against one ZooKeeper (see README.md) and watch the
// global count never pass its bound.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"golang.org/x/sync/errgroup"
)

func main() {
	zk := flag.String("zk", envOr("DSYNC_ZK", "127.0.0.1:2181"), "ZooKeeper servers, host:port,...")
	path := flag.String("path", "/examples/workers", "semaphore path")
	name := flag.String("name", fmt.Sprintf("p%d", os.Getpid()), "this process's name in the output")
	jobs := flag.Int("jobs", 12, "jobs to run")
	local := flag.Int("local", 3, "jobs at once in this process")
	global := flag.Int64("global", 4, "jobs at once across all processes")
	work := flag.Duration("work", 400*time.Millisecond, "how long a job takes, on average")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, strings.Split(*zk, ","), *path, *name, *jobs, *local, *global, *work); err != nil {
		fmt.Fprintf(os.Stderr, "[%s] %v\n", *name, err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, servers []string, path, name string, jobs, local int, global int64, work time.Duration) error {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sess, err := zkconn.Dial(ctx, servers, zkconn.WithLogger(quiet), zkconn.WithSessionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer sess.Close()

	// The global bound: a semaphore shared by every process on path.
	var sem dsync.Semaphore = dsync.NewWeighted(sess, path, global, dsync.WithData([]byte(name)))
	var mine atomic.Int64

	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(local) // the local bound
	for job := 1; job <= jobs; job++ {
		g.Go(func() error {
			if err := sem.Acquire(ctx, 1); err != nil {
				return err
			}
			defer sem.Release(1)
			n := mine.Add(1)
			holders, err := holderNames(ctx, sem.(*dsync.Weighted))
			if err != nil {
				return err
			}
			fmt.Printf("[%s] job %2d running   (here %d/%d, everywhere %d/%d: %s)\n",
				name, job, n, local, len(holders), global, strings.Join(holders, " "))
			if int64(len(holders)) > global {
				return fmt.Errorf("global bound broken: %d holders", len(holders))
			}
			time.Sleep(work/2 + time.Duration(rand.Int63n(int64(work))))
			mine.Add(-1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Printf("[%s] done: %d jobs\n", name, jobs)
	return nil
}

// holderNames lists who holds leases now, by the data each process wrote.
func holderNames(ctx context.Context, w *dsync.Weighted) ([]string, error) {
	ps, err := w.Participants(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range ps {
		if !p.Waiting {
			names = append(names, string(p.Data))
		}
	}
	return names, nil
}
