package main

import (
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// programT lets the command start an ensemble with zktest.StartEnsemble,
// which wants a testing.TB: zktest has StartServer for programs, but no
// counterpart for ensembles. It implements what StartEnsemble uses (the
// embedded TB is nil: anything else would panic). Fatal ends the goroutine
// that calls it, as in a test, so the work runs under do.
type programT struct {
	testing.TB

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// do runs f on a goroutine of its own, waits for it to return (or to call
// Fatal), and reports whether nothing failed.
func (t *programT) do(f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	return !t.Failed()
}

// cleanup runs the functions Cleanup registered, last first.
func (t *programT) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}

func (t *programT) Helper()      {}
func (t *programT) Name() string { return "chaos" }

func (t *programT) TempDir() string {
	dir, err := os.MkdirTemp("", "dsync-chaos-zk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (t *programT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *programT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *programT) fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

func (t *programT) Log(args ...any)                 { log.Print(fmt.Sprintln(args...)) }
func (t *programT) Logf(format string, args ...any) { log.Printf(format, args...) }
func (t *programT) Error(args ...any)               { t.Log(args...); t.fail() }
func (t *programT) Errorf(format string, args ...any) {
	t.Logf(format, args...)
	t.fail()
}
func (t *programT) Fatal(args ...any) { t.Error(args...); runtime.Goexit() }
func (t *programT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}
