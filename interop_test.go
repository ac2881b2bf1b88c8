package dsync_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/internal/curator"
)

// appendLine writes line to the shared log in one write(2) on an O_APPEND
// file, as the Java side does, so lines from many processes interleave whole.
func appendLine(f *os.File, line string) error {
	_, err := f.Write([]byte(line + "\n"))
	return err
}

// logLoop takes turns iter times: acquire, log "enter who", pause, log
// "exit who", release; as the Java side's loop command does.
func logLoop(ctx context.Context, f *os.File, who string, iter int, acquire func(context.Context) error, release func()) error {
	for j := 0; j < iter; j++ {
		if err := acquire(ctx); err != nil {
			return err
		}
		err := appendLine(f, "enter "+who)
		time.Sleep(time.Duration(j%3) * time.Millisecond)
		if err == nil {
			err = appendLine(f, "exit "+who)
		}
		release()
		if err != nil {
			return err
		}
	}
	return nil
}

// checkLog reads an enter/exit log and fails the test unless every enter is
// followed by the exit of the same participant, and there are want of them.
func checkLog(t *testing.T, name string, want int) map[string]int {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	per := map[string]int{}
	inside := ""
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		op, who, _ := strings.Cut(sc.Text(), " ")
		switch {
		case op == "enter" && inside == "":
			inside = who
		case op == "exit" && inside == who:
			inside = ""
			per[who]++
			n++
		default:
			t.Fatalf("%s:%d: %q while %q inside: critical sections overlap", name, line, sc.Text(), inside)
		}
	}
	if n != want {
		t.Fatalf("%d critical sections logged; want %d", n, want)
	}
	return per
}

// contender is one Go participant of a mixed run.
type contender struct {
	acquire func(context.Context) error
	release func()
}

// mixedRun has javaProcs Curator processes run `loop kind ... iter log
// javaArgs...` while each Go contender runs logLoop iter times, all on path
// and one log, and returns the log's name once all are done.
func mixedRun(t *testing.T, kind, path string, iter, javaProcs int, javaArgs []string, goers []contender) string {
	t.Helper()
	logName := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(logName, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, javaProcs+len(goers))
	args := append([]string{"loop", kind, shared.Addr(), path, strconv.Itoa(iter), logName}, javaArgs...)
	for i := 0; i < javaProcs; i++ {
		wg.Go(func() {
			if _, err := java.Run(ctx, args...); err != nil {
				errs <- err
			}
		})
	}
	for i, g := range goers {
		wg.Go(func() {
			if err := logLoop(ctx, f, fmt.Sprintf("go-%d", i), iter, g.acquire, g.release); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return logName
}

// TestInteropMutexExclusion: Java processes using Curator's InterProcessMutex
// and Go Sessions using dsync.Mutex take turns on one path, never overlapping.
func TestInteropMutexExclusion(t *testing.T) {
	t.Parallel()
	const javaProcs, goSessions, iter = 2, 2, 50
	path := lockPath(t)
	var goers []contender
	for i := 0; i < goSessions; i++ {
		m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
		goers = append(goers, contender{
			acquire: func(ctx context.Context) error { _, err := m.LockContext(ctx); return err },
			release: m.Unlock,
		})
	}
	logName := mixedRun(t, curator.Mutex, path, iter, javaProcs, nil, goers)
	per := checkLog(t, logName, (javaProcs+goSessions)*iter)
	if len(per) != javaProcs+goSessions {
		t.Fatalf("participants in the log: %v; want %d", per, javaProcs+goSessions)
	}
}

// TestInteropMutexParticipants: Curator's getParticipantNodes and dsync's
// Participants list one mixed queue in the same order, and each side waits
// for the other's holder.
func TestInteropMutexParticipants(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	javaHolder, err := java.Hold(ctx, curator.Mutex, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer javaHolder.Kill()
	<-javaHolder.Acquired()

	goWaiter := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if goWaiter.TryLock() {
		t.Fatal("dsync TryLock succeeded while Curator holds the lock")
	}
	goHeld := make(chan error, 1)
	go func() {
		_, err := goWaiter.LockContext(ctx)
		goHeld <- err
	}()
	obs := observer(t, shared.Addr())
	awaitChildren(t, obs, path, 2)
	javaWaiter, err := java.Hold(ctx, curator.Mutex, shared.Addr(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer javaWaiter.Kill()

	lines, err := java.Run(ctx, "participants", curator.Mutex, shared.Addr(), path)
	if err != nil {
		t.Fatal(err)
	}
	var curatorOrder []string
	for _, l := range lines {
		if l != "end" {
			curatorOrder = append(curatorOrder, l)
		}
	}
	ps, err := goWaiter.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dsyncOrder []string
	for _, p := range ps {
		dsyncOrder = append(dsyncOrder, p.Path)
	}
	if strings.Join(curatorOrder, ",") != strings.Join(dsyncOrder, ",") || len(dsyncOrder) != 3 {
		t.Fatalf("Curator's order %v; dsync's %v; want the same 3", curatorOrder, dsyncOrder)
	}
	if dsyncOrder[0] != javaHolder.Node() || len(ps[0].Data) == 0 {
		t.Fatalf("holder %v (%q); want Curator's node %s", dsyncOrder[0], ps[0].Data, javaHolder.Node())
	}

	if err := javaHolder.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-goHeld; err != nil {
		t.Fatal(err)
	}
	select {
	case <-javaWaiter.Acquired():
		t.Fatal("Curator waiter acquired while dsync holds the lock")
	default:
	}
	goWaiter.Unlock()
	select {
	case <-javaWaiter.Acquired():
	case <-ctx.Done():
		t.Fatal("Curator waiter never acquired")
	}
	if err := javaWaiter.Release(); err != nil && !errors.Is(err, curator.ErrExited) {
		t.Fatal(err)
	}
}
