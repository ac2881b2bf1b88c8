package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

func TestNewFailoverConfig(t *testing.T) {
	saved := []int{*failoverReps, *failoverKillReps}
	savedDelays := *failoverDelays
	t.Cleanup(func() { *failoverReps, *failoverKillReps, *failoverDelays = saved[0], saved[1], savedDelays })
	loop, one, five := profile{0}, profile{time.Millisecond}, profile{5 * time.Millisecond}
	for _, tc := range []struct {
		only, delays string
		in           []profile // profiles it runs in, of loopback, 1 ms, 5 ms
	}{
		{"", "", []profile{loop, one, five}},
		{"failover", "", []profile{loop, one, five}},
		{"mutex, failover", "0,1ms", []profile{loop, one}},
		{"mutex", "", nil},
		{"growth", "0", nil},
	} {
		*failoverDelays = tc.delays
		fc, err := newFailoverConfig(tc.only)
		if err != nil {
			t.Fatalf("newFailoverConfig(%q), -failover-delays %q: %v", tc.only, tc.delays, err)
		}
		var in []profile
		for _, p := range []profile{loop, one, five} {
			if fc.runsIn(p) {
				in = append(in, p)
			}
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("newFailoverConfig(%q), -failover-delays %q runs in %v; want %v", tc.only, tc.delays, in, tc.in)
		}
	}
	*failoverDelays = "1ms,x"
	if _, err := newFailoverConfig(""); err == nil {
		t.Error("newFailoverConfig with -failover-delays 1ms,x succeeded; want an error")
	}
	*failoverDelays, *failoverKillReps = "", 0
	if _, err := newFailoverConfig(""); err == nil {
		t.Error("newFailoverConfig with -failover-kill-reps 0 succeeded; want an error")
	}
}

func TestRepsOf(t *testing.T) {
	fc := failoverConfig{run: true, reps: 5, killReps: 3}
	for _, tc := range []struct {
		m    failMode
		p    profile
		want int
	}{
		{failResign, profile{0}, 5},
		{failTerm, profile{0}, 5},
		{failKill, profile{0}, 3},
		{failResign, profile{time.Millisecond}, 3},
		{failKill, profile{5 * time.Millisecond}, 2},
	} {
		if got := fc.repsOf(tc.m, tc.p); got != tc.want {
			t.Errorf("repsOf(%v, %s) = %d; want %d", tc.m, tc.p.title(), got, tc.want)
		}
	}
	fc.reps, fc.killReps = 1, 1
	if got := fc.repsOf(failKill, profile{time.Millisecond}); got != 1 {
		t.Errorf("repsOf(SIGKILL, 1 ms) of 1 = %d; want 1 (never none)", got)
	}
}

func TestFailoverMakePlan(t *testing.T) {
	plan, err := makePlan([]int{1}, []int{8}, []int{90}, "failover")
	if err != nil || len(plan) != 0 {
		t.Errorf("makePlan(only failover) = %d workloads, %v; want none, no error", len(plan), err)
	}
	plan, err = makePlan([]int{1}, []int{8}, []int{90}, "failover,sem")
	if err != nil || len(plan) != 1 || plan[0].key != "sem" {
		t.Errorf("makePlan(only failover,sem) = %v, %v; want sem", plan, err)
	}
}

func TestParseWatches(t *testing.T) {
	// wchp of ZooKeeper 3.8: data watches, then child watches.
	out := "/e/_c_a-latch-0000000001\n\t0x1000a2b3c4d0001\n\t0x1000a2b3c4d0002\n" +
		"/e\n\t0x1000a2b3c4d0003\n" +
		"/e/_c_a-latch-0000000001\n\t0x1000a2b3c4d0004\n"
	got := parseWatches(out)
	want := map[string][]int64{
		"/e/_c_a-latch-0000000001": {0x1000a2b3c4d0001, 0x1000a2b3c4d0002, 0x1000a2b3c4d0004},
		"/e":                       {0x1000a2b3c4d0003},
	}
	if len(got) != len(want) {
		t.Fatalf("parseWatches = %v; want %v", got, want)
	}
	for p, ids := range want {
		if !slices.Equal(got[p], ids) {
			t.Errorf("parseWatches[%s] = %x; want %x", p, got[p], ids)
		}
	}
	if got := parseWatches(""); len(got) != 0 {
		t.Errorf("parseWatches(\"\") = %v; want none", got)
	}
}

func TestLatchOrder(t *testing.T) {
	in := []string{
		"_c_bbbb-latch-0000000012",
		"_c_aaaa-latch-0000000003",
		"_c_cccc-latch-0000000010",
	}
	want := []string{"_c_aaaa-latch-0000000003", "_c_cccc-latch-0000000010", "_c_bbbb-latch-0000000012"}
	if got := latchOrder(in); !slices.Equal(got, want) {
		t.Errorf("latchOrder(%q) = %q; want %q", in, got, want)
	}
	if in[0] != "_c_bbbb-latch-0000000012" {
		t.Error("latchOrder changed its argument")
	}
}

