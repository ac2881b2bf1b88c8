package main

import (
	"image"
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
	var results []cell
	for _, w := range workloads {
		for _, n := range []int{1, 8, 32} {
			for i, im := range w.impls {
				results = append(results, cell{w.key, n, im.name, result{
					ops: int64(1000 * (i + 1)), seconds: 5, p50: time.Millisecond, p99: 3 * time.Millisecond,
					reqs: counters{packets: int64(4000 * (i + 1)), writes: int64(2000 * (i + 1)), reads: int64(2000 * (i + 1))},
				}})
			}
		}
	}
	md := report(runInfo{sessionTimeout: 30 * time.Second}, []int{1, 8, 32}, results)
	for _, want := range []string{
		"| Mutex | 8 | 200 | 1.00 | 3.00 | 4.00 | 400 | 1.00 | 3.00 | 4.00 | 600 | 1.00 | 3.00 | 4.00 | 0.50× | 0.33× |",
		"| Weighted (max 3) | 32 | 200 | 1.00 | 3.00 | 4.00 | — | — | — | — | 400 | 1.00 | 3.00 | 4.00 | — | 0.50× |",
		"| SemaphoreMutex | 1 | 2.00 + 2.00 | — | 2.00 + 2.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	img := makeChart([]int{1, 8, 32}, results).render()
	if got := img.Bounds(); got != image.Rect(0, 0, 3*panelW, headerH+panelH) {
		t.Errorf("chart bounds = %v", got)
	}
	// Something was drawn in each panel's plot area in the dsync colour.
	for p := range 3 {
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
