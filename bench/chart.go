package main

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"strconv"
)

// A chart is a row of panels, each plotting ops/s (linear, from 0) against
// sessions (log 2) with one line per implementation.
type chart struct {
	title  string
	panels []panel
}

type panel struct {
	title  string
	series []series
}

type series struct {
	label  string
	color  color.RGBA
	marker marker
	points []point
}

type point struct {
	sessions int
	value    float64 // ops/s
}

type marker int

const (
	markCircle marker = iota
	markSquare
	markDiamond
	markTriangle
)

var (
	white     = color.RGBA{0xff, 0xff, 0xff, 0xff}
	black     = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grey      = color.RGBA{0x70, 0x70, 0x70, 0xff}
	gridGrey  = color.RGBA{0xe2, 0xe2, 0xe2, 0xff}
	frameGrey = color.RGBA{0xb0, 0xb0, 0xb0, 0xff}
)

// Implementation colours: one per implementation across all panels.
var (
	colorDsync   = color.RGBA{0x1f, 0x5f, 0xbf, 0xff} // blue
	colorZkLock  = color.RGBA{0xe0, 0x7b, 0x10, 0xff} // orange
	colorCurator = color.RGBA{0x2a, 0x9d, 0x3a, 0xff} // green
)

// Layout, in pixels. Text is the 5×9 font at scale 2 (12 px a character).
const (
	textScale   = 2
	panelW      = 620
	panelH      = 580
	headerH     = 56
	plotLeft    = 100 // y tick labels and the y axis label
	plotRight   = 24
	plotTop     = 56 // panel title
	plotBottom  = 200
	legendLineH = 28
	tickLen     = 6
)

// render draws the chart.
func (c chart) render() *image.RGBA {
	w := panelW * max(1, len(c.panels))
	img := image.NewRGBA(image.Rect(0, 0, w, headerH+panelH))
	fillRect(img, img.Bounds(), white)
	drawText(img, (w-textWidth(c.title, textScale))/2, 18, c.title, textScale, black)
	for i, p := range c.panels {
		p.render(img, image.Rect(i*panelW, headerH, (i+1)*panelW, headerH+panelH))
	}
	return img
}

func (p panel) render(img *image.RGBA, r image.Rectangle) {
	plot := image.Rect(r.Min.X+plotLeft, r.Min.Y+plotTop, r.Max.X-plotRight, r.Max.Y-plotBottom)
	drawText(img, plot.Min.X+(plot.Dx()-textWidth(p.title, textScale))/2, r.Min.Y+16, p.title, textScale, black)

	// Axes' ranges.
	minS, maxS, top := 1, 1, 0.0
	for _, s := range p.series {
		for _, pt := range s.points {
			minS, maxS = min(minS, pt.sessions), max(maxS, pt.sessions)
			top = max(top, pt.value)
		}
	}
	lo, hi := math.Log2(float64(minS)), math.Log2(float64(maxS))
	if hi-lo < 1 {
		hi = lo + 1
	}
	pad := (hi - lo) * 0.06
	lo, hi = lo-pad, hi+pad
	step, ymax := niceScale(top)
	xOf := func(sessions int) int {
		return plot.Min.X + int(math.Round((math.Log2(float64(sessions))-lo)/(hi-lo)*float64(plot.Dx())))
	}
	yOf := func(v float64) int {
		return plot.Max.Y - int(math.Round(v/ymax*float64(plot.Dy())))
	}

	// Grid, y ticks and labels.
	for v := 0.0; v <= ymax+step/2; v += step {
		y := yOf(v)
		if v > 0 {
			fillRect(img, image.Rect(plot.Min.X+1, y, plot.Max.X, y+1), gridGrey)
		}
		fillRect(img, image.Rect(plot.Min.X-tickLen, y, plot.Min.X, y+1), black)
		label := formatTick(v, step)
		drawText(img, plot.Min.X-tickLen-6-textWidth(label, textScale), y-textHeight(textScale)/2+3, label, textScale, black)
	}
	// x ticks at powers of two.
	for s := 1; s <= maxS; s *= 2 {
		if s < minS {
			continue
		}
		x := xOf(s)
		fillRect(img, image.Rect(x, plot.Min.Y+1, x+1, plot.Max.Y), gridGrey)
		fillRect(img, image.Rect(x, plot.Max.Y, x+1, plot.Max.Y+tickLen), black)
		label := strconv.Itoa(s)
		drawText(img, x-textWidth(label, textScale)/2, plot.Max.Y+tickLen+6, label, textScale, black)
	}
	// Frame and axes.
	strokeRect(img, plot, frameGrey)
	fillRect(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+2, plot.Max.Y+1), black)
	fillRect(img, image.Rect(plot.Min.X, plot.Max.Y-1, plot.Max.X+1, plot.Max.Y+1), black)
	// Axis labels.
	xl := "sessions (log scale)"
	drawText(img, plot.Min.X+(plot.Dx()-textWidth(xl, textScale))/2, plot.Max.Y+tickLen+34, xl, textScale, black)
	yl := "ops/s"
	drawTextUp(img, r.Min.X+14, plot.Min.Y+(plot.Dy()+textWidth(yl, textScale))/2, yl, textScale, black)

	// Lines, then markers on top.
	for _, s := range p.series {
		for i := 1; i < len(s.points); i++ {
			a, b := s.points[i-1], s.points[i]
			drawLine(img, xOf(a.sessions), yOf(a.value), xOf(b.sessions), yOf(b.value), 3, s.color)
		}
	}
	for _, s := range p.series {
		for _, pt := range s.points {
			drawMarker(img, xOf(pt.sessions), yOf(pt.value), s.marker, s.color)
		}
	}

	// Legend, under the x axis label.
	y := plot.Max.Y + tickLen + 76
	for _, s := range p.series {
		x := plot.Min.X
		cy := y + textHeight(textScale)/2 - 2
		drawLine(img, x, cy, x+40, cy, 3, s.color)
		drawMarker(img, x+20, cy, s.marker, s.color)
		drawText(img, x+52, y, s.label, textScale, black)
		y += legendLineH
	}
}

