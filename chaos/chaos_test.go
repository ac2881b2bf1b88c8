package main

import (
	"flag"
	"math"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("chaos.seed", 0, "seed of TestChaos (0: from the clock)")

// TestMain runs the workers too: TestChaos starts this test binary again
// with -worker.
func TestMain(m *testing.M) {
	if isWorker(os.Args[1:]) {
		os.Exit(workerMain(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// TestChaos is a one-minute chaos run (see the package documentation): it
// fails on any unnoticed overlap, fencing-token regression, orphaned node,
// recovery slower than the session timeout + 5s, call more than 100ms past
// its deadline, Count history that is not linearizable (or cannot be
// decided), or worker that crashed or ignored SIGTERM.
func TestChaos(t *testing.T) {
	cfg, err := newConfig(*seedFlag)
	if err != nil {
		t.Fatal(err)
	}
	cfg.duration, cfg.perKind = time.Minute, 0
	cfg.checkTimeout = time.Minute
	cfg.logf = t.Logf
	t.Logf("seed %d; records and worker logs in %s", cfg.seed, cfg.dir)
	recs, err := run(t, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.seed, err)
	}
	res := analyze(recs, cfg)
	t.Logf("\n%s", res.table(cfg))
	if res.failed() {
		t.Errorf("chaos checks failed; rerun with: go test -race -run TestChaos ./chaos -args -chaos.seed=%d\nrecords and worker logs: %s\n%s",
			cfg.seed, cfg.dir, res.details())
		return
	}
	os.RemoveAll(cfg.dir)
}

// TestIncidents pins the overlap sweep: intervals are [enter, end), and a
// Weighted of 2 overlaps only with three holds at once.
func TestIncidents(t *testing.T) {
	h := func(enter, exit, lost int64) *hold {
		return &hold{record: record{Enter: enter, Exit: exit, Lost: lost}}
	}
	tests := []struct {
		name               string
		holds              []*hold
		capacity           int
		unnoticed, noticed int
	}{
		{"handover at the same instant", []*hold{h(0, 10, 0), h(10, 20, 0)}, 1, 0, 0},
		{"overlap", []*hold{h(0, 10, 0), h(5, 20, 0)}, 1, 1, 0},
		{"overlap after a noticed loss", []*hold{h(0, 10, 4), h(5, 20, 0)}, 1, 0, 1},
		{"loss noticed too late", []*hold{h(0, 10, 6), h(5, 20, 0)}, 1, 1, 0},
		{"two of two", []*hold{h(0, 10, 0), h(5, 20, 0)}, 2, 0, 0},
		{"three of two", []*hold{h(0, 10, 0), h(5, 20, 0), h(8, 9, 0)}, 2, 1, 0},
		{"three of two, one lost", []*hold{h(0, 10, 7), h(5, 20, 0), h(8, 9, 0)}, 2, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r results
			path := mutexPath
			if tt.capacity == 2 {
				path = weightedPath
			}
			for _, h := range tt.holds {
				h.Path = path
			}
			r.checkOverlaps(tt.holds)
			if len(r.unnoticed) != tt.unnoticed || len(r.noticed) != tt.noticed {
				t.Errorf("got %d unnoticed, %d noticed; want %d, %d", len(r.unnoticed), len(r.noticed), tt.unnoticed, tt.noticed)
			}
		})
	}
}

// TestTokens pins the regression check: tokens must grow in enter order.
func TestTokens(t *testing.T) {
	h := func(enter, token int64) *hold {
		return &hold{record: record{Path: mutexPath, Enter: enter, Token: token}}
	}
	var r results
	r.checkTokens([]*hold{h(1, 10), h(2, 12), h(3, 11), h(4, 12), h(5, 13)})
	if len(r.regressions) != 2 {
		t.Errorf("got %d regressions; want 2 (11 after 12, and 12 again)", len(r.regressions))
	}
}

// TestCountModel pins the model: a write applied twice, or a false
// compare-and-set that was applied, is not linearizable; an unknown
// outcome may have happened or not.
func TestCountModel(t *testing.T) {
	op := func(client int, call, ret int64, in regInput, out regOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	get := regInput{op: "get"}
	open := int64(math.MaxInt64)
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"set then get", []porcupine.Operation{
			op(0, 0, 1, regInput{op: "set", arg: 7}, regOutput{}),
			op(1, 2, 3, get, regOutput{value: 7, version: 1}),
		}, porcupine.Ok},
		{"set applied twice", []porcupine.Operation{
			op(0, 0, 1, regInput{op: "set", arg: 7}, regOutput{}),
			op(1, 2, 3, get, regOutput{value: 7, version: 2}),
		}, porcupine.Illegal},
		{"cas false but applied", []porcupine.Operation{
			op(0, 0, 1, regInput{op: "cas", arg: 7, prev: 0}, regOutput{ok: false}),
			op(1, 2, 3, get, regOutput{value: 7, version: 1}),
		}, porcupine.Illegal},
		{"unknown applied", []porcupine.Operation{
			op(0, 0, open, regInput{op: "set", arg: 7}, regOutput{unknown: true}),
			op(1, 2, 3, get, regOutput{value: 7, version: 1}),
		}, porcupine.Ok},
		{"unknown not applied", []porcupine.Operation{
			op(0, 0, open, regInput{op: "set", arg: 7}, regOutput{unknown: true}),
			op(1, 2, 3, get, regOutput{value: 0, version: 0}),
		}, porcupine.Ok},
		{"failed but applied", []porcupine.Operation{
			op(0, 0, 1, regInput{op: "set", arg: 7}, regOutput{failed: true}),
			op(1, 2, 3, get, regOutput{value: 7, version: 1}),
		}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(countModel, tt.ops, 10*time.Second); got != tt.want {
				t.Errorf("got %s; want %s", got, tt.want)
			}
		})
	}
}

// TestSettle pins what reads prove of writes with an unknown outcome.
func TestSettle(t *testing.T) {
	done := map[int]record{
		1: {Op: "get", Value: 7, Version: 1, Return: 50},
		2: {Op: "get", Value: 9, Version: 2, Return: 40},
	}
	seen := sight(done)
	tests := []struct {
		name    string
		inv     record
		out     regOutput
		wantRet int64
	}{
		{"set seen at version 1", record{Op: "set", Arg: 7, Start: 10}, regOutput{ok: true}, 40},
		{"cas seen at the version after the one it expected", record{Op: "cas", Arg: 9, Prev: 1, Start: 10}, regOutput{ok: true}, 40},
		{"cas whose version holds another value", record{Op: "cas", Arg: 8, Prev: 0, Start: 10}, regOutput{failed: true}, 10},
		{"cas whose version nobody saw", record{Op: "cas", Arg: 8, Prev: 5, Start: 10}, regOutput{unknown: true}, math.MaxInt64},
		{"set nobody saw", record{Op: "set", Arg: 8, Start: 10}, regOutput{unknown: true}, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ret := seen.settle(tt.inv)
			if out != tt.out || ret != tt.wantRet {
				t.Errorf("got %+v, return %d; want %+v, %d", out, ret, tt.out, tt.wantRet)
			}
		})
	}
}

