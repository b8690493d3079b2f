package metrics

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The Prometheus text exposition format (version 0.0.4), written by hand:
// parley exposes counters, histograms with fixed buckets and a few gauges,
// which is a small part of what a client library covers.

// Metric types, as written on a # TYPE line.
const (
	typeCounter   = "counter"
	typeGauge     = "gauge"
	typeHistogram = "histogram"
	typeSummary   = "summary"
)

// registry holds the families of one Metrics, in the order they were made;
// the exposition sorts them by name.
type registry struct {
	mu       sync.Mutex
	families []*family
}

// family is one metric name with its help, type, label names and series.
type family struct {
	name, help, typ string
	labels          []string       // as WithLabelValues takes them
	order           []int          // indexes into labels, sorted by label name
	buckets         []float64      // upper bounds, for a histogram
	read            func() float64 // a gauge's value, read at each scrape
	// readCounts, for a counter of one label read at each scrape, returns
	// the count of each of values, in their order.
	values     []string
	readCounts func() []float64

	mu     sync.RWMutex
	series map[string]*series // by the label values joined with labelSep
}

// labelSep joins label values into a map key; label() never lets it through.
const labelSep = "\xff"

// series is one labelled child of a family: a counter's value or a
// histogram's counts.
type series struct {
	values []string // label values, in the family's labels order
	bits   atomic.Uint64

	mu     sync.Mutex // guards the histogram fields
	counts []uint64   // per bucket, not cumulative; the last is +Inf
	sum    float64
}

func (r *registry) counter(name, help string) counter {
	return counterVec{r.add(name, help, typeCounter, nil)}.WithLabelValues()
}

func (r *registry) counterVec(name, help string, labels ...string) counterVec {
	return counterVec{r.add(name, help, typeCounter, nil, labels...)}
}

func (r *registry) histogram(name, help string, buckets []float64) histogram {
	return histogramVec{r.add(name, help, typeHistogram, buckets)}.WithLabelValues()
}

func (r *registry) histogramVec(name, help string, buckets []float64, labels ...string) histogramVec {
	return histogramVec{r.add(name, help, typeHistogram, buckets, labels...)}
}

// gaugeFunc adds an unlabelled gauge whose value read returns at each scrape.
func (r *registry) gaugeFunc(name, help string, read func() float64) {
	r.add(name, help, typeGauge, nil).read = read
}

// counterFunc adds a counter with one label, whose values are values and
// whose counts read returns at each scrape, one for each value in order.
func (r *registry) counterFunc(name, help, label string, values []string, read func() []float64) {
	f := r.add(name, help, typeCounter, nil, label)
	f.values, f.readCounts = values, read
}