// niceScale returns a tick step of 1, 2, 2.5 or 5 times a power of ten and
// the axis top (a multiple of it) for data up to top, aiming at 5–7 ticks.
func niceScale(top float64) (step, ymax float64) {
	if top <= 0 {
		return 1, 5
	}
	raw := top / 6
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

// fillRect fills r (clipped to img) with c.
func fillRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r.Intersect(img.Bounds()), &image.Uniform{C: c}, image.Point{}, draw.Src)
}

// strokeRect draws r's one-pixel outline.
func strokeRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X+1, r.Min.Y+1), c)
	fillRect(img, image.Rect(r.Min.X, r.Max.Y, r.Max.X+1, r.Max.Y+1), c)
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y+1), c)
	fillRect(img, image.Rect(r.Max.X, r.Min.Y, r.Max.X+1, r.Max.Y+1), c)
}

// drawLine draws a line width pixels thick (Bresenham, with a square
// brush).
func drawLine(img *image.RGBA, x0, y0, x1, y1, width int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	h := width / 2
	e := dx + dy
	for {
		fillRect(img, image.Rect(x0-h, y0-h, x0-h+width, y0-h+width), c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

// drawMarker draws a marker about 13 pixels across centred on (x, y), with a
// white rim so that overlapping lines stay apart.
func drawMarker(img *image.RGBA, x, y int, m marker, c color.RGBA) {
	const rad = 6
	for _, layer := range []struct {
		r   int
		col color.RGBA
	}{{rad + 2, white}, {rad, c}} {
		r := layer.r
		for dy := -r; dy <= r; dy++ {
			for dx := -r; dx <= r; dx++ {
				var in bool
				switch m {
				case markCircle:
					in = dx*dx+dy*dy <= r*r
				case markSquare:
					in = abs(dx) <= r*4/5 && abs(dy) <= r*4/5
				case markDiamond:
					in = abs(dx)+abs(dy) <= r
				case markTriangle:
					// Apex up: rows from -r to r widen from 0 to r.
					in = dy >= -r && dy <= r*3/4 && abs(dx)*2 <= dy+r
				}
				if in {
					img.SetRGBA(x+dx, y+dy, layer.col)
				}
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// lighter returns c mixed half and half with white.
func lighter(c color.RGBA) color.RGBA {
	mix := func(v uint8) uint8 { return uint8((int(v) + 0xff) / 2) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), c.A}
}
