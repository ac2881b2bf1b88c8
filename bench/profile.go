package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// A profile is the network between the clients and the server: loopback
// (the clients connect to the server directly), or a zktest Proxy that
// delays every packet by delay, each way, in a process of its own.
type profile struct {
	delay time.Duration // 0: loopback
}

// key names the profile in lock paths: loopback, 1ms, 5ms.
func (p profile) key() string {
	if p.delay == 0 {
		return "loopback"
	}
	return p.delay.String()
}

// title names the profile in the report: "loopback", "1 ms each way".
func (p profile) title() string {
	if p.delay == 0 {
		return "loopback"
	}
	return strconv.FormatFloat(ms(p.delay), 'f', -1, 64) + " ms each way"
}

// parseProfiles parses -delays: comma-separated delays each way (Go
// durations; 0 for loopback), each at most once, loopback first if at all,
// the others in increasing order.
func parseProfiles(list string) ([]profile, error) {
	var ps []profile
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		d, err := time.ParseDuration(f)
		if f == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-delays: bad delay %q; want a duration such as 1ms, or 0 for loopback", f)
		}
		if slices.Contains(ps, profile{d}) {
			return nil, fmt.Errorf("-delays: %v given twice", d)
		}
		ps = append(ps, profile{d})
	}
	slices.SortFunc(ps, func(a, b profile) int { return int(a.delay - b.delay) })
	return ps, nil
}

// proxyCommand is the first argument with which this program runs as a
// delaying proxy, for the profiles with a delay: "bench serve-proxy TARGET
// DELAY". The proxy runs in a process of its own so that the CPU time it
// takes is not counted as the Go clients' (getrusage RUSAGE_SELF).
const proxyCommand = "serve-proxy"

// serveProxy is the proxy process: it forwards to target with delay each
// way, prints its address on stdout, and runs until its stdin ends (the
// parent closes it, or dies).
func serveProxy(target, delay string) error {
	d, err := time.ParseDuration(delay)
	if err != nil {
		return err
	}
	p, err := zktest.StartProxy(target)
	if err != nil {
		return err
	}
	defer p.Close()
	p.SetDelay(d)
	if _, err := fmt.Println(p.Addr()); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// A proxyProcess is a running "bench serve-proxy".
type proxyProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addr  string // where clients connect
}

// startProxy runs this program as a proxy to target that delays every
// packet by delay, each way.
func startProxy(target string, delay time.Duration) (*proxyProcess, error) {
	cmd, stdin, stdout, err := startSelf(context.Background(), proxyCommand, target, delay.String())
	if err != nil {
		return nil, err
	}
	p := &proxyProcess{cmd: cmd, stdin: stdin}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		p.close()
		return nil, fmt.Errorf("proxy: no address: %w", err)
	}
	p.addr = strings.TrimSpace(addr)
	return p, nil
}

// startSelf starts this program with args (a subcommand of its own, such
// as proxyCommand), bound to ctx as exec.CommandContext binds it, with its
// stderr on ours, and returns it with its stdin and stdout.
func startSelf(ctx context.Context, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", args[0], err)
	}
	return cmd, stdin, stdout, nil
}

// close ends the proxy and waits for it to exit.
func (p *proxyProcess) close() error {
	p.stdin.Close()
	return p.cmd.Wait()
}

// rttSamples is how many requests of each kind a batch of roundTrips.time
// times.
const rttSamples = 101

// roundTrips are the round trips timed through one network, in batches: one
// before a profile's cells and one after each, so that the medians describe
// the network over the time the cells ran, not at one moment (on a shared
// 2-core machine, the medians of single batches of one run differed by up to
// 0.26 ms at 1 ms each way, a tenth of the round trip).
type roundTrips struct {
	reads, txns []time.Duration // every sample
	hops        []time.Duration // every hop of every relay (see relay)
	batchReads  []time.Duration // each batch's median read round trip
}

