package dsync_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
	"github.com/go-zookeeper/zk"
)

// The markers of Curator's InterProcessReadWriteLock nodes (DESIGN §3).
const (
	readNode  = "__READ__"
	writeNode = "__WRIT__"
)

// A loopGroup runs the contenders of a mixed run, Curator `loop` processes
// and Go goroutines, on a context of its own, and collects their errors. When
// the test ends it cancels that context (killing the JVMs still running) and
// waits for all of them.
type loopGroup struct {
	t      *testing.T
	ctx    context.Context
	wg     sync.WaitGroup
	failed chan struct{} // closed with the first error

	mu   sync.Mutex
	errs []error
}

func newLoopGroup(t *testing.T, ctx context.Context) *loopGroup {
	ctx, cancel := context.WithCancel(ctx)
	g := &loopGroup{t: t, ctx: ctx, failed: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		g.wg.Wait()
	})
	return g
}

func (g *loopGroup) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) == 0 {
		close(g.failed)
	}
	g.errs = append(g.errs, err)
}

func (g *loopGroup) errors() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.errs)
}

// java starts the Curator process `loop kind CONNECT path iter logName` and
// returns its name in the log, java-PID. The Java side logs no kind, so the
// caller tells readers from writers by this name.
func (g *loopGroup) java(kind, path string, iter int, logName string) string {
	g.t.Helper()
	cmd := java.Command(g.ctx, "loop", kind, shared.Addr(), path, strconv.Itoa(iter), logName)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	who := "java-" + strconv.Itoa(cmd.Process.Pid) // the launcher is the JVM: one pid
	g.wg.Go(func() {
		err := cmd.Wait()
		if out := strings.TrimSpace(stdout.String()); err == nil && out != "done "+strconv.Itoa(iter) {
			err = fmt.Errorf("printed %q", out)
		}
		if err != nil {
			g.fail(fmt.Errorf("curator: loop %s %s (%s): %w\nstderr:\n%s",
				kind, path, who, err, strings.TrimSpace(stderr.String())))
		}
	})
	return who
}

// goLoop runs f on a goroutine of the group, with the group's context.
func (g *loopGroup) goLoop(f func(context.Context) error) {
	g.wg.Go(func() {
		if err := f(g.ctx); err != nil {
			g.fail(err)
		}
	})
}

// wait waits for every contender and fails the test with their errors.
func (g *loopGroup) wait() {
	g.t.Helper()
	g.wg.Wait()
	errs := g.errors()
	for _, err := range errs {
		g.t.Error(err)
	}
	if len(errs) > 0 {
		g.t.FailNow()
	}
}

// openLog creates an O_APPEND log for a mixed run, closed when the test ends.
func openLog(t *testing.T) (string, *os.File) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return name, f
}

