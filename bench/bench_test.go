package main

import (
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestGlyphShapes(t *testing.T) {
	for r := rune(' '); r <= '~'; r++ {
		g, ok := glyphs[r]
		if !ok {
			t.Errorf("glyph %q missing", r)
			continue
		}
		rows := strings.Fields(g)
		if len(rows) != glyphH {
			t.Errorf("glyph %q has %d rows; want %d", r, len(rows), glyphH)
		}
		for i, row := range rows {
			if len(row) != glyphW || strings.Trim(row, "#.") != "" {
				t.Errorf("glyph %q row %d = %q; want %d of '#' and '.'", r, i, row, glyphW)
			}
		}
	}
	if len(glyphs) != '~'-' '+1 {
		t.Errorf("font has %d glyphs; want the %d printable ASCII characters", len(glyphs), '~'-' '+1)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %v; want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil, 0.5) = %v; want 0", got)
	}
}

func TestParseJavaReport(t *testing.T) {
	r, err := parseJavaReport("ops=1234 seconds=5.002 p50_us=870 p99_us=4100")
	if err != nil {
		t.Fatal(err)
	}
	if r.ops != 1234 || r.seconds != 5.002 || r.p50 != 870*time.Microsecond || r.p99 != 4100*time.Microsecond {
		t.Errorf("parseJavaReport = %+v", r)
	}
	if _, err := parseJavaReport("ops=x seconds=1"); err == nil {
		t.Error("parseJavaReport(ops=x) succeeded; want an error")
	}
	// bench rw's line: the plain fields, then reads' and writes'.
	r, err = parseJavaReport("ops=100 seconds=2.000 p50_us=500 p99_us=9000 read_ops=90 read_p50_us=400 read_p99_us=800 " +
		"write_ops=10 write_p50_us=3000 write_p99_us=9500")
	if err != nil {
		t.Fatal(err)
	}
	want := result{ops: 100, seconds: 2, p50: 500 * time.Microsecond, p99: 9000 * time.Microsecond,
		read:  side{90, 400 * time.Microsecond, 800 * time.Microsecond},
		write: side{10, 3000 * time.Microsecond, 9500 * time.Microsecond}}
	if r != want {
		t.Errorf("parseJavaReport(rw) = %+v; want %+v", r, want)
	}
}

func TestMakePlan(t *testing.T) {
	keys := func(plan []planned) string {
		var ks []string
		for _, p := range plan {
			ks = append(ks, fmt.Sprint(p.key, p.sessions))
		}
		return strings.Join(ks, " ")
	}
	for _, tc := range []struct {
		only, want string
	}{
		{"", "mutex[1 8] sem[1 8] semmutex[1 8] rw90[8 32] rw50[8 32]"},
		{"rw", "rw90[8 32] rw50[8 32]"},
		{"mutex,rw50", "mutex[1 8] rw50[8 32]"},
	} {
		plan, err := makePlan([]int{1, 8}, []int{8, 32}, []int{90, 50}, tc.only)
		if err != nil {
			t.Errorf("makePlan(only %q): %v", tc.only, err)
			continue
		}
		if got := keys(plan); got != tc.want {
			t.Errorf("makePlan(only %q) = %s; want %s", tc.only, got, tc.want)
		}
	}
	if _, err := makePlan([]int{1}, []int{8}, []int{90}, "rw70"); err == nil {
		t.Error("makePlan(only rw70) without that mix succeeded; want an error")
	}
}

func TestPickKind(t *testing.T) {
	reads := 0
	for roll := range 100 {
		if pickKind(roll, 90) == kindRead {
			reads++
		}
	}
	if reads != 90 {
		t.Errorf("pickKind reads on %d of the 100 rolls at 90 %%; want 90", reads)
	}
	if pickKind(0, 0) != kindWrite || pickKind(99, 100) != kindRead {
		t.Error("pickKind: 0 % must always write, 100 % always read")
	}
}

func TestSplice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	old := "intro\n" + beginMarker + "\nold table\n" + endMarker + "\nrest\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(path, "new table\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker + "\nnew table\n" + endMarker + "\nrest\n"; string(got) != want {
		t.Errorf("spliced file = %q; want %q", got, want)
	}
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(path, "x"); err == nil {
		t.Error("splice into a file without markers succeeded; want an error")
	}
}

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct{ top, step, ymax float64 }{
		{1403, 250, 1500},
		{96, 20, 100},
		{0, 1, 5},
	} {
		step, ymax := niceScale(tc.top)
		if step != tc.step || ymax != tc.ymax {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", tc.top, step, ymax, tc.step, tc.ymax)
		}
	}
}