// write writes every family, sorted by name.
func (r *registry) write(e *exposer) {
	r.mu.Lock()
	all := slices.Clone(r.families)
	r.mu.Unlock()
	slices.SortFunc(all, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	for _, f := range all {
		e.family(f)
	}
}

func (r *registry) add(name, help, typ string, buckets []float64, labels ...string) *family {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	f := &family{name: name, help: help, typ: typ, labels: labels, order: order, buckets: buckets,
		series: map[string]*series{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.families {
		if g.name == name {
			panic("metrics: " + name + " registered twice")
		}
	}
	r.families = append(r.families, f)
	return f
}

// child returns the series for values, making it on first use.
func (f *family) child(values []string) *series {
	if len(values) != len(f.labels) {
		panic("metrics: " + f.name + " takes " + strconv.Itoa(len(f.labels)) + " label values")
	}
	var buf [128]byte
	key := buf[:0]
	for i, v := range values {
		if i > 0 {
			key = append(key, labelSep...)
		}
		key = append(key, v...)
	}
	f.mu.RLock()
	s := f.series[string(key)]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s = f.series[string(key)]; s == nil {
		s = &series{values: slices.Clone(values)}
		if f.typ == typeHistogram {
			s.counts = make([]uint64, len(f.buckets)+1)
		}
		f.series[string(key)] = s
	}
	return s
}

// sorted returns the family's series ordered by their label values, taken
// in label-name order, as Prometheus client libraries write them.
func (f *family) sorted() []*series {
	f.mu.RLock()
	out := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		out = append(out, s)
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *series) int {
		for _, i := range f.order {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	return out
}

// counterVec is a counter family with labels.
type counterVec struct{ f *family }

// WithLabelValues returns the counter for values, given in the order of
// the family's label names.
func (v counterVec) WithLabelValues(values ...string) counter {
	return counter{v.f.child(values)}
}

// Len is how many series the family has.
func (v counterVec) Len() int {
	v.f.mu.RLock()
	defer v.f.mu.RUnlock()
	return len(v.f.series)
}

// counter is one counter series.
type counter struct{ s *series }

// Inc adds one.
func (c counter) Inc() { c.Add(1) }

// Add adds d, which must not be negative.
func (c counter) Add(d float64) {
	for {
		old := c.s.bits.Load()
		if c.s.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Value is the counter's current value.
func (c counter) Value() float64 { return math.Float64frombits(c.s.bits.Load()) }

// histogramVec is a histogram family with labels.
type histogramVec struct{ f *family }

// WithLabelValues returns the histogram for values, given in the order of
// the family's label names.
func (v histogramVec) WithLabelValues(values ...string) histogram {
	return histogram{v.f, v.f.child(values)}
}

// histogram is one histogram series.
type histogram struct {
	f *family
	s *series
}

// Observe records one value; a value on a bucket's bound counts in it.
func (h histogram) Observe(x float64) {
	i, _ := slices.BinarySearch(h.f.buckets, x)
	h.s.mu.Lock()
	h.s.counts[i]++
	h.s.sum += x
	h.s.mu.Unlock()
}

// Count is how many values were observed.
func (h histogram) Count() uint64 {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var n uint64
	for _, c := range h.s.counts {
		n += c
	}
	return n
}

// exposer writes the text format to a buffered writer; its first error
// sticks and ends the writing.
type exposer struct {
	w   *bufio.Writer
	num []byte
}

func newExposer(w io.Writer) *exposer { return &exposer{w: bufio.NewWriterSize(w, 16<<10)} }

// header writes a family's # HELP and # TYPE lines.
func (e *exposer) header(name, help, typ string) {
	e.w.WriteString("# HELP ")
	e.w.WriteString(name)
	e.w.WriteByte(' ')
	writeEscaped(e.w, help, false)
	e.w.WriteString("\n# TYPE ")
	e.w.WriteString(name)
	e.w.WriteByte(' ')
	e.w.WriteString(typ)
	e.w.WriteByte('\n')
}

// sample writes one line: name{labels[, extra]} value. names and values
// pair up; extraName, when set, comes last (le or quantile).
func (e *exposer) sample(name string, names, values []string, order []int, extraName, extraValue string, v float64) {
	e.w.WriteString(name)
	if len(order) > 0 || extraName != "" {
		e.w.WriteByte('{')
		n := 0
		for _, i := range order {
			e.label(n, names[i], values[i])
			n++
		}
		if extraName != "" {
			e.label(n, extraName, extraValue)
		}
		e.w.WriteByte('}')
	}
	e.w.WriteByte(' ')
	e.num = appendFloat(e.num[:0], v)
	e.w.Write(e.num)
	e.w.WriteByte('\n')
}

func (e *exposer) label(n int, name, value string) {
	if n > 0 {
		e.w.WriteByte(',')
	}
	e.w.WriteString(name)
	e.w.WriteString(`="`)
	writeEscaped(e.w, value, true)
	e.w.WriteByte('"')
}

// gauge writes a family of one unlabelled gauge.
func (e *exposer) gauge(name, help string, v float64) {
	e.header(name, help, typeGauge)
	e.sample(name, nil, nil, nil, "", "", v)
}

// counter writes a family of one unlabelled counter.
func (e *exposer) counter(name, help string, v float64) {
	e.header(name, help, typeCounter)
	e.sample(name, nil, nil, nil, "", "", v)
}

// family writes f with its series; a family with none is left out.
func (e *exposer) family(f *family) {
	if f.read != nil {
		e.gauge(f.name, f.help, f.read())
		return
	}
	if f.readCounts != nil {
		counts := f.readCounts()
		e.header(f.name, f.help, f.typ)
		for i, v := range f.values {
			if i < len(counts) {
				e.sample(f.name, f.labels, []string{v}, f.order, "", "", counts[i])
			}
		}
		return
	}
	all := f.sorted()
	if len(all) == 0 {
		return
	}
	e.header(f.name, f.help, f.typ)
	for _, s := range all {
		if f.typ != typeHistogram {
			e.sample(f.name, f.labels, s.values, f.order, "", "", math.Float64frombits(s.bits.Load()))
			continue
		}
		s.mu.Lock()
		counts, sum := slices.Clone(s.counts), s.sum
		s.mu.Unlock()
		var cum uint64
		for i, c := range counts {
			cum += c
			le := "+Inf"
			if i < len(f.buckets) {
				le = string(appendFloat(nil, f.buckets[i]))
			}
			e.sample(f.name+"_bucket", f.labels, s.values, f.order, "le", le, float64(cum))
		}
		e.sample(f.name+"_sum", f.labels, s.values, f.order, "", "", sum)
		e.sample(f.name+"_count", f.labels, s.values, f.order, "", "", float64(cum))
	}
}

func (e *exposer) flush() error { return e.w.Flush() }

// appendFloat formats v as Prometheus client libraries do.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// writeEscaped writes s with backslashes and newlines escaped, and double
// quotes too in a label value.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}
