package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A chart is a grid of small panels, a row per network profile and a panel
// per workload, each plotting ops/s (linear, from 0, its own scale) against
// sessions (log scale) with one line per implementation. It is written as
// SVG by hand: text stays text, crisp at any size.
type chart struct {
	title    string
	subtitle string
	legend   []legendEntry
	rows     []chartRow
}

type legendEntry struct {
	label  string
	style  colorName // colour and marker; ignored with text
	dashed bool
	text   bool // only a note, no line
}

type chartRow struct {
	title  string
	panels []panel
}

type panel struct {
	title  string
	xs     []int // the x axis's ticks: session counts, ascending; those of the points if empty
	series []series
}

type series struct {
	label  string // a tooltip
	style  colorName
	dashed bool // a further RWMutex mix: dashed line, hollow markers
	points []point
}

type point struct {
	sessions int
	value    float64 // ops/s
}

// Colours and markers: one per implementation across all panels.
var styles = map[colorName]struct {
	color, marker, name string
}{
	implDsync:   {"#1f5fbf", "circle", "dsync"},
	implZkLock:  {"#e07b10", "square", "go-zookeeper zk.Lock"},
	implCurator: {"#2a9d3a", "diamond", "Curator 5.4"},
}

// Layout, in SVG user units (pixels at 100 %).
const (
	chartMargin = 12
	chartHeadH  = 78 // title, subtitle, legend
	rowTitleH   = 22
	panelW      = 236
	panelH      = 168
	plotLeft    = 44 // y tick labels
	plotRight   = 14
	plotTop     = 22 // panel title
	plotBottom  = 24 // x tick labels
)

