package admin

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Chart is one chart of the dashboard, drawn on the server as inline SVG so
// the pages keep their policy of no script: a title and a description a
// screen reader reads, labels along the x axis, and one or more series.
type Chart struct {
	ID    string // unique on its page; names the title and description
	Title string
	// Desc says what the chart shows, for those who can't see it.
	Desc   string
	Unit   string   // after each value: "ms", "$", "" for a count
	Labels []string // the x axis, one per point
	Series []Series
	// Lines draws each series as a line; otherwise the series are
	// stacked bars.
	Lines bool
}

// Series is one named row of values, one per label.
type Series struct {
	Name   string
	Values []float64
}

// The drawing's size, in its own units (it scales to the page's width).
const (
	chartWidth   = 640
	chartHeight  = 220
	chartLeft    = 56 // room for the y axis' numbers
	chartRight   = 8
	chartTop     = 10
	chartBottom  = 36 // room for the x axis' labels
	legendHeight = 18
)

// palette colours the series in order, chosen to be told apart and to
// stand out from white with enough contrast.
var palette = []string{"#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d", "#4b5563"}

// colour is the i-th series' colour; past the palette the last one stays,
// and the legend tells them apart by name.
func colour(i int) string { return palette[min(i, len(palette)-1)] }

// Empty says whether the chart has no value to draw.
func (c Chart) Empty() bool {
	for _, s := range c.Series {
		for _, v := range s.Values {
			if v != 0 && !math.IsNaN(v) {
				return false
			}
		}
	}
	return true
}

