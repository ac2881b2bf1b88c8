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
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
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
			defer mine.Add(-1)
			// Show who runs now, everywhere: each job registers while it
			// holds its lease, so the register never lists more than the
			// semaphore allows.
			running, done, err := register(ctx, sess, path+"-running", name)
			if err != nil {
				return err
			}
			defer done()
			fmt.Printf("[%s] job %2d running   (here %d/%d, everywhere %d/%d: %s)\n",
				name, job, n, local, len(running), global, strings.Join(running, " "))
			if int64(len(running)) > global {
				return fmt.Errorf("global bound broken: %d running", len(running))
			}
			time.Sleep(work/2 + time.Duration(rand.Int63n(int64(work))))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Printf("[%s] done: %d jobs\n", name, jobs)
	return nil
}

// register adds an ephemeral node for this job under dir and returns the
// names of the jobs registered now, and a func that removes the node and
// waits until it is gone.
func register(ctx context.Context, sess *zkconn.Session, dir, name string) ([]string, func(), error) {
	h, err := sess.Current(ctx)
	if err != nil {
		return nil, nil, err
	}
	node, err := h.CreateProtected(ctx, dir, name+"-", nil)
	if err != nil {
		return nil, nil, err
	}
	// The node must be gone before the job's lease is released: Delete
	// sends from a goroutine of its own, and the lease's delete, sent
	// after it, could otherwise come first, and the next job anywhere
	// would list this one still running.
	done := func() {
		_, settled := h.Delete(node)
		<-settled
	}
	var children []string
	err = h.Do(ctx, func(c *zk.Conn) (err error) {
		children, _, err = c.Children(dir)
		return err
	})
	if err != nil {
		done()
		return nil, nil, err
	}
	names := make([]string, len(children))
	for i, c := range children {
		_, rest, _ := zkconn.ParseProtected(c)
		names[i], _, _ = strings.Cut(rest, "-")
	}
	sort.Strings(names)
	return names, done, nil
}