func TestFailoverStats(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range v {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	for _, tc := range []struct {
		times     []time.Duration
		med, most time.Duration
	}{
		{nil, 0, 0},
		{ms(7), 7 * time.Millisecond, 7 * time.Millisecond},
		{ms(9, 1, 5), 5 * time.Millisecond, 9 * time.Millisecond},
		{ms(4, 2, 8, 6), 4 * time.Millisecond, 8 * time.Millisecond}, // the lower middle one
	} {
		c := failoverCell{times: tc.times}
		med, most := c.stats()
		if med != tc.med || most != tc.most {
			t.Errorf("stats(%v) = %v, %v; want %v, %v", tc.times, med, most, tc.med, tc.most)
		}
	}
}

func TestFmtMS(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{1234 * time.Microsecond, "1.23"},
		{12345 * time.Microsecond, "12.3"},
		{4175400 * time.Microsecond, "4175"},
	} {
		if got := fmtMS(tc.d); got != tc.want {
			t.Errorf("fmtMS(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

// fakeFailover returns made-up failover cells: dsync 2 ms, Curator 10 ms
// (SIGTERM: no Curator cell), SIGKILL 4 s for both.
func fakeFailover() []profileRun {
	ms := func(v ...float64) []time.Duration {
		var ds []time.Duration
		for _, x := range v {
			ds = append(ds, time.Duration(x*float64(time.Millisecond)))
		}
		return ds
	}
	return []profileRun{
		{profile: profile{0}, rtt: 500 * time.Microsecond, failover: []failoverCell{
			{failResign, "dsync", ms(2, 1.5, 3)},
			{failResign, "Curator", ms(10, 11, 12)},
			{failTerm, "dsync", ms(2.5)},
			{failKill, "dsync", ms(4100, 3900)},
			{failKill, "Curator", ms(3800, 4200)},
		}},
		{profile: profile{time.Millisecond}, rtt: 2500 * time.Microsecond}, // no failover there
	}
}

func TestFailoverMarkdown(t *testing.T) {
	info := runInfo{date: "2026-01-02 03:04 UTC", cpus: 2, failoverTimeout: 4 * time.Second}
	runs := fakeFailover()
	md := failoverMarkdown(info, runs)
	readme := readmeFailover(info, runs)
	for _, want := range []string{
		"| loopback | 0.50 | Resign | 3 | 2.00 | 3.00 | 11.0 | 12.0 | 5.50× |",
		"| loopback | 0.50 | SIGTERM | 1 | 2.50 | 2.50 | — | — | — |",
		"| loopback | 0.50 | SIGKILL | 2 | 3900 | 4100 | 3800 | 4200 | 0.97× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("failover section lacks %q:\n%s", want, md)
		}
		if !strings.Contains(readme, want) {
			t.Errorf("README's failover block lacks %q:\n%s", want, readme)
		}
	}
	for _, want := range []string{"## Failover", "session timeout 4s", "between two thirds of the timeout"} {
		if !strings.Contains(strings.ReplaceAll(md, "Session timeout", "session timeout"), want) {
			t.Errorf("failover section lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "1 ms each way") {
		t.Errorf("failover section has a row of a profile it did not run in:\n%s", md)
	}
	if !strings.Contains(readme, "`make bench` of 2026-01-02 03:04 UTC (2 CPUs), session timeout 4s.") {
		t.Errorf("README's failover block lacks its heading line:\n%s", readme)
	}
	none := []profileRun{{profile: profile{0}}}
	if got := failoverMarkdown(info, none) + readmeFailover(info, none); got != "" {
		t.Errorf("failover texts without cells = %q; want none", got)
	}
}

// TestReportFailoverOnly: a run of the failover section alone reports it
// alone, without the locks' empty tables or their method.
func TestReportFailoverOnly(t *testing.T) {
	info := runInfo{sessionTimeout: 30 * time.Second, cpus: 2, failoverTimeout: 4 * time.Second}
	md := report(info, nil, fakeFailover())
	if !strings.Contains(md, "## Failover") {
		t.Errorf("report lacks the failover section:\n%s", md)
	}
	for _, unwanted := range []string{"### Throughput", "## Loopback", "## How it was measured", "back-to-back"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("failover-only report has %q:\n%s", unwanted, md)
		}
	}
	// A full report has both.
	plan, err := makePlan([]int{1}, []int{8}, []int{90}, "")
	if err != nil {
		t.Fatal(err)
	}
	runs := fakeRuns(plan)
	runs[0].failover = fakeFailover()[0].failover
	md = report(info, plan, runs)
	if !strings.Contains(md, "## Failover") || !strings.Contains(md, "## How it was measured") {
		t.Errorf("full report lacks the failover section or the method:\n%s", md)
	}
}

// TestLeaderProcess runs dsync's failovers as the bench does, against a
// real ZooKeeper: the leader in a process of its own (this test binary:
// see TestMain), the next one in line here, once per way the leader goes.
func TestLeaderProcess(t *testing.T) {
	srv := zktest.Start(t)
	const timeout = time.Second // short: a killed leader's session expires within it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	ws, err := zkconn.Dial(ctx, []string{srv.Addr()}, zkconn.WithSessionTimeout(timeout),
		zkconn.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	d := &dsyncFailover{srv: srv, obs: obs, addr: srv.Addr(), path: "/failover-test", waiter: ws, timeout: timeout}
	for _, m := range failModes {
		took, err := d.once(ctx, m)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if took <= 0 {
			t.Errorf("%v: failover took %v; want a positive time", m, took)
		}
		// The next leader resigned, and the old one left: no one is in line.
		// The path, a container, may be gone: ZooKeeper reaps it once empty.
		if kids, _, err := obs.Children(d.path); err != nil && !errors.Is(err, zk.ErrNoNode) || len(kids) != 0 {
			t.Fatalf("%v: children of %s after the failover: %q, %v; want none", m, d.path, kids, err)
		}
	}
}
