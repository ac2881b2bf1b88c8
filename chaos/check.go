package main

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A hold as the checks see it: its exit record (or its enter record, ended
// by the death of its process).
type hold struct {
	record
	kind string
}

// safeEnd is the end of the hold's safe interval: its exit, or the moment
// it noticed its loss, whichever came first.
func (h *hold) safeEnd() int64 {
	if h.Lost > 0 && h.Lost < h.Exit {
		return h.Lost
	}
	return h.Exit
}

func (h *hold) rawEnd() int64 { return h.Exit }

func (h *hold) inc() string { return incName(h.Worker, h.Inc) }

// An incident is a stretch of time in which more holds of one path were
// held than the primitive allows.
type incident struct {
	path     string
	from, to int64
	holds    []*hold
}

// A regression is a hold entered after another whose token was not lower.
type regression struct {
	before, after *hold
}

// results is what the checks found in a run's records.
type results struct {
	seed       uint64
	start, end int64
	workers    int
	holds      map[string]int // by worker kind
	faults     map[string]int
	skipped    int // faults that found nothing to strike

	unnoticed, noticed []incident
	regressions        []regression
	noToken            []*hold
	orphans            []record

	recoveryWorst time.Duration
	recoveryFault string
	late          []string

	calls        int
	overruns     []record
	worstOverrun time.Duration // the latest return past a deadline
	worstLag     time.Duration // the same, less the time the call's process did not run
	stalled      int           // calls late only while their process did not run

	handover map[string][]time.Duration // by signal

	dsyncSignals map[string]int // dsync lock workers' dsync processes signaled, by signal
	survived     int            // of them SIGKILLed, those whose CMD left processes behind
	outlived     time.Duration  // the longest such processes ran on after dsync returned

	value valueResult

	problems []string
	depRaces []string // data races inside go-zookeeper (see scanLogs)
}

// raceStatus is how a process ends whose race detector found a race.
const raceStatus = "exit status 66"

// failed reports whether any check failed.
func (r *results) failed() bool {
	return len(r.unnoticed) > 0 || len(r.regressions) > 0 || len(r.noToken) > 0 || len(r.orphans) > 0 ||
		len(r.late) > 0 || len(r.overruns) > 0 || !r.value.ok() || len(r.problems) > 0
}

// analyze runs every check on the records of a run.
func analyze(recs []record, cfg config) *results {
	res := &results{seed: cfg.seed, holds: map[string]int{}, faults: map[string]int{}, handover: map[string][]time.Duration{},
		dsyncSignals: map[string]int{}}
	kindOf := map[string]string{} // worker → kind
	open := map[string]*hold{}    // "worker#inc/hold" → hold not yet exited
	var holds []*hold
	died := map[string]int64{} // "worker#inc" → when its process ended
	gone := map[string]int64{} // "worker#inc/run" → when CMD's group was seen gone
	dead := map[string]int64{} // "worker#inc/hold" → when a holder of CMD was seen dead
	signaled := map[string]string{}
	var signals, faults, calls, stalls []record
	for _, r := range recs {
		for _, t := range []int64{r.At, r.Start, r.Enter} {
			if t != 0 && (res.start == 0 || t < res.start) {
				res.start = t
			}
		}
		res.end = max(res.end, r.At, r.Return, r.Exit, r.Enter)
		key := fmt.Sprintf("%s/%d", incName(r.Worker, r.Inc), r.Hold)
		switch r.Type {
		case recRun:
			res.seed = r.Seed
		case recStart:
			kindOf[r.Worker] = r.Kind
		case recEnter:
			h := &hold{record: r, kind: kindOf[r.Worker]}
			open[key] = h
			holds = append(holds, h)
		case recExit:
			if h, ok := open[key]; ok {
				h.record = r
				delete(open, key)
			}
		case recExitProc:
			died[incName(r.Worker, r.Inc)] = r.At
			why, s := signaled[incName(r.Worker, r.Inc)]
			switch {
			case !s && r.Status == raceStatus:
				// reported with the race, from the log
			case !s:
				res.problems = append(res.problems, fmt.Sprintf("%s#%d crashed: %s (see %s.%d.log)", r.Worker, r.Inc, r.Status, r.Worker, r.Inc))
			case why == "SIGTERM" && r.Status != "exit 0" && r.Status != raceStatus:
				res.problems = append(res.problems, fmt.Sprintf("%s#%d ended with %q after SIGTERM", r.Worker, r.Inc, r.Status))
			}
		case recCmdEnd:
			gone[fmt.Sprintf("%s/%d", incName(r.Worker, r.Inc), r.Run)] = r.At
			if r.Signal != "" {
				res.dsyncSignals[r.Signal]++
			}
			if r.Survivors > 0 {
				res.survived++
				res.outlived = max(res.outlived, time.Duration(r.At-r.Return))
			}
		case recCmdDied:
			dead[key] = r.At
		case recSignal:
			signals = append(signals, r)
			signaled[incName(r.Worker, r.Inc)] = r.Signal
		case recFault:
			faults = append(faults, r)
			res.faults[r.Kind]++
		case recCall:
			calls = append(calls, r)
		case recStall:
			stalls = append(stalls, r)
		case recOrphan:
			res.orphans = append(res.orphans, r)
		case recProblem:
			res.problems = append(res.problems, r.Detail)
		case recGarbage:
			res.problems = append(res.problems, fmt.Sprintf("%s#%d wrote a line that is not a record: %q", r.Worker, r.Inc, r.Detail))
		}
	}
	for _, h := range open {
		h.Killed = true
		h.Exit = res.end
		if t, ok := died[h.inc()]; ok {
			h.Exit = t
		}
		if t, ok := gone[fmt.Sprintf("%s/%d", h.inc(), h.Run)]; ok && h.Run != 0 {
			h.Exit = t
		}
		if t, ok := dead[fmt.Sprintf("%s/%d", h.inc(), h.Hold)]; ok {
			h.Exit = min(h.Exit, t)
		}
	}
	entered := holds // every holder's enter, as the run's own wait for recovery counts them
	holds = joinRuns(holds)
	for _, h := range holds {
		res.holds[h.kind]++
	}
	for _, k := range kinds {
		res.workers += cfg.workers[k]
	}
	res.checkOverlaps(holds)
	res.checkTokens(holds)
	res.checkRecovery(faults, entered, calls)
	res.checkDeadlines(calls, stalls)
	res.checkHandover(signals, holds)
	res.value = checkValue(recs, cfg)
	problems, deps := scanLogs(cfg.dir)
	res.problems = append(res.problems, problems...)
	res.depRaces = deps
	return res
}

// joinRuns makes one hold of the holds of each run of dsync lock (the two
// holders its CMD runs), from the first enter to the last end: a run holds
// the lock as one holder.
func joinRuns(holds []*hold) []*hold {
	var out []*hold
	runs := map[string]*hold{}
	for _, h := range holds {
		if h.Run == 0 {
			out = append(out, h)
			continue
		}
		key := fmt.Sprintf("%s/%d", h.inc(), h.Run)
		j, ok := runs[key]
		if !ok {
			j = &hold{record: h.record, kind: h.kind}
			j.Hold = h.Run
			runs[key] = j
			out = append(out, j)
			continue
		}
		j.Enter, j.Exit, j.Killed = min(j.Enter, h.Enter), max(j.Exit, h.Exit), j.Killed || h.Killed
	}
	return out
}

// checkOverlaps finds, per path, the stretches in which more holds were
// held than allowed: unnoticed if even the holds' safe intervals (ended by
// a noticed loss) overlap, else noticed.
func (r *results) checkOverlaps(holds []*hold) {
	byPath := map[string][]*hold{}
	for _, h := range holds {
		byPath[h.Path] = append(byPath[h.Path], h)
	}
	for _, path := range slices.Sorted(maps.Keys(byPath)) {
		hs := byPath[path]
		capacity := 1
		if path == weightedPath {
			capacity = weightedMax
		}
		unnoticed := incidents(path, hs, capacity, (*hold).safeEnd)
		r.unnoticed = append(r.unnoticed, unnoticed...)
		for _, in := range incidents(path, hs, capacity, (*hold).rawEnd) {
			if !slices.ContainsFunc(unnoticed, func(u incident) bool { return u.from < in.to && in.from < u.to }) {
				r.noticed = append(r.noticed, in)
			}
		}
	}
}

// incidents sweeps the intervals [Enter, end(h)) of hs and returns the
// stretches in which more than capacity of them are open.
func incidents(path string, hs []*hold, capacity int, end func(*hold) int64) []incident {
	type event struct {
		t     int64
		start bool
		h     *hold
	}
	var evs []event
	for _, h := range hs {
		if e := end(h); e > h.Enter {
			evs = append(evs, event{h.Enter, true, h}, event{e, false, h})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		if a.start == b.start {
			return 0
		}
		if !a.start {
			return -1 // an end at t comes before a start at t: [a, b) intervals
		}
		return 1
	})
	active := map[*hold]bool{}
	var out []incident
	var cur *incident
	for _, e := range evs {
		if !e.start {
			delete(active, e.h)
			if cur != nil && len(active) <= capacity {
				cur.to = e.t
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		active[e.h] = true
		switch {
		case cur != nil:
			cur.holds = append(cur.holds, e.h)
		case len(active) > capacity:
			cur = &incident{path: path, from: e.t}
			for h := range active {
				cur.holds = append(cur.holds, h)
			}
			slices.SortFunc(cur.holds, func(a, b *hold) int { return cmp.Compare(a.Enter, b.Enter) })
		}
	}
	return out
}

// checkTokens checks that, per Mutex and SemaphoreMutex path, fencing tokens
// grow in the order the holds were entered.
func (r *results) checkTokens(holds []*hold) {
	for _, path := range []string{mutexPath, semPath, cmdPath, electionPath} {
		var hs []*hold
		for _, h := range holds {
			if h.Path == path {
				hs = append(hs, h)
			}
		}
		slices.SortStableFunc(hs, func(a, b *hold) int { return cmp.Compare(a.Enter, b.Enter) })
		var top *hold
		for _, h := range hs {
			if h.Token == 0 {
				r.noToken = append(r.noToken, h)
				continue
			}
			if top != nil && h.Token <= top.Token {
				r.regressions = append(r.regressions, regression{before: top, after: h})
				continue
			}
			top = h
		}
	}
}

// checkRecovery measures, for every fault, how long each worker live after
// it took to enter a hold (or complete a Value operation) after the heal.
func (r *results) checkRecovery(faults []record, holds []*hold, calls []record) {
	oks := map[string][]int64{}
	for _, h := range holds {
		oks[h.Worker] = append(oks[h.Worker], h.Enter)
	}
	for _, c := range calls {
		if c.ID != 0 && c.Err == "" {
			oks[c.Worker] = append(oks[c.Worker], c.Return)
		}
	}
	for _, ts := range oks {
		slices.Sort(ts)
	}
	for _, f := range faults {
		for _, w := range f.Live {
			ts := oks[w]
			i, _ := slices.BinarySearch(ts, f.Healed)
			took := time.Duration(-1)
			if i < len(ts) {
				took = time.Duration(ts[i] - f.Healed)
			}
			if took < 0 || took > recoveryBound {
				what := "never"
				if took >= 0 {
					what = "after " + took.Round(time.Millisecond).String()
				}
				r.late = append(r.late, fmt.Sprintf("after %q (%s) at %s, %s acquired %s (bound %v)",
					f.Kind, f.Detail, r.clock(f.Healed), w, what, recoveryBound))
				continue
			}
			if took > r.recoveryWorst {
				r.recoveryWorst, r.recoveryFault = took, f.Kind
			}
		}
	}
}

// checkDeadlines finds the calls that returned more than overrunBound
// after their deadline, not counting the time their process did not run
// meanwhile (its stall records): a machine too busy to run a process makes
// every call of it late, and that is not the call's doing. The report gives
// the worst overrun with and without those stalls.
func (r *results) checkDeadlines(calls, stalls []record) {
	byInc := map[string][]record{}
	for _, s := range stalls {
		byInc[incName(s.Worker, s.Inc)] = append(byInc[incName(s.Worker, s.Inc)], s)
	}
	for _, c := range calls {
		if c.Deadline == 0 {
			continue
		}
		r.calls++
		over := time.Duration(c.Return - c.Deadline)
		r.worstOverrun = max(r.worstOverrun, over)
		if over <= 0 {
			continue
		}
		var stalled time.Duration
		for _, s := range byInc[incName(c.Worker, c.Inc)] {
			stalled += time.Duration(max(0, min(s.Return, c.Return)-max(s.Start, c.Deadline)))
		}
		r.worstLag = max(r.worstLag, over-stalled)
		switch {
		case over-stalled > overrunBound:
			r.overruns = append(r.overruns, c)
		case over > overrunBound:
			r.stalled++
		}
	}
}

// checkHandover times, for each signal that struck a Mutex or
// SemaphoreMutex holder, how long the next process took to acquire.
func (r *results) checkHandover(signals []record, holds []*hold) {
	for _, s := range signals {
		if s.Kind != kindMutex && s.Kind != kindSemMutex && s.Kind != kindElection {
			continue
		}
		held := slices.ContainsFunc(holds, func(h *hold) bool {
			return h.Worker == s.Worker && h.Inc == s.Inc && h.Enter <= s.At && s.At <= h.Exit
		})
		if !held {
			continue
		}
		next := int64(0)
		for _, h := range holds {
			if h.Path == s.Path && h.Enter > s.At && (h.Worker != s.Worker || h.Inc != s.Inc) && (next == 0 || h.Enter < next) {
				next = h.Enter
			}
		}
		if next != 0 {
			r.handover[s.Signal] = append(r.handover[s.Signal], time.Duration(next-s.At))
		}
	}
}

// scanLogs reports what the workers' stderr says went wrong: panics, and
// data races (the race detector reports them and goes on; the process then
// exits with status 66). A race whose two accesses are both inside
// go-zookeeper is returned apart, in deps: dsync cannot fix it (v1.0.4 has a
// known one, go-zookeeper/zk#35: Conn.lastZxid, written by recvLoop and read
// by sendSetWatches on a reconnect).
func scanLogs(dir string) (problems, deps []string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		text := string(b)
		if strings.Contains(text, "panic:") {
			problems = append(problems, fmt.Sprintf("%s: panic", filepath.Base(name)))
		}
		for _, report := range strings.Split(text, "WARNING: DATA RACE")[1:] {
			report, _, _ = strings.Cut(report, "==================")
			where := raceFrames(report)
			if strings.Contains(where, "github.com/dsync-go/dsync") {
				problems = append(problems, fmt.Sprintf("%s: data race in %s", filepath.Base(name), where))
			} else {
				deps = append(deps, fmt.Sprintf("%s: data race in %s", filepath.Base(name), where))
			}
		}
	}
	return problems, deps
}

// raceFrames returns the functions of the two conflicting accesses of a
// race report (not the stacks that created the goroutines), joined.
func raceFrames(report string) string {
	var fns []string
	for _, section := range strings.Split(report, "\n\n") {
		section = strings.TrimSpace(section)
		if strings.HasPrefix(section, "Goroutine ") {
			continue // where the goroutine was created
		}
		lines := strings.Split(section, "\n")
		if len(lines) > 1 {
			fns = append(fns, strings.TrimSpace(lines[1]))
		}
	}
	return strings.Join(fns, " and ")
}

// clock shows a time as seconds since the start of the run.
func (r *results) clock(t int64) string {
	return fmt.Sprintf("%.3fs", time.Duration(t-r.start).Seconds())
}
