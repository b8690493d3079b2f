package admin

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// parseSVG checks the chart is well-formed XML and returns its elements'
// names and its text, in order.
func parseSVG(t *testing.T, svg string) (elements []string, text string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var sb strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			elements = append(elements, tk.Name.Local)
		case xml.CharData:
			sb.Write(tk)
			sb.WriteByte('\n')
		}
	}
	return elements, sb.String()
}

func count(elements []string, name string) int {
	n := 0
	for _, e := range elements {
		if e == name {
			n++
		}
	}
	return n
}

func TestChartSVG(t *testing.T) {
	many := make([]float64, 48)
	labels := make([]string, 48)
	for i := range many {
		many[i] = float64(i % 7)
		labels[i] = strings.Repeat("x", 1) + string(rune('a'+i%26))
	}
	cases := []struct {
		name  string
		chart Chart
		// want: counts of elements, texts that must appear, texts that must not
		bars, dots, lines int
		has, hasNot       []string
	}{
		{name: "empty", chart: Chart{ID: "c", Title: "Turns per hour", Labels: nil, Series: nil},
			has: []string{"Turns per hour", "No data yet"}},
		{name: "all zero", chart: Chart{ID: "c", Title: "Turns", Labels: []string{"a", "b"}, Series: []Series{{Name: "tg", Values: []float64{0, 0}}}},
			has: []string{"No data yet"}},
		{name: "one point bar", chart: Chart{ID: "c", Title: "Turns", Labels: []string{"10:00"}, Series: []Series{{Name: "tg", Values: []float64{3}}}},
			bars: 1, has: []string{"10:00", "tg: 3 in all, highest 3."}, hasNot: []string{"No data yet"}},
		{name: "one point line", chart: Chart{ID: "c", Title: "Latency", Unit: "ms", Lines: true, Labels: []string{"10:00"},
			Series: []Series{{Name: "p50", Values: []float64{120}}}},
			dots: 1, lines: 0, has: []string{"10:00 · p50: 120 ms"}},
		{name: "many stacked", chart: Chart{ID: "c", Title: "Tokens", Labels: labels,
			Series: []Series{{Name: "a", Values: many}, {Name: "b", Values: many}}},
			bars: 2 * (48 - 48/7 - 1), has: []string{"48 points"}},
		{name: "many lines", chart: Chart{ID: "c", Title: "Latency", Lines: true, Labels: labels,
			Series: []Series{{Name: "p50", Values: many}, {Name: "p95", Values: many}}},
			dots: 96, lines: 2},
		{name: "gaps in a line", chart: Chart{ID: "c", Title: "Latency", Lines: true, Labels: []string{"a", "b", "c", "d", "e"},
			Series: []Series{{Name: "p50", Values: []float64{1, 2, math.NaN(), 3, 4}}}},
			dots: 4, lines: 2, hasNot: []string{"NaN"}},
		{name: "not numbers", chart: Chart{ID: "c", Title: "Cost", Unit: "$", Labels: []string{"a", "b", "c"},
			Series: []Series{{Name: "x", Values: []float64{math.NaN(), math.Inf(1), 0.25}}}},
			bars: 1, has: []string{"$0.25"}, hasNot: []string{"NaN", "Inf"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svg := string(tc.chart.SVG())
			els, text := parseSVG(t, svg)
			if len(els) == 0 || els[0] != "svg" || !strings.Contains(svg, `role="img"`) || !strings.Contains(svg, `aria-labelledby="c-title c-desc"`) {
				t.Fatalf("not an accessible svg: %s", svg)
			}
			if count(els, "title") < 1 || count(els, "desc") != 1 {
				t.Fatalf("no title or description: %s", svg)
			}
			// Each bar and dot carries its own title (a tooltip).
			if got := count(els, "rect") - legendBoxes(tc.chart); got != tc.bars {
				t.Errorf("bars: %d, want %d\n%s", got, tc.bars, svg)
			}
			if got := count(els, "circle"); got != tc.dots {
				t.Errorf("dots: %d, want %d", got, tc.dots)
			}
			if got := count(els, "polyline"); got != tc.lines {
				t.Errorf("lines: %d, want %d", got, tc.lines)
			}
			for _, s := range tc.has {
				if !strings.Contains(text, s) {
					t.Errorf("no %q in the chart's text:\n%s", s, text)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(svg, s) {
					t.Errorf("%q in the chart:\n%s", s, svg)
				}
			}
			if strings.Contains(svg, "style=") {
				t.Errorf("an inline style, which the dashboard's policy (no inline style) drops: %s", svg)
			}
		})
	}
}

func legendBoxes(c Chart) int {
	if len(c.Series) > 1 {
		return len(c.Series)
	}
	return 0
}

// Every text a person or a platform chose (a name, a label, an id) is
// escaped: none can open an element or end the drawing.
func TestChartEscapesText(t *testing.T) {
	evil := `</title><script>alert(1)</script><a href="x">&`
	c := Chart{ID: `c"><script>`, Title: evil, Desc: evil, Labels: []string{evil, "b"},
		Series: []Series{{Name: evil, Values: []float64{1, 2}}, {Name: "two", Values: []float64{2, 1}}}}
	for _, lines := range []bool{false, true} {
		c.Lines = lines
		svg := string(c.SVG())
		els, text := parseSVG(t, svg)
		for _, e := range els {
			if e == "script" || e == "a" {
				t.Fatalf("an injected <%s> element (lines %v):\n%s", e, lines, svg)
			}
		}
		if !strings.Contains(text, evil) {
			t.Fatalf("the text is not kept as text (lines %v):\n%s", lines, text)
		}
	}
}

func TestChartScale(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		lines  bool
		want   float64
	}{
		{[]float64{0}, false, 1},
		{[]float64{3}, false, 5},
		{[]float64{10}, false, 10},
		{[]float64{11}, false, 20},
		{[]float64{0.003}, false, 0.005},
		{[]float64{700}, true, 1000},
	} {
		c := Chart{Labels: make([]string, len(tc.values)), Series: []Series{{Values: tc.values}}, Lines: tc.lines}
		if got := c.top(); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("top of %v: %v, want %v", tc.values, got, tc.want)
		}
	}
	// Stacked bars reach the sum of a label's values.
	c := Chart{Labels: []string{"a"}, Series: []Series{{Values: []float64{3}}, {Values: []float64{4}}}}
	if got := c.top(); got != 10 {
		t.Errorf("top of stacked 3+4: %v, want 10", got)
	}
}

// The numbers beside a chart: a row per label with a value, a column per
// series, every text escaped, nothing for an empty chart.
func TestChartDataTable(t *testing.T) {
	if got := (Chart{Title: "x", Labels: []string{"a"}, Series: []Series{{Name: "s", Values: []float64{0}}}}).DataTable(); got != "" {
		t.Fatalf("a table for an empty chart: %s", got)
	}
	c := Chart{Title: "Cost <b>", Unit: "$", Labels: []string{"a", "b", "<c>"},
		Series: []Series{{Name: "one", Values: []float64{0, 1.5, 2}}, {Name: "t<w>o", Values: []float64{0, math.NaN(), 0.25}}}}
	got := string(c.DataTable())
	els, text := parseSVG(t, got)
	if count(els, "tr") != 3 || count(els, "b") != 0 || count(els, "c") != 0 {
		t.Fatalf("rows or injected elements: %v\n%s", els, got)
	}
	for _, want := range []string{"Cost <b>", "t<w>o", "<c>", "$1.5", "$0.25", "-"} {
		if !strings.Contains(text, want) {
			t.Fatalf("no %q in the table's text:\n%s", want, text)
		}
	}
}
