// Command chaos is dsync's chaos suite: it looks for safety holes by running
// several worker processes that hold dsync locks on shared paths while
// faults strike, and counts what matters to a user. Run it from the module
// root (make chaos runs it for 10,000 holds and more):
//
//	go run ./chaos [-duration 1m] [-holds N] [-faults K] [-seed S] [-report FILE] [-readme README.md]
//
// It starts a 3-server ZooKeeper ensemble (zkconn/zktest) whose servers
// grant sessions of at most 3s, and worker processes — this binary again,
// with -worker — each talking to the servers through proxies of its own:
// three take a Mutex (LockContext), three a Weighted of 2 (AcquireLeases),
// three a SemaphoreMutex (LockContext), two read and write a Count (Get,
// Set, CompareAndSet), two run the dsync command again and again (dsync
// lock PATH -- sh -c SCRIPT, built by the run; see cmdlock.go), whose
// SCRIPT ignores SIGTERM and holds in two processes of its group, and two
// campaign in an Election (Campaign, then Resign).
// Half of them ask for a 2s session, half for 4s, more than the servers
// grant. Every call has a deadline; holds last a few milliseconds, a few of
// them up to 2s. Workers stream JSON records of every hold and call to the
// coordinator, on one clock.
//
// Every few seconds (seeded) it strikes one fault, heals it, and waits for
// every worker to acquire again: the leader or a follower killed and
// restarted; a server paused (SIGSTOP) past the session timeout; one
// worker's connections black-holed past the session timeout; a worker's
// create or release (or a Count's write) cut at the exact request, before
// it reaches the server or with its reply lost (zktest.Proxy.Strike), or
// its reply swallowed with the connection left up (the session must notice
// by itself); a waiter's node deleted by hand; __REVOKE__ written into a holder's node; a
// worker killed with SIGKILL or stopped with SIGTERM, then restarted (for a
// dsync lock worker: its dsync, whose CMD must end with it). After each
// fault, the lock workers quiesce and no lock node may be left.
//
// The checks, on the records:
//
//   - overlaps: per path, holds beyond what the primitive allows (one; two
//     for the Weighted). A hold's safe interval runs from its acquisition to
//     its release or to the moment its hold context told of the loss,
//     whichever is first: overlapping safe intervals are an unnoticed
//     overlap (a failure), overlaps after a noticed loss are counted apart.
//     dsync lock tells CMD of a loss only by killing it: a run of it holds
//     from its first holder's enter to its last holder's exit or, killed,
//     until its worker saw CMD's process group gone, and any overlap is
//     unnoticed;
//   - fencing tokens grow in the order Mutex and SemaphoreMutex holds began;
//   - every live worker acquires again within the session timeout + 5s of a
//     heal;
//   - no lock node outlives its holders and waiters;
//   - no call returns more than 100ms after its deadline;
//   - the Count's history is linearizable (porcupine), writes with an
//     unknown outcome (dsync.ErrOutcomeUnknown, or a process killed with the
//     write in flight) taking effect at any time after their call, or never;
//   - and the time from a holder's SIGTERM or SIGKILL to the next process's
//     acquisition is reported.
//
// It prints a Markdown table (and writes it with -report, and between the
// chaos markers of -readme), keeps every record and the workers' logs in a
// temporary directory it names, and exits 1 if a check failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"
)

func main() {
	if isWorker(os.Args[1:]) {
		os.Exit(workerMain(os.Args[1:]))
	}
	os.Exit(coordinatorMain(os.Args[1:]))
}

func coordinatorMain(args []string) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	duration := fs.Duration("duration", time.Minute, "strike faults for at least this long")
	holds := fs.Int("holds", 0, "and until the workers have entered this many holds")
	perKind := fs.Int("faults", 1, "and until each kind of fault was struck this often")
	maxDuration := fs.Duration("max-duration", 30*time.Minute, "but stop striking after this long")
	seed := fs.Uint64("seed", 0, "seed of the schedule and the workers (0: from the clock)")
	report := fs.String("report", "", "write the report (Markdown) to this file")
	readme := fs.String("readme", "", "write the table between the chaos markers of this file")
	recheck := fs.String("check", "", "check the records a run kept in this directory again, without running")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetFlags(log.Ltime)
	cfg, err := newConfig(*seed)
	if err != nil {
		log.Print(err)
		return 1
	}
	cfg.duration, cfg.holds, cfg.perKind, cfg.maxDuration = *duration, *holds, *perKind, *maxDuration
	var recs []record
	if *recheck != "" {
		os.Remove(cfg.dir)
		cfg.dir = *recheck
		if recs, err = readRecords(filepath.Join(cfg.dir, "records.jsonl")); err != nil {
			log.Print(err)
			return 1
		}
	} else {
		log.Printf("chaos: seed %d; records and worker logs in %s", cfg.seed, cfg.dir)
		t := &programT{}
		ok := t.do(func() { recs, err = run(t, cfg) })
		t.cleanup()
		switch {
		case err != nil:
			log.Printf("chaos: the run failed (seed %d): %v", cfg.seed, err)
			return 1
		case !ok:
			log.Printf("chaos: the run failed (seed %d); see above", cfg.seed)
			return 1
		}
	}
	res := analyze(recs, cfg)
	md := res.markdown(cfg)
	fmt.Print(md)
	if *report != "" {
		if err := os.WriteFile(*report, []byte(md), 0o644); err != nil {
			log.Print(err)
			return 1
		}
	}
	if *readme != "" {
		if err := splice(*readme, res.table(cfg)); err != nil {
			log.Print(err)
			return 1
		}
	}
	if res.failed() {
		log.Printf("chaos: checks failed; rerun with -seed %d; records in %s", res.seed, cfg.dir)
		return 1
	}
	return 0
}

// newConfig returns the default configuration with seed (0: from the
// clock), a fresh directory for the run's files, and this binary for the
// workers.
func newConfig(seed uint64) (config, error) {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	exe, err := os.Executable()
	if err != nil {
		return config{}, err
	}
	dir, err := os.MkdirTemp("", "dsync-chaos-")
	if err != nil {
		return config{}, err
	}
	return config{
		seed:         seed,
		duration:     time.Minute,
		perKind:      1,
		maxDuration:  30 * time.Minute,
		gap:          [2]time.Duration{time.Second, 3 * time.Second},
		workers:      defaultWorkers,
		checkTimeout: 5 * time.Minute,
		exe:          exe,
		dir:          dir,
		logf:         log.Printf,
	}, nil
}

// readRecords reads the records a run kept (records.jsonl).
func readRecords(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}