// time adds a batch: the round trips of n small requests (exists "/", one
// after the other) of a go-zookeeper client connected to addr, after a few
// untimed ones: a single request's round trip through that network, the
// server's time to answer included. And those of n small transactions, each
// a multi of a create and a delete of one ephemeral node: the kind of
// request a handoff waits on (the holder's delete and signal, a write the
// server logs before it answers and tells the next holder). And the n-1 hops
// of a relay of n transactions between that client and a second one.
func (rt *roundTrips) time(ctx context.Context, addr string, sessionTimeout time.Duration, n int) error {
	var cs [2]*zk.Conn
	for i := range cs {
		c, _, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if err != nil {
			return err
		}
		defer c.Close()
		cs[i] = c
	}
	c := cs[0]
	const node = "/dsync-bench-rtt"
	reads := make([]time.Duration, 0, n)
	txns := make([]time.Duration, 0, n)
	for i := range n + 5 {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		if _, _, err := c.Exists("/"); err != nil {
			return fmt.Errorf("round trip: %w", err)
		}
		t1 := time.Now()
		if err := transact(c, node); err != nil {
			return fmt.Errorf("transaction round trip: %w", err)
		}
		if i >= 5 { // the first ones wait for the session, and warm up
			reads = append(reads, t1.Sub(t0))
			txns = append(txns, time.Since(t1))
		}
	}
	if len(reads) == 0 {
		return errors.New("round trip: no samples")
	}
	hops, err := relay(ctx, cs, n)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	rt.reads = append(rt.reads, reads...)
	rt.txns = append(rt.txns, txns...)
	rt.hops = append(rt.hops, hops...)
	rt.batchReads = append(rt.batchReads, medianOf(reads))
	return nil
}

// openACL is the ACL of transact's node.
var openACL = zk.WorldACL(zk.PermAll)

// transact creates an ephemeral node at path and deletes it, in one multi:
// the small transaction of a txn sample and of a relay's hop.
func transact(c *zk.Conn, path string) error {
	_, err := c.Multi(&zk.CreateRequest{Path: path, Acl: openACL, Flags: zk.FlagEphemeral},
		&zk.DeleteRequest{Path: path, Version: -1})
	return err
}

// relay hands a token between two clients n times and returns the n-1
// hops: hop i is a transaction of cs[i%2] (transact on relayPath(i)) that
// cs[(i+1)%2] learns of by an exists watch set beforehand, and answers at
// once with hop i+1. A hop's time runs from one notification to the next: a
// contended handoff with no lock around it (one reaction, one write, one
// notification), the most one through this network can reach with this
// client library.
func relay(ctx context.Context, cs [2]*zk.Conn, n int) ([]time.Duration, error) {
	watches := make([]<-chan zk.Event, n)
	var armed errgroup.Group // in parallel: a round trip or so in all
	for i := range n {
		armed.Go(func() error {
			there, _, w, err := cs[(i+1)%2].ExistsW(relayPath(i))
			switch {
			case err != nil:
				return fmt.Errorf("watch %s: %w", relayPath(i), err)
			case there:
				return fmt.Errorf("%s exists", relayPath(i))
			}
			watches[i] = w
			return nil
		})
	}
	if err := armed.Wait(); err != nil {
		return nil, err
	}
	told := make([]time.Time, n) // when hop i's notification came
	g, ctx := errgroup.WithContext(ctx)
	for side := range cs {
		g.Go(func() error {
			// side makes hops side, side+2, …, each once told of the one before.
			for i := side; i <= n; i += 2 {
				if i > 0 {
					select {
					case ev := <-watches[i-1]:
						told[i-1] = time.Now()
						if ev.Type != zk.EventNodeCreated {
							return fmt.Errorf("hop %d: %v event, want %v", i-1, ev.Type, zk.EventNodeCreated)
						}
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if i == n {
					break
				}
				if err := transact(cs[side], relayPath(i)); err != nil {
					return fmt.Errorf("hop %d: %w", i, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	hops := make([]time.Duration, 0, n-1)
	for i := 1; i < n; i++ {
		hops = append(hops, told[i].Sub(told[i-1]))
	}
	return hops, nil
}

// relayPath is the node of a relay's hop i.
func relayPath(i int) string { return fmt.Sprintf("/dsync-bench-relay-%d", i) }

// medians returns the median read and transaction round trips of every
// batch together.
func (rt *roundTrips) medians() (read, txn time.Duration) {
	return medianOf(rt.reads), medianOf(rt.txns)
}

// hop returns the mean relay hop of every batch together: the relay's pace,
// as a lock's ops/s are its cycles' (0 for none).
func (rt *roundTrips) hop() time.Duration {
	if len(rt.hops) == 0 {
		return 0
	}
	var sum time.Duration
	for _, h := range rt.hops {
		sum += h
	}
	return sum / time.Duration(len(rt.hops))
}

// spread returns the lowest and highest median read round trip of a
// single batch.
func (rt *roundTrips) spread() (lo, hi time.Duration) {
	if len(rt.batchReads) == 0 {
		return 0, 0
	}
	return slices.Min(rt.batchReads), slices.Max(rt.batchReads)
}

// medianOf returns the median of ds (0 for none), which it leaves unsorted.
func medianOf(ds []time.Duration) time.Duration {
	return percentile(slices.Sorted(slices.Values(ds)), 0.5)
}
