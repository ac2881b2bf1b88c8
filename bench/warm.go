package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// serverJVM are the flags the bench's ZooKeeper server runs with, over
// zktest's, which keep a test server quick to start: the full JIT (zktest
// stops at its quick tier) and a heap of 512 MiB from the start, as a
// production server has. zktest starts its heap at 16 MiB, and the serial
// collector keeps it there while a collection frees most of it: on loopback
// the server then collected its whole heap about once a second, and its
// young generation a few dozen times. The clients are measured against the
// server users run.
var serverJVM = zktest.WithJVMFlags("-XX:TieredStopAtLevel=4", "-Xms512m", "-Xmx512m")

// warmUpWindow is how long each warm-up workload runs.
const warmUpWindow = 5 * time.Second

// warmUp runs untimed workloads against the server before any cell, so that
// its JIT has compiled the paths of every request the cells send (create,
// delete, multi, getChildren, getData, exists, with and without watches):
// otherwise the first cells would pay for the compiling, on the server's
// CPU and in its latency, and the later ones not.
func warmUp(ctx context.Context, e *env) error {
	t0 := time.Now()
	for _, w := range []struct {
		name string
		run  runner
	}{
		{"mutex", dsyncMutex},          // create, getChildren, getData and exists watches, multi
		{"zklock", zkLock},             // create, getChildren, exists watch, delete
		{"weighted", dsyncWeighted(3)}, // the above, and getChildren watches
	} {
		run := *e
		run.duration = warmUpWindow
		if _, err := w.run(ctx, &run, "/bench/warmup/"+w.name, 8); err != nil {
			return fmt.Errorf("warm-up, %s: %w", w.name, err)
		}
	}
	log.Printf("warmed the server up in %v", time.Since(t0).Round(100*time.Millisecond))
	return nil
}
