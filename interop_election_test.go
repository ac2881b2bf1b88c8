package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// observed collects what an Observe loop yields, on a goroutine the test
// ends with stop.
type observed struct {
	leaders chan dsync.Participant
	stop    func()
}

func observe(t *testing.T, e *dsync.Election) *observed {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observed{leaders: make(chan dsync.Participant, 16)}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for p, err := range e.Observe(ctx) {
			if err != nil {
				t.Errorf("Observe: %v", err)
				return
			}
			o.leaders <- p
		}
	}()
	o.stop = func() { cancel(); <-ended }
	t.Cleanup(o.stop)
	return o
}

// next waits for the next leader Observe yields and checks that it is id,
// and that Curator's getLeader names it too.
func (o *observed) next(t *testing.T, ctx context.Context, kind, path, id string) dsync.Participant {
	t.Helper()
	var p dsync.Participant
	select {
	case p = <-o.leaders:
	case <-ctx.Done():
		t.Fatalf("Observe yielded no leader; want %s", id)
	}
	if string(p.Data) != id {
		t.Fatalf("Observe yields leader %q (%s); want %q", p.Data, p.Node, id)
	}
	got, ok, err := java.LeaderID(ctx, kind, shared.Addr(), path)
	if err != nil || !ok || got != id {
		t.Fatalf("Curator's getLeader = %q, %v, %v; want %q, as Observe says", got, ok, err, id)
	}
	return p
}

// TestInteropElectionFailover: a dsync participant and Curator LeaderLatch
// participants share a path through a kill and a partition. The next leader
// leads only once the previous one is dead or has been told of its loss,
// and Observe follows the same leaders as Curator's getLeader.
func TestInteropElectionFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	jt := *java
	jt.Env = append(jt.Env, "INTEROP_SESSION_MS=4000")

	a, err := jt.Lead(ctx, curator.Latch, shared.Addr(), path, "java-a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill()
	if ev, err := a.Next(ctx); err != nil || !ev.Leader {
		t.Fatalf("first latch: %v, %v; want leader", ev, err)
	}
	watcher := observe(t, dsync.NewElection(dial(t, []string{shared.Addr()}), path))
	watcher.next(t, ctx, curator.Latch, path, "java-a")

	p := zktest.NewProxy(t, shared.Addr())
	g := dsync.NewElection(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(4*time.Second)), path)
	type result struct {
		led context.Context
		err error
	}
	campaigned := make(chan result, 1)
	go func() {
		led, err := g.Campaign(ctx, "go")
		campaigned <- result{led, err}
	}()
	awaitChildren(t, obs, path, 2)
	c, err := jt.Lead(ctx, curator.Latch, shared.Addr(), path, "java-c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()

	// Kill: the dsync participant leads once the killed leader's session
	// is gone, not before.
	select {
	case r := <-campaigned:
		t.Fatalf("Campaign returned %v while Curator's latch leads", r.err)
	default:
	}
	a.Kill()
	r := <-campaigned
	if r.err != nil {
		t.Fatalf("Campaign after the leader's kill = %v", r.err)
	}
	watcher.next(t, ctx, curator.Latch, path, "go")

	// Partition: the dsync leader is told of its loss before Curator's
	// next latch leads.
	p.BlackHole()
	<-r.led.Done()
	toldLost := time.Now()
	if cause := context.Cause(r.led); !errors.Is(cause, dsync.ErrLockLost) {
		t.Fatalf("cause after the partition = %v; want ErrLockLost", cause)
	}
	ev, err := c.Next(ctx)
	if err != nil || !ev.Leader {
		t.Fatalf("latch behind the partitioned leader: %v, %v; want leader", ev, err)
	}
	if !ev.Time.After(toldLost) {
		t.Fatalf("Curator's latch led at %v, before the partitioned dsync leader was told of its loss at %v",
			ev.Time.Format(time.StampMicro), toldLost.Format(time.StampMicro))
	}
	watcher.next(t, ctx, curator.Latch, path, "java-c")
	p.Heal()
	if err := g.Resign(ctx); err != nil {
		t.Fatalf("Resign after loss = %v", err)
	}
	if err := c.Resign(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := java.LeaderID(ctx, curator.Latch, shared.Addr(), path); err != nil || ok {
		t.Fatalf("Curator's getLeader after all left = %v, %v; want none", ok, err)
	}
	if _, err := g.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
		t.Fatalf("Leader after all left = %v; want ErrNoLeader", err)
	}
}