// TestJoinRuns pins how the holds of dsync lock runs are checked: the two
// holders of one run are one holder, from the first enter to the last end.
func TestJoinRuns(t *testing.T) {
	h := func(worker string, run int, enter, exit int64) *hold {
		return &hold{record: record{Worker: worker, Inc: 1, Path: cmdPath, Run: run, Enter: enter, Exit: exit}}
	}
	tests := []struct {
		name      string
		holds     []*hold
		joined    int
		unnoticed int
	}{
		{"one run's two holders", []*hold{h("a", 1, 0, 10), h("a", 1, 2, 20)}, 1, 0},
		{"two runs of one worker", []*hold{h("a", 1, 0, 10), h("a", 2, 10, 20)}, 2, 0},
		{"a holder of one run outlives it into the next", []*hold{h("a", 1, 0, 10), h("a", 1, 0, 15), h("b", 1, 12, 20)}, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			joined := joinRuns(tt.holds)
			var r results
			r.checkOverlaps(joined)
			if len(joined) != tt.joined || len(r.unnoticed) != tt.unnoticed {
				t.Errorf("got %d holds, %d unnoticed overlaps; want %d, %d", len(joined), len(r.unnoticed), tt.joined, tt.unnoticed)
			}
		})
	}
}

// TestRecoveryCountsEveryHolder pins a late recovery reported for a worker
// that did recover: a dsync lock run that held across a fault, whose second
// holder entered after the heal, counted only from its first holder's
// enter, before the heal, once its holders were joined into one hold.
func TestRecoveryCountsEveryHolder(t *testing.T) {
	base := record{Worker: "cmdlock-1", Inc: 1, Path: cmdPath, Run: 1}
	enter := func(hold int, at int64) record {
		r := base
		r.Type, r.Hold, r.Enter = recEnter, hold, at
		return r
	}
	exit := func(hold int, entered, at int64) record {
		r := enter(hold, entered)
		r.Type, r.Exit = recExit, at
		return r
	}
	recs := []record{
		{Type: recStart, Worker: "cmdlock-1", Inc: 1, Kind: kindCmdLock, Start: 1},
		enter(1, 5),
		{Type: recFault, Kind: "follower killed and restarted", At: 8, Healed: 10, Live: []string{"cmdlock-1"}},
		enter(2, 20), exit(1, 5, 50), exit(2, 20, 60),
	}
	if r := analyze(recs, config{}); len(r.late) != 0 {
		t.Fatalf("late recoveries %v; want none (the second holder entered 10ns after the heal)", r.late)
	}
}