// makeChart plots ops/s against sessions: one row per profile, one panel
// per workload but for the RWMutex workloads, which share one: the first
// mix solid, the others dashed with hollow markers.
func makeChart(plan []planned, runs []profileRun) chart {
	c := chart{
		title:    "dsync vs go-zookeeper zk.Lock vs Curator 5.4",
		subtitle: "acquire/release cycles per second (ops/s) against sessions (log scale); one row per network profile",
	}
	seen := map[colorName]bool{}
	var mixes []string
	for _, p := range plan {
		for _, im := range p.impls {
			seen[im.color] = true
		}
		if p.rw {
			mixes = append(mixes, fmt.Sprintf("%d %% reads", p.readPct))
		}
	}
	for _, s := range []colorName{implDsync, implZkLock, implCurator} {
		if seen[s] {
			c.legend = append(c.legend, legendEntry{label: styles[s].name, style: s})
		}
	}
	if len(mixes) > 0 {
		note := "RWMutex: " + mixes[0]
		if len(mixes) > 1 {
			note = "RWMutex: solid " + mixes[0] + "; dashed " + strings.Join(mixes[1:], ", ")
		}
		c.legend = append(c.legend, legendEntry{label: note, text: true})
	}
	for _, run := range runs {
		row := chartRow{title: fmt.Sprintf("%s (round trip %.2f ms)", capitalize(run.title()), ms(run.rtt))}
		rwPanel := -1
		for _, p := range plan {
			i := len(row.panels)
			if p.rw && rwPanel >= 0 {
				i = rwPanel
			} else {
				title := p.title
				if p.rw {
					title, rwPanel = "RWMutex", i
				}
				row.panels = append(row.panels, panel{title: title})
			}
			for _, n := range p.sessions { // the same x axis in every row
				if !slices.Contains(row.panels[i].xs, n) {
					row.panels[i].xs = append(row.panels[i].xs, n)
				}
			}
			slices.Sort(row.panels[i].xs)
			dashed := p.rw && len(row.panels[i].series) > 0
			for _, im := range p.impls {
				s := series{label: im.legend, style: im.color, dashed: dashed}
				for _, n := range p.sessions {
					if r, ok := find(run.cells, p.key, n, im.name); ok {
						s.points = append(s.points, point{n, r.opsPerSec()})
					}
				}
				row.panels[i].series = append(row.panels[i].series, s)
			}
		}
		c.rows = append(c.rows, row)
	}
	return c
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// size returns the chart's width and height.
func (c chart) size() (w, h int) {
	cols := 1
	for _, r := range c.rows {
		cols = max(cols, len(r.panels))
	}
	return 2*chartMargin + cols*panelW, chartHeadH + len(c.rows)*(rowTitleH+panelH) + chartMargin
}

// svg returns the chart as an SVG document.
func (c chart) svg() string {
	w, h := c.size()
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" `+
		`font-family="Helvetica, Arial, sans-serif" font-size="11" fill="#222">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n", w/2, svgEscape(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="40" text-anchor="middle" fill="#555">%s</text>`+"\n", w/2, svgEscape(c.subtitle))
	c.writeLegend(&b, w/2, 62)
	y := chartHeadH
	for _, r := range c.rows {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", chartMargin, y+15, svgEscape(r.title))
		for i, p := range r.panels {
			p.write(&b, chartMargin+i*panelW, y+rowTitleH)
		}
		y += rowTitleH + panelH
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// writeLegend writes the legend on one line centred on cx, baseline y.
func (c chart) writeLegend(b *strings.Builder, cx, y int) {
	const swatch, gap = 34, 22
	widths := make([]float64, len(c.legend))
	total := 0.0
	for i, e := range c.legend {
		widths[i] = textWidth(e.label, 11)
		if !e.text {
			widths[i] += swatch
		}
		total += widths[i]
	}
	total += gap * float64(max(0, len(c.legend)-1))
	x := float64(cx) - total/2
	for i, e := range c.legend {
		tx := x
		if !e.text {
			st := styles[e.style]
			fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n",
				x, y-4, x+26, y-4, st.color, dash(e.dashed))
			writeMarker(b, x+13, float64(y-4), e.style, e.dashed)
			tx += swatch
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`+"\n", tx, y, svgEscape(e.label))
		x += widths[i] + gap
	}
}

// write writes the panel with its top left corner at (x0, y0).
func (p panel) write(b *strings.Builder, x0, y0 int) {
	left, top := float64(x0+plotLeft), float64(y0+plotTop)
	right, bottom := float64(x0+panelW-plotRight), float64(y0+panelH-plotBottom)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="12" font-weight="bold">%s</text>`+"\n",
		(left+right)/2, y0+14, svgEscape(p.title))

	// Axes' ranges: x over the panel's session counts, y from 0.
	xs := slices.Clone(p.xs)
	top0 := 0.0
	for _, s := range p.series {
		for _, pt := range s.points {
			if !slices.Contains(xs, pt.sessions) {
				xs = append(xs, pt.sessions)
			}
			top0 = max(top0, pt.value)
		}
	}
	slices.Sort(xs)
	lo, hi := 0.0, 1.0
	if len(xs) > 0 {
		lo, hi = math.Log2(float64(xs[0])), math.Log2(float64(xs[len(xs)-1]))
	}
	if hi-lo < 1 {
		lo, hi = lo-0.5, hi+0.5
	}
	pad := (hi - lo) * 0.08
	lo, hi = lo-pad, hi+pad
	step, ymax := niceScale(top0)
	xOf := func(n int) float64 { return left + (math.Log2(float64(n))-lo)/(hi-lo)*(right-left) }
	yOf := func(v float64) float64 { return bottom - v/ymax*(bottom-top) }

	// Grid and y ticks, x ticks at the session counts.
	for v := 0.0; v <= ymax+step/2; v += step {
		y := yOf(v)
		if v > 0 {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y, right, y)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y+4, formatTick(v, step))
	}
	for _, n := range xs {
		x := xOf(n)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222"/>`+"\n", x, bottom, x, bottom+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, bottom+15, n)
	}
	fmt.Fprintf(b, `<path d="M%.1f,%.1f V%.1f H%.1f" fill="none" stroke="#222"/>`+"\n", left, top, bottom, right)

	// Lines, then markers on top.
	for _, s := range p.series {
		if len(s.points) == 0 {
			continue
		}
		var pts []string
		for _, pt := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(pt.sessions), yOf(pt.value)))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></polyline>`+"\n",
			strings.Join(pts, " "), styles[s.style].color, dash(s.dashed), svgEscape(s.label))
	}
	for _, s := range p.series {
		for _, pt := range s.points {
			writeMarker(b, xOf(pt.sessions), yOf(pt.value), s.style, s.dashed)
		}
	}
}

// writeMarker writes style's marker centred on (x, y): filled, or hollow
// for a dashed series, with a white rim so that crossing lines stay apart.
func writeMarker(b *strings.Builder, x, y float64, style colorName, hollow bool) {
	st := styles[style]
	fill, stroke := st.color, "#fff"
	if hollow {
		fill, stroke = "#fff", st.color
	}
	attrs := fmt.Sprintf(`fill="%s" stroke="%s" stroke-width="1.5"`, fill, stroke)
	switch st.marker {
	case "square":
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="8" height="8" %s/>`+"\n", x-4, y-4, attrs)
	case "diamond":
		fmt.Fprintf(b, `<path d="M%.1f,%.1f l5,5 l-5,5 l-5,-5 z" %s/>`+"\n", x, y-5, attrs)
	default:
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4.5" %s/>`+"\n", x, y, attrs)
	}
}

func dash(dashed bool) string {
	if dashed {
		return ` stroke-dasharray="5 3"`
	}
	return ""
}

// svgEscape escapes s for SVG text and attributes.
func svgEscape(s string) string { return html.EscapeString(s) }

// textWidth estimates the width of s in a sans-serif font of size px: about
// 0.55 em a character.
func textWidth(s string, px float64) float64 {
	return float64(len([]rune(s))) * px * 0.55
}

// niceScale returns a tick step of 1, 2, 2.5 or 5 times a power of ten and
// the axis top (a multiple of it) for data up to top, aiming at 4–6 ticks.
func niceScale(top float64) (step, ymax float64) {
	if top <= 0 {
		return 1, 5
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	ymax = math.Ceil(top*1.04/step) * step
	return step, ymax
}

// formatTick formats an axis value: whole numbers plainly, 12000 as 12k.
func formatTick(v, step float64) string {
	switch {
	case v >= 10000 && math.Mod(v, 1000) == 0:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case step >= 1:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
