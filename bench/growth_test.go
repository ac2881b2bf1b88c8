package main

import (
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseGauges(t *testing.T) {
	g, err := parseGauges(map[string]string{"zk_watch_count": "3000", "zk_response_bytes": "123456", "zk_version": "3.8.0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (gauges{watches: 3000, respBytes: 123456}); g != want {
		t.Errorf("parseGauges = %+v; want %+v", g, want)
	}
	if _, err := parseGauges(map[string]string{"zk_watch_count": "1"}); err == nil {
		t.Error("parseGauges without zk_response_bytes succeeded; want an error")
	}
}

func TestNewGrowthConfig(t *testing.T) {
	saved := []string{*growthWaiters, *growthHolds, *growthContenders}
	t.Cleanup(func() { *growthWaiters, *growthHolds, *growthContenders = saved[0], saved[1], saved[2] })
	*growthWaiters, *growthHolds, *growthContenders = "10, 100", "", "10,500"
	for _, tc := range []struct {
		only      string
		run       bool
		chartPath string
	}{
		{"", true, *growthChartPath},
		{"growth", true, ""}, // a partial run writes the chart only if -growth-chart is given
		{"mutex, growth", true, ""},
		{"mutex", false, ""},
	} {
		gc, err := newGrowthConfig(tc.only)
		if err != nil {
			t.Fatalf("newGrowthConfig(%q): %v", tc.only, err)
		}
		if gc.run != tc.run || gc.chartPath != tc.chartPath {
			t.Errorf("newGrowthConfig(%q): run %v, chart %q; want %v, %q", tc.only, gc.run, gc.chartPath, tc.run, tc.chartPath)
		}
		if len(gc.waiters) != 2 || gc.waiters[1] != 100 || gc.holds != nil || len(gc.contenders) != 2 {
			t.Errorf("newGrowthConfig(%q): waiters %v, holds %v, contenders %v; want [10 100], none, [10 500]",
				tc.only, gc.waiters, gc.holds, gc.contenders)
		}
	}
	*growthHolds = "100,x"
	if _, err := newGrowthConfig(""); err == nil {
		t.Error("newGrowthConfig with -growth-holds 100,x succeeded; want an error")
	}
	if flag.Lookup("growth-chart") == nil {
		t.Error("-growth-chart is not registered")
	}
}

func TestMakePlanGrowth(t *testing.T) {
	plan, err := makePlan([]int{1}, []int{8}, []int{90}, "growth")
	if err != nil || len(plan) != 0 {
		t.Errorf("makePlan(only growth) = %d workloads, %v; want none, no error", len(plan), err)
	}
	plan, err = makePlan([]int{1}, []int{8}, []int{90}, "mutex,growth")
	if err != nil || len(plan) != 1 || plan[0].key != "mutex" {
		t.Errorf("makePlan(only mutex,growth) = %v, %v; want mutex", plan, err)
	}
}

func TestInParallel(t *testing.T) {
	var seen [1000]atomic.Int32
	if err := inParallel(len(seen), 7, func(i int) error { seen[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("f(%d) called %d times; want once", i, n)
		}
	}
	boom := errors.New("boom")
	if err := inParallel(10, 3, func(i int) error {
		if i == 4 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("inParallel = %v; want %v", err, boom)
	}
}

// sampleGrowth is a made-up result: requests per handoff flat, reply bytes
// growing with N.
func sampleGrowth() *growthResult {
	g := &growthResult{window: 2 * time.Second, sessionTimeout: 30 * time.Second}
	for _, n := range []int{10, 100, 1000} {
		g.queue = append(g.queue, queueCell{
			n: n, sessions: min(n, 50), handoffs: 2000, seconds: 2, p50: time.Millisecond, p99: 4 * time.Millisecond,
			reqs:      counters{packets: 12000, writes: 4000, reads: 8000},
			respBytes: int64(2000 * 60 * n), clientCPU: 500 * time.Millisecond, serverCPU: 300 * time.Millisecond,
			heap: 6500, stack: 10240, goroutines: 0, watches: 3,
		})
	}
	for _, n := range []int{100, 10000} {
		for _, track := range []bool{false, true} {
			c := holdCell{n: n, track: track, seconds: float64(n) / 4000, reqs: counters{packets: int64(2 * n)},
				clientCPU: time.Duration(n) * 100 * time.Microsecond, heap: 700}
			if track {
				c.reqs.packets, c.goroutines, c.watches, c.heap = int64(3*n), 1, 1, 1400
			}
			g.holds = append(g.holds, c)
		}
	}
	for _, n := range []int{10, 500} {
		g.grants = append(g.grants,
			grantCell{n, "dsync", min(n, 50), result{ops: 1000, seconds: 2, p50: 15 * time.Millisecond,
				reqs: counters{packets: 9000, writes: 4000, reads: 5000}, clientCPU: time.Second, serverCPU: time.Second / 2}},
			grantCell{n, "Curator", n, result{ops: 200, seconds: 2, p50: 30 * time.Millisecond,
				reqs: counters{packets: 1800, writes: 800, reads: 1000}, clientCPU: time.Second, serverCPU: time.Second / 4}})
	}
	return g
}

func TestGrowthMarkdown(t *testing.T) {
	if got := (*growthResult)(nil).markdown(); got != "" {
		t.Errorf("nil markdown = %q; want empty", got)
	}
	md := sampleGrowth().markdown()
	for _, want := range []string{
		"## Cost as the work grows",
		"| 1000 | 50 | 1000 | 6.00 | 2.00 + 4.00 | 58.6 | 250 | 150 | 1.00 | 4.00 | 6500 | 10240 | 0.00 | 3.00 |",
		"| 10000 | LockContext (tracked) | 4000 | 3.00 | 100 | 1400 | 0 | 1.00 | 1.00 |",
		"| 500 | 50 | 500 | 15.00 | 9.00 | 4.00 + 5.00 | 1000 | 500 | 500 | 100 | 30.00 | 9.00 | 4.00 + 5.00 | 5000 | 1250 | 1.00× |",
		"- Mutex requests per handoff, N = 10 → 1000: 6.00 → 6.00 (×1.00)",
		"- Mutex reply bytes per handoff (KB), N = 10 → 1000: 0.6 → 58.6 (×100.00)",
		"- LockContext heap per hold (B), N = 100 → 10000: 1400 → 1400 (×1.00)",
		"- Curator Weighted requests per grant, N = 10 → 500: 9.00 → 9.00 (×1.00)",
		"that listing holds all N names",
		"At 100 holds or fewer the acquisitions are one wave",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "suspect") {
		t.Errorf("markdown warns of suspensions none had:\n%s", md)
	}
	g := sampleGrowth()
	g.holds = g.holds[2:] // 10,000 holds only: many waves
	if md := g.markdown(); strings.Contains(md, "one wave") {
		t.Errorf("markdown calls 10,000 holds one wave:\n%s", md)
	}
	g = sampleGrowth()
	slices.Reverse(g.holds) // the order -growth-holds gave: the small N need not come first
	if md := g.markdown(); !strings.Contains(md, "At 100 holds or fewer the acquisitions are one wave") {
		t.Errorf("markdown lacks the one-wave note with 100 holds run last:\n%s", md)
	}
	g = sampleGrowth()
	g.queue[2].suspended = 3
	if md := g.markdown(); !strings.Contains(md, "With 1000 waiters, sessions were suspended or lost 3 times in the window") {
		t.Errorf("markdown lacks the suspensions of the 1000-waiter cell:\n%s", md)
	}
}

func TestGrowthPingBound(t *testing.T) {
	g := sampleGrowth()
	// The worst cell: Curator's 500 sessions, each pinging at most once in
	// 2 s (every 10 s), over 200 grants.
	if got, want := g.pingBound(), 500.0/200; math.Abs(got-want) > 1e-9 {
		t.Errorf("pingBound = %v; want %v", got, want)
	}
}

func TestGrowthSVG(t *testing.T) {
	g := sampleGrowth()
	c := g.chart()
	if len(c.rows) != 3 || len(c.rows[0]) != 4 || len(c.rows[1]) != 4 || len(c.rows[2]) != 3 {
		t.Fatalf("chart rows: %d; want 3 rows of 4, 4 and 3 panels", len(c.rows))
	}
	c.title = `a & b < c` // escaped, not markup
	svg := c.svg()

	// Well-formed, and its text is text.
	var texts []string
	polylines := 0
	d := xml.NewDecoder(strings.NewReader(svg))
	var inText bool
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText = tok.Name.Local == "text"
			if tok.Name.Local == "polyline" {
				polylines++
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"a & b < c", "Mutex: requests per handoff", "LockContext (tracked)",
		"Curator InterProcessSemaphoreV2", "10,000", "waiters (log scale)"} {
		if !strings.Contains(all, want) {
			t.Errorf("SVG text lacks %q; has:\n%s", want, all)
		}
	}
	// Two lines in each of the 11 panels, each with at least two points.
	if polylines != 22 {
		t.Errorf("SVG has %d polylines; want 22", polylines)
	}
}

func TestLogScale(t *testing.T) {
	x := logScale([]float64{10, 100, 1000}, 0, 100)
	a, b, c := x(10), x(100), x(1000)
	if !(a < b && b < c) || math.Abs((b-a)-(c-b)) > 1e-9 {
		t.Errorf("logScale: 10 → %v, 100 → %v, 1000 → %v; want equal steps, rising", a, b, c)
	}
	if one := logScale([]float64{5}, 0, 100); one(5) != 50 {
		t.Errorf("logScale of one value: %v; want the middle, 50", one(5))
	}
}

func TestGTicks(t *testing.T) {
	for _, tc := range []struct{ ymax, step, top float64 }{
		{6, 2, 6},
		{58.6, 20, 60},
		{0.9, 0.2, 1},
		{4000, 1000, 4000},
		{0, 1, 1},
	} {
		step, top := gTicks(tc.ymax)
		if math.Abs(step-tc.step) > 1e-9 || math.Abs(top-tc.top) > 1e-9 {
			t.Errorf("gTicks(%v) = %v, %v; want %v, %v", tc.ymax, step, top, tc.step, tc.top)
		}
	}
	if got := gTickLabel(0.4, 0.2); got != "0.4" {
		t.Errorf("gTickLabel(0.4, 0.2) = %q; want 0.4", got)
	}
	if got := gNumber(10000); got != "10,000" {
		t.Errorf("gNumber(10000) = %q; want 10,000", got)
	}
}