// TestInteropSelector: a dsync Election with SelectorLayout and Curator
// LeaderSelector processes lead in turn on one path, and agree on the
// leader.
func TestInteropSelector(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	s, err := java.Lead(ctx, curator.Selector, shared.Addr(), path, "java-s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	if ev, err := s.Next(ctx); err != nil || !ev.Leader {
		t.Fatalf("selector: %v, %v; want leader", ev, err)
	}
	g := dsync.NewElection(dial(t, []string{shared.Addr()}), path, dsync.SelectorLayout())
	watcher := observe(t, g)
	watcher.next(t, ctx, curator.Selector, path, "java-s")
	campaigned := make(chan error, 1)
	go func() {
		_, err := g.Campaign(ctx, "go")
		campaigned <- err
	}()
	awaitChildren(t, obs, path, 2)
	w, err := java.Lead(ctx, curator.Selector, shared.Addr(), path, "java-w")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Kill()
	ps, err := g.Participants(ctx)
	if err != nil || len(ps) != 3 || string(ps[0].Data) != "java-s" || string(ps[1].Data) != "go" || string(ps[2].Data) != "java-w" {
		t.Fatalf("Participants = %v, %v; want java-s, go, java-w", ps, err)
	}
	select {
	case err := <-campaigned:
		t.Fatalf("Campaign returned %v while Curator's selector leads", err)
	default:
	}
	if err := s.Resign(); err != nil {
		t.Fatal(err)
	}
	if err := <-campaigned; err != nil {
		t.Fatal(err)
	}
	watcher.next(t, ctx, curator.Selector, path, "go")
	if evs := w.Events(); len(evs) != 0 {
		t.Fatalf("selector behind the dsync leader: %v; want no leadership yet", evs)
	}
	if err := g.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Next(ctx); err != nil || !ev.Leader {
		t.Fatalf("selector after the dsync leader resigned: %v, %v; want leader", ev, err)
	}
	watcher.next(t, ctx, curator.Selector, path, "java-w")
	if err := w.Resign(); err != nil {
		t.Fatal(err)
	}
}

// TestInteropElectionLog: Curator LeaderLatch processes and dsync
// participants share one path through many changes of leader, by
// resignation, by a partition of a dsync leader past its session timeout,
// and by the SIGKILL of a Java process, and one O_APPEND log of their terms
// shows no two at once. A participant logs "enter" once it leads and "exit"
// once it no longer does or was told it lost (a dsync leader's context
// canceled; the Java loop's "lost" line comes before its "exit"); the test
// logs "killed" for a Java process once it is dead.
func TestInteropElectionLog(t *testing.T) {
	const iter = 40
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := lockPath(t)
	logName := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(logName, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jt := *java
	jt.Env = append(jt.Env, "INTEROP_SESSION_MS=4000")

	var (
		wg   sync.WaitGroup
		errs = make(chan error, 8)
	)
	// The Java side: two loops; the first is killed midway.
	var javas []*exec.Cmd
	for range 2 {
		cmd := jt.Command(ctx, "loop", curator.Latch, shared.Addr(), path, strconv.Itoa(iter), logName, "java")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		javas = append(javas, cmd)
	}
	// The dsync side: two sessions, each through a proxy; the first one is
	// partitioned midway.
	proxies := []*zktest.Proxy{zktest.NewProxy(t, shared.Addr()), zktest.NewProxy(t, shared.Addr())}
	for i, p := range proxies {
		e := dsync.NewElection(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(4*time.Second)), path)
		who := fmt.Sprintf("go-%d", i)
		wg.Go(func() {
			for j := 0; j < iter; j++ {
				led, err := e.Campaign(ctx, who)
				if err != nil {
					errs <- err
					return
				}
				err = appendLine(f, "enter "+who)
				select {
				case <-led.Done(): // told of its loss: no longer leads
				case <-time.After(time.Duration(j%3) * time.Millisecond):
				}
				if err == nil {
					err = appendLine(f, "exit "+who)
				}
				e.Resign(resigned) // sent; its reply is not awaited
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	lines := func() int {
		b, _ := os.ReadFile(logName)
		return strings.Count(string(b), "\n")
	}
	awaitLines := func(n int) {
		for lines() < n {
			select {
			case <-ctx.Done():
				t.Fatalf("the log stalled at %d lines", lines())
			case <-time.After(10 * time.Millisecond): // the log's writers are other processes: poll
			}
		}
	}
	awaitLines(40)
	proxies[0].BlackHole() // go-0 cut off past its session timeout
	awaitLines(lines() + 20)
	proxies[0].Heal()
	awaitLines(lines() + 20)
	javas[0].Process.Kill()
	javas[0].Wait()
	if err := appendLine(f, fmt.Sprintf("killed java-%d", javas[0].Process.Pid)); err != nil {
		t.Fatal(err)
	}
	if err := javas[1].Wait(); err != nil {
		t.Fatalf("second Java loop: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkTerms(t, logName)
}

// resigned is a done context: Resign given it sends its delete and returns.
var resigned = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// checkTerms reads a log of leadership terms ("enter X", then "exit X" or
// "killed X", with "lost X" allowed inside X's term) and fails the test if
// two terms overlap.
func checkTerms(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	inside, terms := "", 0
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		op, who, _ := strings.Cut(line, " ")
		switch {
		case op == "enter" && inside == "":
			inside = who
			terms++
		case (op == "exit" || op == "killed") && inside == who:
			inside = ""
		case op == "lost" && inside == who, op == "killed":
		default:
			t.Fatalf("%s:%d: %q while %q leads: two leaders at once", name, i+1, line, inside)
		}
	}
	if terms < 100 {
		t.Fatalf("%d terms logged; want the loops' 100 or more", terms)
	}
	t.Logf("%d terms, no two at once", terms)
}
