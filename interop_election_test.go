package dsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestInteropElectionExclusion: Java processes using Curator's LeaderLatch
// and Go Sessions using dsync.Election lead in turn on one path, over many
// changes of leader, never two at once.
func TestInteropElectionExclusion(t *testing.T) {
	const javaProcs, goSessions, iter = 2, 2, 30
	path := lockPath(t)
	var goers []contender
	for i := 0; i < goSessions; i++ {
		e := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
		goers = append(goers, contender{
			acquire: func(ctx context.Context) error { _, err := e.Campaign(ctx, "go"); return err },
			release: func() {
				if err := e.Resign(context.Background()); err != nil {
					t.Error(err)
				}
			},
		})
	}
	logName := mixedRun(t, curator.Latch, path, iter, javaProcs, []string{"java"}, goers)
	if per := checkLog(t, logName, (javaProcs+goSessions)*iter); len(per) != javaProcs+goSessions {
		t.Fatalf("participants in the log: %v; want %d", per, javaProcs+goSessions)
	}
}

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
