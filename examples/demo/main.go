// Command demo shows dsync at work on one machine: it starts a throwaway
// ZooKeeper (unless -zk names one), runs three processes of
// examples/workers sharing one global bound, then two `dsync lock` commands
// taking turns on one lock, and stops everything it started. `make demo`
// runs it.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

func main() {
	zk := flag.String("zk", "", "use this ZooKeeper (host:port,...) instead of starting one")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *zk); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, zk string) error {
	if zk == "" {
		say("starting a throwaway ZooKeeper on 127.0.0.1")
		srv, err := zktest.StartServer()
		if err != nil {
			return err
		}
		defer func() {
			srv.Close()
			say("ZooKeeper stopped; nothing left running")
		}()
		zk = srv.Addr()
	}
	say("ZooKeeper at " + zk)

	bin, err := os.MkdirTemp("", "dsync-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	say("building examples/workers and the dsync command")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin,
		"github.com/dsync-go/dsync/examples/workers", "github.com/dsync-go/dsync/dsync")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	env := append(os.Environ(), "DSYNC_ZK="+zk)

	say("1. three processes, 3 jobs at once each, 4 at once across all of them")
	var procs []*exec.Cmd
	for _, name := range []string{"A", "B", "C"} {
		procs = append(procs, command(ctx, env, filepath.Join(bin, "workers"), "-name", name, "-jobs", "8",
			"-local", "3", "-global", "4", "-path", "/demo/workers"))
	}
	if err := together(procs); err != nil {
		return err
	}

	say("2. two `dsync lock` commands taking turns on /demo/lock")
	script := `for i in 1 2; do
  "$DSYNC" lock /demo/lock -- sh -c 'echo "$0: got the lock"; sleep 0.5; echo "$0: letting go"' "$NAME"
done`
	var locks []*exec.Cmd
	for _, name := range []string{"first", "second"} {
		vars := slices.Concat(env, []string{"DSYNC=" + filepath.Join(bin, "dsync"), "NAME=" + name})
		locks = append(locks, command(ctx, vars, "sh", "-c", script))
	}
	return together(locks)
}

// command prepares a child whose output is copied line by line.
func command(ctx context.Context, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	return cmd
}

// together runs cmds at once, copying their output lines as they come, and
// returns the first failure.
func together(cmds []*exec.Cmd) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, cmd := range cmds {
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Add(1)
		go func(r io.Reader) {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				mu.Lock()
				fmt.Printf("%s  %s\n", time.Now().Format("15:04:05.000"), sc.Text())
				mu.Unlock()
			}
		}(out)
	}
	wg.Wait()
	var first error
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", cmd.Path, err)
		}
	}
	return first
}

func say(s string) { fmt.Printf("\n== %s\n", s) }