// SVG draws the chart. Every text in it (title, labels, series names) is
// escaped; with no data it says so in words, the axes still drawn.
func (c Chart) SVG() template.HTML {
	var b strings.Builder
	id := html.EscapeString(c.ID)
	legendRows := 0
	if len(c.Series) > 1 {
		legendRows = 1 + (len(c.Series)-1)/4
	}
	height := chartHeight + legendRows*legendHeight
	fmt.Fprintf(&b, `<svg class="chart" id="%s" role="img" aria-labelledby="%s-title %s-desc" viewBox="0 0 %d %d" width="100%%" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">`,
		id, id, id, chartWidth, height)
	fmt.Fprintf(&b, `<title id="%s-title">%s</title><desc id="%s-desc">%s</desc>`, id, html.EscapeString(c.Title), id, html.EscapeString(c.describe()))
	plotW := float64(chartWidth - chartLeft - chartRight)
	plotH := float64(chartHeight - chartTop - chartBottom)
	bottom := float64(chartHeight - chartBottom)
	top := c.top()
	// The y axis: 0, half and the top, with faint lines across.
	for _, f := range []float64{0, 0.5, 1} {
		y := bottom - f*plotH
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#e5e7eb"/>`, chartLeft, num(y), chartWidth-chartRight, num(y))
		fmt.Fprintf(&b, `<text x="%d" y="%s" font-size="11" text-anchor="end" fill="#374151">%s</text>`, chartLeft-4, num(y+4), html.EscapeString(c.format(f*top)))
	}
	n := len(c.Labels)
	if n == 0 || c.Empty() {
		fmt.Fprintf(&b, `<text class="nodata" x="%s" y="%s" font-size="14" text-anchor="middle" fill="#4b5563">No data yet</text></svg>`,
			num(chartLeft+plotW/2), num(chartTop+plotH/2))
		return template.HTML(b.String())
	}
	step := plotW / float64(n)
	// The x axis' labels: at most about ten, evenly spaced, the last one
	// always shown.
	every := max(1, (n+9)/10)
	for i, l := range c.Labels {
		if i%every != 0 && i != n-1 {
			continue
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" text-anchor="middle" fill="#374151">%s</text>`,
			num(chartLeft+step*(float64(i)+0.5)), num(bottom+14), html.EscapeString(l))
	}
	if c.Lines {
		c.drawLines(&b, step, bottom, plotH, top)
	} else {
		c.drawBars(&b, step, bottom, plotH, top)
	}
	// The legend, four names a row, under the axis.
	if legendRows > 0 {
		for i, s := range c.Series {
			x := chartLeft + (i%4)*((chartWidth-chartLeft)/4)
			y := chartHeight + (i/4)*legendHeight
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11" fill="#111827">%s</text>`,
				x, y-6, colour(i), x+14, y+3, html.EscapeString(s.Name))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// drawBars stacks the series' values at each label, each bar with a
// tooltip naming its label, series and value.
func (c Chart) drawBars(b *strings.Builder, step, bottom, plotH, top float64) {
	w := math.Max(1, step*0.8)
	for i, l := range c.Labels {
		base := bottom
		for si, s := range c.Series {
			v := value(s.Values, i)
			if v <= 0 {
				continue
			}
			h := v / top * plotH
			base -= h
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`,
				num(chartLeft+step*float64(i)+(step-w)/2), num(base), num(w), num(h), colour(si),
				html.EscapeString(c.point(l, s.Name, v)))
		}
	}
}

// drawLines draws each series as a line through its points, a dot on each
// (a single point is a dot alone). A value that is not a number is a step
// without data (no time to answer where nothing was answered): no dot, and
// the line breaks there.
func (c Chart) drawLines(b *strings.Builder, step, bottom, plotH, top float64) {
	for si, s := range c.Series {
		var run []string
		flush := func() {
			if len(run) > 1 {
				fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.Join(run, " "), colour(si))
			}
			run = run[:0]
		}
		for i, l := range c.Labels {
			if i < len(s.Values) && math.IsNaN(s.Values[i]) {
				flush()
				continue
			}
			v := value(s.Values, i)
			x, y := num(chartLeft+step*(float64(i)+0.5)), num(bottom-v/top*plotH)
			run = append(run, x+","+y)
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s</title></circle>`, x, y, colour(si),
				html.EscapeString(c.point(l, s.Name, v)))
		}
		flush()
	}
}

// top is the y axis' top: the highest stack (bars) or value (lines),
// rounded up to a round number; 1 when all are zero.
func (c Chart) top() float64 {
	high := 0.0
	for i := range c.Labels {
		sum := 0.0
		for _, s := range c.Series {
			v := value(s.Values, i)
			if c.Lines {
				high = math.Max(high, v)
			} else if v > 0 {
				sum += v
			}
		}
		high = math.Max(high, sum)
	}
	if high <= 0 {
		return 1
	}
	// 1, 2 or 5 times a power of ten.
	p := math.Pow(10, math.Floor(math.Log10(high)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= high {
			return m * p
		}
	}
	return 10 * p
}

// describe sums the chart up in words: what it covers and each series'
// total and highest value.
func (c Chart) describe() string {
	var parts []string
	if c.Desc != "" {
		parts = append(parts, c.Desc)
	}
	if len(c.Labels) > 0 {
		parts = append(parts, fmt.Sprintf("%d points from %s to %s.", len(c.Labels), c.Labels[0], c.Labels[len(c.Labels)-1]))
	}
	if c.Empty() {
		return strings.Join(append(parts, "No data yet."), " ")
	}
	for _, s := range c.Series {
		high, sum := 0.0, 0.0
		for i := range c.Labels {
			v := value(s.Values, i)
			high = math.Max(high, v)
			sum += v
		}
		if c.Lines {
			parts = append(parts, fmt.Sprintf("%s: highest %s.", s.Name, c.format(high)))
		} else {
			parts = append(parts, fmt.Sprintf("%s: %s in all, highest %s.", s.Name, c.format(sum), c.format(high)))
		}
	}
	return strings.Join(parts, " ")
}

func (c Chart) point(label, series string, v float64) string {
	if series == "" {
		return label + ": " + c.format(v)
	}
	return label + " · " + series + ": " + c.format(v)
}

// format writes a value with the chart's unit, dollars before it.
func (c Chart) format(v float64) string {
	var s string
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		s = strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	switch c.Unit {
	case "":
		return s
	case "$":
		return "$" + s
	default:
		return s + " " + c.Unit
	}
}

// value is vs[i], 0 past its end or for a value that is not a positive
// number (every chart counts, times or spends).
func value(vs []float64, i int) float64 {
	if i >= len(vs) || math.IsNaN(vs[i]) || math.IsInf(vs[i], 0) || vs[i] < 0 {
		return 0
	}
	return vs[i]
}

// num writes a coordinate with one decimal.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// DataTable is the chart's numbers as a table, for those who read them
// rather than look: a row per label with any value, a column per series.
func (c Chart) DataTable() template.HTML {
	if c.Empty() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<table class="numbers"><caption>%s</caption><tr><th scope="col">%s</th>`, html.EscapeString(c.Title), "When")
	for _, s := range c.Series {
		fmt.Fprintf(&b, `<th scope="col">%s</th>`, html.EscapeString(s.Name))
	}
	b.WriteString(`</tr>`)
	for i, l := range c.Labels {
		some := false
		for _, s := range c.Series {
			some = some || value(s.Values, i) != 0
		}
		if !some {
			continue
		}
		fmt.Fprintf(&b, `<tr><th scope="row">%s</th>`, html.EscapeString(l))
		for _, s := range c.Series {
			if i < len(s.Values) && math.IsNaN(s.Values[i]) {
				b.WriteString(`<td>-</td>`)
				continue
			}
			fmt.Fprintf(&b, `<td>%s</td>`, html.EscapeString(c.format(value(s.Values, i))))
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</table>`)
	return template.HTML(b.String())
}