func TestReportAndChart(t *testing.T) {
	plan, err := makePlan([]int{1, 8, 32}, []int{8, 32}, []int{90, 50}, "")
	if err != nil {
		t.Fatal(err)
	}
	var results []cell
	for _, w := range plan {
		for _, n := range w.sessions {
			for i, im := range w.impls {
				r := result{
					ops: int64(1000 * (i + 1)), seconds: 5, p50: time.Millisecond, p99: 3 * time.Millisecond,
					reqs: counters{packets: int64(4000 * (i + 1)), writes: int64(2000 * (i + 1)), reads: int64(2000 * (i + 1))},
				}
				if w.rw { // dsync's reads double from 8 to 32 sessions
					r.read = side{int64(900 * (i + 1) * n / 8), 2 * time.Millisecond, 4 * time.Millisecond}
					r.write = side{int64(100 * (i + 1)), 5 * time.Millisecond, 9 * time.Millisecond}
					if i == 0 && n == 32 {
						r.read.ops = 1800
					}
				}
				results = append(results, cell{w.key, n, im.name, r})
			}
		}
	}
	info := runInfo{sessionTimeout: 30 * time.Second, cpus: 2}
	md := report(info, plan, results)
	for _, want := range []string{
		"| Mutex | 8 | 200 | 1.00 | 3.00 | 4.00 | 400 | 1.00 | 3.00 | 4.00 | 600 | 1.00 | 3.00 | 4.00 | 0.50× | 0.33× |",
		"| Weighted (max 3) | 32 | 200 | 1.00 | 3.00 | 4.00 | — | — | — | — | 400 | 1.00 | 3.00 | 4.00 | — | 0.50× |",
		"| SemaphoreMutex | 1 | 2.00 + 2.00 | — | 2.00 + 2.00 |",
		"| RWMutex, 90 % reads | 32 | 200 | 1.00 | 3.00 | 4.00 | — | — | — | — | 400 | 1.00 | 3.00 | 4.00 | — | 0.50× |",
		"| 90 % reads | 8 | reads | 180 | 2.00 | 4.00 | 360 | 2.00 | 4.00 | 0.50× |",
		"| 50 % reads | 32 | writes | 20 | 5.00 | 9.00 | 40 | 5.00 | 9.00 | 0.50× |",
		"Reads per second at 90 % reads, 8 → 32 sessions: dsync 180 → 360 (×2.00); Curator 360 → 1440 (×4.00).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	readme := readmeTables(info, plan, results)
	if !strings.Contains(readme, "| 90 % reads | 8 | reads |") || strings.Contains(readme, "## ") {
		t.Errorf("README tables: want the tables without the report's sections:\n%s", readme)
	}
	c := makeChart(plan, results)
	if len(c.panels) != 4 || len(c.panels[3].series) != 4 {
		t.Fatalf("chart has %d panels; want 4, the last with the 4 RWMutex series", len(c.panels))
	}
	img := c.render()
	if got := img.Bounds(); got != image.Rect(0, 0, 4*panelW, headerH+panelH) {
		t.Errorf("chart bounds = %v", got)
	}
	// Something was drawn in each panel's plot area in the dsync colour.
	for p := range 4 {
		found := false
		for y := headerH + plotTop; y < headerH+panelH-plotBottom && !found; y++ {
			for x := p*panelW + plotLeft; x < (p+1)*panelW-plotRight; x++ {
				if img.RGBAAt(x, y) == colorDsync {
					found = true
					break
				}
			}
		}
		if !found {
			t.Errorf("panel %d: no dsync line", p)
		}
	}
}

func TestMedian(t *testing.T) {
	r := func(ops int64) result { return result{ops: ops, seconds: 1} }
	for _, tc := range []struct {
		in   []int64
		want int64
	}{
		{[]int64{5}, 5},
		{[]int64{3, 1, 2}, 2},
		{[]int64{4, 1}, 1},
		{[]int64{9, 7, 8, 1, 2}, 7},
	} {
		var rs []result
		for _, o := range tc.in {
			rs = append(rs, r(o))
		}
		if got := median(rs); got.ops != tc.want {
			t.Errorf("median(%v) = %d ops; want %d", tc.in, got.ops, tc.want)
		}
	}
}
