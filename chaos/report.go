package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The markers of the generated table in README.md.
const (
	beginMarker = "<!-- chaos:begin -->"
	endMarker   = "<!-- chaos:end -->"
)

// table returns the results as a Markdown table.
func (r *results) table(cfg config) string {
	var b strings.Builder
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	b.WriteString("| check | result |\n|---|---|\n")
	row("run", "seed %d, %s, %d worker processes (Mutex %d, Weighted of 2 %d, SemaphoreMutex %d, Count %d, `dsync lock` %d, Election %d), 3 ZooKeeper servers granting sessions of at most %v to clients asking %v or %v",
		r.seed, time.Duration(r.end-r.start).Round(time.Second), r.workers,
		cfg.workers[kindMutex], cfg.workers[kindWeighted], cfg.workers[kindSemMutex], cfg.workers[kindValue], cfg.workers[kindCmdLock],
		cfg.workers[kindElection], serverMaxSession, askedTimeouts[0], askedTimeouts[1])
	total := 0
	for _, n := range r.holds {
		total += n
	}
	row("holds", "%d (Mutex %d, Weighted leases %d, SemaphoreMutex %d, `dsync lock` %d, Election %d)", total,
		r.holds[kindMutex], r.holds[kindWeighted], r.holds[kindSemMutex], r.holds[kindCmdLock], r.holds[kindElection])
	nf := 0
	for _, n := range r.faults {
		nf += n
	}
	row("faults", "%d", nf)
	for _, k := range faultKinds {
		row("&nbsp;&nbsp;"+k, "%d", r.faults[k])
	}
	lost := map[*hold]bool{}
	for _, in := range r.noticed {
		for _, h := range in.holds {
			if h.Lost != 0 {
				lost[h] = true
			}
		}
	}
	row("overlaps noticed / unnoticed", "%d (%d lost holds involved) / **%d**", len(r.noticed), len(lost), len(r.unnoticed))
	row("fencing-token regressions", "**%d**", len(r.regressions)+len(r.noToken))
	row("orphaned nodes", "**%d**", len(r.orphans))
	rec := "—"
	if r.recoveryWorst > 0 {
		rec = fmt.Sprintf("%s (after %s)", secs(r.recoveryWorst), r.recoveryFault)
	}
	row("worst recovery (bound "+secs(recoveryBound)+")", "%s; **%d** late", rec, len(r.late))
	row("worst deadline overrun (bound 100 ms)", "%s (%s less the time its process did not run); **%d** of %d calls over (%d more only while their process did not run)",
		ms(r.worstOverrun), ms(r.worstLag), len(r.overruns), r.calls, r.stalled)
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		ds := r.handover[sig]
		if len(ds) == 0 {
			row(sig+" of a holder → next acquire", "no sample")
			continue
		}
		slices.Sort(ds)
		row(sig+" of a holder → next acquire", "median %s, max %s (%d)", ms(ds[len(ds)/2]), ms(ds[len(ds)-1]), len(ds))
	}
	if cfg.workers[kindCmdLock] > 0 {
		row("`dsync lock`: dsync sent SIGTERM / SIGKILL (its worker goes on)", "%d / %d; %d SIGKILLs left processes of CMD's group past dsync's guard (it SIGKILLs the group), killed by the worker within %s",
			r.dsyncSignals["SIGTERM"], r.dsyncSignals["SIGKILL"], r.survived, ms(r.outlived))
	}
	verdict := "linearizable"
	switch {
	case r.value.result == porcupine.Illegal:
		verdict = "**not linearizable**"
	case !r.value.ok():
		verdict = "**undecided** (check timed out)"
	}
	row("Count operations checked (porcupine)", "%d (%d with unknown outcome, %d of them settled by later reads; %d failed): %s",
		r.value.ops, r.value.unknown, r.value.settled, r.value.failed, verdict)
	row("other problems (crashes, data races in dsync, …)", "**%d**", len(r.problems))
	if len(r.depRaces) > 0 {
		row("data races inside go-zookeeper (not counted)", "%d", len(r.depRaces))
	}
	return b.String()
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// details returns what failed, with the records of the operations
// involved, and examples of noticed overlaps.
func (r *results) details() string {
	var b strings.Builder
	section := func(title string, n int) bool {
		if n == 0 {
			return false
		}
		fmt.Fprintf(&b, "\n### %s (%d)\n\n", title, n)
		return true
	}
	js := func(v any) string {
		out, _ := json.Marshal(v)
		return string(out)
	}
	incidentList := func(ins []incident, most int) {
		for i, in := range ins {
			if i == most {
				fmt.Fprintf(&b, "… and %d more\n", len(ins)-most)
				break
			}
			fmt.Fprintf(&b, "- %s from %s to %s:\n\n", in.path, r.clock(in.from), r.clock(in.to))
			for _, h := range in.holds {
				fmt.Fprintf(&b, "      %s\n", js(h.record))
			}
			b.WriteString("\n")
		}
	}
	if section("Unnoticed overlaps: holds whose safe intervals overlap", len(r.unnoticed)) {
		incidentList(r.unnoticed, 20)
	}
	if section("Noticed overlaps (examples): the earlier holder had been told of its loss", len(r.noticed)) {
		incidentList(r.noticed, 3)
	}
	if section("Fencing-token regressions", len(r.regressions)+len(r.noToken)) {
		for _, g := range r.regressions {
			fmt.Fprintf(&b, "- entered later with a token not above the earlier one:\n\n      %s\n      %s\n\n", js(g.before.record), js(g.after.record))
		}
		for _, h := range r.noToken {
			fmt.Fprintf(&b, "- no token: %s\n", js(h.record))
		}
	}
	if section("Orphaned nodes", len(r.orphans)) {
		for _, o := range r.orphans {
			fmt.Fprintf(&b, "- %s\n", o.Detail)
		}
	}
	if section("Late recoveries", len(r.late)) {
		for _, l := range r.late {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if section("Deadline overruns over 100 ms", len(r.overruns)) {
		for i, c := range r.overruns {
			if i == 20 {
				fmt.Fprintf(&b, "… and %d more\n", len(r.overruns)-20)
				break
			}
			fmt.Fprintf(&b, "- %s past its deadline: %s\n", ms(time.Duration(c.Return-c.Deadline)), js(c))
		}
	}
	if !r.value.ok() {
		title := "Count history not linearizable"
		if r.value.result != porcupine.Illegal {
			title = "Count history undecided (the check timed out)"
		}
		fmt.Fprintf(&b, "\n### %s\n\n%d operations, checked in %v.", title, r.value.ops, r.value.took.Round(time.Millisecond))
		if r.value.visual != "" {
			fmt.Fprintf(&b, " Porcupine's visualization: %s", r.value.visual)
		}
		b.WriteString("\n")
		for _, w := range r.value.witnesses {
			fmt.Fprintf(&b, "\n- %s\n", w)
		}
	}
	if section("Other problems", len(r.problems)) {
		for _, p := range r.problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	if len(r.depRaces) > 0 {
		fmt.Fprintf(&b, "\n### Data races inside go-zookeeper (%d; not counted)\n\n", len(r.depRaces))
		for _, d := range r.depRaces {
			fmt.Fprintf(&b, "- %s\n", d)
		}
	}
	return b.String()
}

// markdown is the whole report: the table, then the details of failures.
func (r *results) markdown(cfg config) string {
	var b strings.Builder
	b.WriteString("# dsync chaos run\n\n")
	fmt.Fprintf(&b, "Made by `go run ./chaos -holds %d -faults %d` (see chaos/main.go; `make chaos` runs it so); rerun with the same flags and `-seed %d`. Times in records are Unix nanoseconds; the run started at %d.\n\n", cfg.holds, cfg.perKind, r.seed, r.start)
	b.WriteString(r.table(cfg))
	if d := r.details(); d != "" {
		b.WriteString("\n## Details\n")
		b.WriteString(d)
	}
	return b.String()
}

// splice replaces what lies between the chaos markers of the file at path
// with table.
func splice(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(beginMarker)), bytes.Index(b, []byte(endMarker))
	if i < 0 || j < i {
		return errors.New(path + ": no " + beginMarker + " … " + endMarker + " markers")
	}
	var out bytes.Buffer
	out.Write(b[:i+len(beginMarker)])
	out.WriteString("\n" + table)
	out.Write(b[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