// awaitQueue blocks until ok holds of path's children (a missing path has
// none), waiting on watches, and returns them. It fails the test if ctx ends
// or a contender of g (if not nil) fails first.
func awaitQueue(t *testing.T, ctx context.Context, c *zk.Conn, path string, g *loopGroup, ok func([]string) bool) []string {
	t.Helper()
	var failed <-chan struct{}
	if g != nil {
		failed = g.failed
	}
	for {
		there, _, appeared, err := c.ExistsW(path)
		if err != nil {
			t.Fatal(err)
		}
		var kids []string
		var changed <-chan zk.Event
		if there {
			kids, _, changed, err = c.ChildrenW(path)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if ok(kids) {
			return kids
		}
		select {
		case <-appeared:
		case <-changed:
		case <-failed:
			t.Fatalf("%s has children %v; a contender failed: %v", path, kids, g.errors())
		case <-ctx.Done():
			t.Fatalf("%s has children %v: %v", path, kids, ctx.Err())
		}
	}
}

// countMarker counts the names among kids that carry marker.
func countMarker(kids []string, marker string) int {
	n := 0
	for _, k := range kids {
		if strings.Contains(k, marker) {
			n++
		}
	}
	return n
}

// An rwLog is what checkRWLog found in a readers/writers log.
type rwLog struct {
	sections map[string]int // critical sections, per participant
	// together counts the readers that entered while another reader was
	// inside; goJava those that entered while a reader of the other side
	// (Go or Java) was inside.
	together, goJava int
}

// checkRWLog reads an enter/exit log of readers and writers (writer tells
// the kind of every participant; Go ones are named go-…) and fails the test
// unless every participant's enters and exits alternate and no writer was
// ever inside with anyone: neither entered while someone was inside, nor
// was inside when someone entered.
func checkRWLog(t *testing.T, name string, writer map[string]bool) rwLog {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	kind := func(who string) string {
		if writer[who] {
			return "writer " + who
		}
		return "reader " + who
	}
	l := rwLog{sections: map[string]int{}}
	inside := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		op, who, _ := strings.Cut(line, " ")
		w, known := writer[who]
		if !known {
			t.Fatalf("%s:%d: %q: no such participant (have %v)", name, i+1, line, writer)
		}
		switch op {
		case "enter":
			if _, in := inside[who]; in {
				t.Fatalf("%s:%d: %s entered twice", name, i+1, who)
			}
			goJava := false
			for other, ow := range inside {
				if w || ow {
					t.Fatalf("%s:%d: %s entered while %s was inside", name, i+1, kind(who), kind(other))
				}
				goJava = goJava || strings.HasPrefix(other, "go-") != strings.HasPrefix(who, "go-")
			}
			if len(inside) > 0 {
				l.together++
			}
			if goJava {
				l.goJava++
			}
			inside[who] = w
		case "exit":
			if _, in := inside[who]; !in {
				t.Fatalf("%s:%d: %s exited without entering", name, i+1, who)
			}
			delete(inside, who)
			l.sections[who]++
		default:
			t.Fatalf("%s:%d: bad line %q", name, i+1, line)
		}
	}
	if len(inside) > 0 {
		t.Fatalf("%s: still inside at the end: %v", name, inside)
	}
	return l
}

// TestInteropRWExclusion: Curator InterProcessReadWriteLock readers and
// writers (Java processes) and dsync RWMutex readers and writers (Go
// Sessions, one of them both reading and writing) hammer one path and log
// every critical section in one O_APPEND log. The log shows that no writer
// was ever inside with anyone, Go or Java, and that readers were inside
// together, a Go reader and a Java reader among them.
//
// The Go–Java overlap is arranged, not hoped for: a Go lead holds the write
// lock while the Java readers queue behind it, and then the Java writers
// behind them (watched in ZooKeeper). It downgrades to a read hold (its read
// node takes the write node's place), logs its enter and releases the write
// lock: the Java readers, ahead of every writer, get in beside it. It logs
// its exit only once ZooKeeper shows one of their first nodes gone, that is
// after that reader logged its enter and exit. The Java processes are still
// looping then, so the hammer that follows mixes every kind.
func TestInteropRWExclusion(t *testing.T) {
	t.Parallel()
	const (
		javaReaders, javaWriters = 2, 2
		goReaders, goWriters     = 2, 2
		javaIter, goIter         = 40, 40
	)
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	logName, f := openLog(t)
	g := newLoopGroup(t, ctx)
	writer := map[string]bool{"go-lead": false}
	want := map[string]int{"go-lead": 1}

	lead := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
	wctx, err := lead.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range javaReaders {
		who := g.java(curator.Read, path, javaIter, logName)
		writer[who], want[who] = false, javaIter
	}
	var javaReads []string // the Java readers' first nodes, behind the lead's
	for _, k := range awaitQueue(t, ctx, obs, path, g, func(kids []string) bool {
		return countMarker(kids, readNode) == javaReaders
	}) {
		if strings.Contains(k, readNode) {
			javaReads = append(javaReads, k)
		}
	}
	for range javaWriters {
		who := g.java(curator.Write, path, javaIter, logName)
		writer[who], want[who] = true, javaIter
	}
	awaitQueue(t, ctx, obs, path, g, func(kids []string) bool {
		return countMarker(kids, writeNode) == 1+javaWriters
	})

	// The Go contenders queue behind the Java writers.
	for i := range goReaders {
		rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		who := fmt.Sprintf("go-r%d", i)
		writer[who], want[who] = false, goIter
		g.goLoop(func(ctx context.Context) error {
			return logLoop(ctx, f, who, goIter, func(ctx context.Context) error {
				_, err := rw.RLockContext(ctx)
				return err
			}, rw.RUnlock)
		})
	}
	for i := range goWriters {
		rw := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		who := fmt.Sprintf("go-w%d", i)
		writer[who], want[who] = true, goIter
		g.goLoop(func(ctx context.Context) error {
			return logLoop(ctx, f, who, goIter, func(ctx context.Context) error {
				_, err := rw.LockContext(ctx)
				return err
			}, rw.Unlock)
		})
	}
	both := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path) // reads and writes in turn
	writer["go-both-r"], want["go-both-r"] = false, (goIter+1)/2
	writer["go-both-w"], want["go-both-w"] = true, goIter/2
	g.goLoop(func(ctx context.Context) error {
		rlock := func(ctx context.Context) error { _, err := both.RLockContext(ctx); return err }
		lock := func(ctx context.Context) error { _, err := both.LockContext(ctx); return err }
		for j := range goIter {
			var err error
			if j%2 == 0 {
				err = logLoop(ctx, f, "go-both-r", 1, rlock, both.RUnlock)
			} else {
				err = logLoop(ctx, f, "go-both-w", 1, lock, both.Unlock)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})

	rctx, err := lead.RLockContext(wctx) // downgrade
	if err != nil {
		t.Fatal(err)
	}
	if err := appendLine(f, "enter go-lead"); err != nil {
		t.Fatal(err)
	}
	lead.Unlock()
	awaitQueue(t, ctx, obs, path, g, func(kids []string) bool {
		return slices.ContainsFunc(javaReads, func(n string) bool { return !slices.Contains(kids, n) })
	})
	if rctx.Err() != nil {
		t.Fatalf("the lead's read hold ended while Java readers were in: %v", context.Cause(rctx))
	}
	if err := appendLine(f, "exit go-lead"); err != nil {
		t.Fatal(err)
	}
	lead.RUnlock()
	g.wait()

	l := checkRWLog(t, logName, writer)
	for who, n := range want {
		if l.sections[who] != n {
			t.Errorf("%s logged %d critical sections; want %d", who, l.sections[who], n)
		}
	}
	if l.together == 0 || l.goJava == 0 {
		t.Errorf("readers entered beside readers %d times, beside a reader of the other side %d times; want both > 0",
			l.together, l.goJava)
	}
	t.Logf("readers entered beside readers %d times, Go beside Java or Java beside Go %d times", l.together, l.goJava)
	awaitChildren(t, obs, path, 0)
}

// holdCurator starts a Curator `hold kind` on path and returns once its node
// is queued; the JVM is killed when the test ends if still running.
func holdCurator(t *testing.T, ctx context.Context, kind, path string) *curator.Holder {
	t.Helper()
	return holdCuratorMax(t, ctx, kind, path, 0)
}

// holdCuratorMax is holdCurator with a maximum, for a semaphore (see
// curator.Tool.Hold).
func holdCuratorMax(t *testing.T, ctx context.Context, kind, path string, max int) *curator.Holder {
	t.Helper()
	h, err := java.Hold(ctx, kind, shared.Addr(), path, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	return h
}

// awaitCurator blocks until h holds its lock.
func awaitCurator(t *testing.T, ctx context.Context, h *curator.Holder, what string) {
	t.Helper()
	select {
	case <-h.Acquired():
	case <-h.Done():
		t.Fatalf("%s exited without the lock: %v", what, h.Release())
	case <-ctx.Done():
		t.Fatalf("%s never acquired: %v", what, ctx.Err())
	}
}

// curatorWaits fails the test if h holds its lock.
func curatorWaits(t *testing.T, h *curator.Holder, what string) {
	t.Helper()
	select {
	case <-h.Acquired():
		t.Fatalf("%s holds the lock; want it waiting", what)
	default:
	}
}

// releaseCurator releases h's lock and waits for the JVM to exit.
func releaseCurator(t *testing.T, h *curator.Holder) {
	t.Helper()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
}

// A lockResult is the outcome of a lock call run on a goroutine.
type lockResult struct {
	held context.Context
	err  error
}

// lockRW runs lock (an RWMutex's LockContext or RLockContext) with ctx on a
// goroutine and reports on the channel.
func lockRW(ctx context.Context, lock func(context.Context) (context.Context, error)) <-chan lockResult {
	out := make(chan lockResult, 1)
	go func() {
		held, err := lock(ctx)
		out <- lockResult{held, err}
	}()
	return out
}

// awaitLocked returns the hold a lockRW reported, failing the test on error.
func awaitLocked(t *testing.T, ch <-chan lockResult, what string) context.Context {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	return r.held
}

// goWaits fails the test if a lockRW has returned.
func goWaits(t *testing.T, ch <-chan lockResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (%v); want it waiting", what, r.err)
	default:
	}
}

// checkRWQueue fails the test unless dsync's RWMutex.Participants and
// Curator's `participants rw` list the same nodes at path in the same order,
// and dsync describes them as want (see kinds: R or W, - when waiting), its
// Reader flag agreeing with the node's name. It returns dsync's list.
func checkRWQueue(t *testing.T, ctx context.Context, rw *dsync.RWMutex, path string, want ...string) []dsync.Participant {
	t.Helper()
	lines, err := java.Run(ctx, "participants", curator.ReadWrite, shared.Addr(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || lines[len(lines)-1] != "end" {
		t.Fatalf("participants rw printed %q; want nodes and end", lines)
	}
	curatorOrder := lines[:len(lines)-1]
	ps := rwParticipants(t, rw)
	var dsyncOrder []string
	for _, p := range ps {
		dsyncOrder = append(dsyncOrder, p.Path)
		if p.Reader != strings.Contains(p.Node, readNode) {
			t.Errorf("%s: Reader = %v", p.Node, p.Reader)
		}
	}
	if !slices.Equal(curatorOrder, dsyncOrder) {
		t.Fatalf("Curator's queue:\n\t%s\ndsync's:\n\t%s\nwant the same",
			strings.Join(curatorOrder, "\n\t"), strings.Join(dsyncOrder, "\n\t"))
	}
	if got := kinds(ps); !slices.Equal(got, want) {
		t.Fatalf("Participants = %v; want %v (kind, - for waiting)", got, want)
	}
	return ps
}

// TestInteropRWParticipants: with one queue of Go and Java readers and
// writers, some holding and some waiting, RWMutex.Participants lists the
// nodes Curator lists (the whole read/write queue as Curator's read/write
// driver sorts it), in the same order, and marks them right: a writer not
// first waits, a reader behind any writer waits. Curator's holders agree,
// and the queue drains in that order.
func TestInteropRWParticipants(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs := observer(t, shared.Addr())
	r1s, ws, r2s := dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()}), dial(t, []string{shared.Addr()})
	goR1, goW, goR2 := dsync.NewRWMutex(r1s, path), dsync.NewRWMutex(ws, path), dsync.NewRWMutex(r2s, path)

	if _, err := goR1.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	javaR1 := holdCurator(t, ctx, curator.Read, path)
	awaitCurator(t, ctx, javaR1, "Curator reader beside a dsync reader")
	goWDone := lockRW(ctx, goW.LockContext)
	awaitChildren(t, obs, path, 3)
	javaR2 := holdCurator(t, ctx, curator.Read, path)
	javaW := holdCurator(t, ctx, curator.Write, path)
	goR2Done := lockRW(ctx, goR2.RLockContext)
	awaitChildren(t, obs, path, 6)

	ps := checkRWQueue(t, ctx, goR1, path, "R", "R", "W-", "R-", "W-", "R-")
	goIDs := []int64{sessionID(t, r1s), sessionID(t, ws), sessionID(t, r2s)}
	for i, owner := range []int64{goIDs[0], 0, goIDs[1], 0, 0, goIDs[2]} { // 0: a Curator node
		if owner != 0 && ps[i].Session != owner || owner == 0 && slices.Contains(goIDs, ps[i].Session) {
			t.Fatalf("participant %d (%s) belongs to session %#x; want %#x (0: Curator's)", i, ps[i].Node, ps[i].Session, owner)
		}
	}
	if ps[1].Path != javaR1.Node() {
		t.Fatalf("second participant %s; want the Curator reader's %s", ps[1].Path, javaR1.Node())
	}
	goWaits(t, goWDone, "dsync writer behind readers")
	curatorWaits(t, javaR2, "Curator reader behind a waiting dsync writer")
	curatorWaits(t, javaW, "Curator writer behind a waiting dsync writer")

	goR1.RUnlock()
	releaseCurator(t, javaR1)
	awaitLocked(t, goWDone, "dsync writer after the readers left")
	checkRWQueue(t, ctx, goR1, path, "W", "R-", "W-", "R-")
	curatorWaits(t, javaR2, "Curator reader behind a dsync writer")
	curatorWaits(t, javaW, "Curator writer behind a dsync writer")
	goWaits(t, goR2Done, "dsync reader behind two writers")

	goW.Unlock()
	awaitCurator(t, ctx, javaR2, "Curator reader after the dsync writer left")
	ps = checkRWQueue(t, ctx, goR1, path, "R", "W-", "R-")
	if ps[0].Path != javaR2.Node() {
		t.Fatalf("holder %s; want the Curator reader's %s", ps[0].Path, javaR2.Node())
	}
	curatorWaits(t, javaW, "Curator writer behind a Curator reader")
	goWaits(t, goR2Done, "dsync reader behind a Curator writer")

	releaseCurator(t, javaR2)
	awaitCurator(t, ctx, javaW, "Curator writer after the readers left")
	goWaits(t, goR2Done, "dsync reader behind a Curator writer")
	releaseCurator(t, javaW)
	awaitLocked(t, goR2Done, "dsync reader after the writers left")
	goR2.RUnlock()
	awaitChildren(t, obs, path, 0)
}

// TestInteropRWMixedWaiting: readers and writers of each side wait for the
// other side's holders and get in when they go.
func TestInteropRWMixedWaiting(t *testing.T) {
	t.Parallel() // after the rest of the package: paths and sessions of its own, no timing asserted
	// A dsync reader and a Curator reader waiting behind a Curator writer
	// both get in when it releases, and hold together.
	t.Run("readers behind Curator writer", func(t *testing.T) {
		path := lockPath(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		obs := observer(t, shared.Addr())
		javaW := holdCurator(t, ctx, curator.Write, path)
		awaitCurator(t, ctx, javaW, "Curator writer")
		goR := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		goRDone := lockRW(ctx, goR.RLockContext)
		awaitChildren(t, obs, path, 2)
		javaR := holdCurator(t, ctx, curator.Read, path)
		awaitChildren(t, obs, path, 3)
		if got := fmt.Sprint(kinds(rwParticipants(t, goR))); got != "[W R- R-]" {
			t.Fatalf("Participants = %s; want [W R- R-]", got)
		}
		goWaits(t, goRDone, "dsync reader behind a Curator writer")
		curatorWaits(t, javaR, "Curator reader behind a Curator writer")

		releaseCurator(t, javaW)
		held := awaitLocked(t, goRDone, "dsync reader after the Curator writer left")
		awaitCurator(t, ctx, javaR, "Curator reader after the Curator writer left")
		if held.Err() != nil {
			t.Fatalf("dsync read hold ended while the Curator reader got in: %v", context.Cause(held))
		}
		if got := fmt.Sprint(kinds(rwParticipants(t, goR))); got != "[R R]" {
			t.Fatalf("Participants = %s; want [R R]", got)
		}
		goR.RUnlock()
		releaseCurator(t, javaR)
		awaitChildren(t, obs, path, 0)
	})

	// A Curator reader and a dsync reader waiting behind a dsync writer both
	// get in when it unlocks, and hold together.
	t.Run("readers behind dsync writer", func(t *testing.T) {
		path := lockPath(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		obs := observer(t, shared.Addr())
		goW := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		if _, err := goW.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		javaR := holdCurator(t, ctx, curator.Read, path)
		goR := dsync.NewRWMutex(dial(t, []string{shared.Addr()}), path)
		goRDone := lockRW(ctx, goR.RLockContext)
		awaitChildren(t, obs, path, 3)
		if got := fmt.Sprint(kinds(rwParticipants(t, goR))); got != "[W R- R-]" {
			t.Fatalf("Participants = %s; want [W R- R-]", got)
		}
		curatorWaits(t, javaR, "Curator reader behind a dsync writer")
		goWaits(t, goRDone, "dsync reader behind a dsync writer")

		goW.Unlock()
		awaitCurator(t, ctx, javaR, "Curator reader after the dsync writer left")
		held := awaitLocked(t, goRDone, "dsync reader after the dsync writer left")
		if held.Err() != nil {
			t.Fatalf("dsync read hold ended beside the Curator reader: %v", context.Cause(held))
		}
		goR.RUnlock()
		releaseCurator(t, javaR)
		awaitChildren(t, obs, path, 0)
	})

	// A dsync writer behind two Curator readers gets in only once the last
	// one releases. The reader right ahead of it goes first: the writer
	// wakes, lists again and waits on the other one (seen in the server's
	// watch table) instead of claiming.
	t.Run("dsync writer behind Curator readers", func(t *testing.T) {
		path := lockPath(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		obs := observer(t, shared.Addr())
		javaR1 := holdCurator(t, ctx, curator.Read, path)
		awaitCurator(t, ctx, javaR1, "first Curator reader")
		javaR2 := holdCurator(t, ctx, curator.Read, path)
		awaitCurator(t, ctx, javaR2, "second Curator reader")
		ws := dial(t, []string{shared.Addr()})
		goW := dsync.NewRWMutex(ws, path)
		var lastReleased atomic.Bool
		goWDone := lockRW(ctx, func(ctx context.Context) (context.Context, error) {
			held, err := goW.LockContext(ctx)
			if err == nil && !lastReleased.Load() {
				err = errors.New("got in before the last Curator reader released")
			}
			return held, err
		})
		awaitChildren(t, obs, path, 3)
		id := sessionID(t, ws)
		awaitWatch(t, shared, javaR2.Node(), id)

		releaseCurator(t, javaR2)
		awaitWatch(t, shared, javaR1.Node(), id)
		if got := fmt.Sprint(kinds(rwParticipants(t, goW))); got != "[R W-]" {
			t.Fatalf("Participants = %s; want [R W-]", got)
		}
		goWaits(t, goWDone, "dsync writer behind a Curator reader")

		lastReleased.Store(true)
		releaseCurator(t, javaR1)
		awaitLocked(t, goWDone, "dsync writer after the Curator readers left")
		goW.Unlock()
		awaitChildren(t, obs, path, 0)
	})
}

// TestInteropMultiLock: Curator's InterProcessMultiLock, given the paths
// sorted as dsync's MultiLock doc says, a Curator InterProcessMutex on one
// of them, and dsync MultiLocks of Mutexes given the paths in other orders
// (one over a subset) hammer the same paths. Every contender holds the
// middle path, so the log must show one inside at a time; and all finish
// within ctx: no deadlock, whatever order the Go side was given, because it
// takes the paths in the order Java was given them.
func TestInteropMultiLock(t *testing.T) {
	t.Parallel()
	const iter = 25
	base := lockPath(t)
	a, b, c := base+"/a", base+"/b", base+"/c"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logName, f := openLog(t)
	g := newLoopGroup(t, ctx)
	g.java(curator.Multi, strings.Join([]string{a, b, c}, ","), iter, logName)
	g.java(curator.Mutex, b, iter, logName)
	for i, paths := range [][]string{{c, b, a}, {b, a, c}, {c, b}} {
		s := dial(t, []string{shared.Addr()})
		var members []sync.Locker
		for _, p := range paths {
			members = append(members, dsync.NewMutex(s, p))
		}
		ml := dsync.NewMultiLock(members...)
		who := fmt.Sprintf("go-%d", i)
		g.goLoop(func(ctx context.Context) error {
			return logLoop(ctx, f, who, iter, func(ctx context.Context) error {
				_, err := ml.LockContext(ctx)
				return err
			}, ml.Unlock)
		})
	}
	g.wait()
	per := checkLog(t, logName, 5*iter)
	if len(per) != 5 {
		t.Fatalf("participants in the log: %v; want 5", per)
	}
	obs := observer(t, shared.Addr())
	for _, p := range []string{a, b, c} {
		awaitChildren(t, obs, p, 0)
	}
}
