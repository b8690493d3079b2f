package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Handler serves the metrics as promhttp does: the Go runtime's (go_*),
// parley's (parley_*), the process's (process_*) and the scrapes' own
// (promhttp_*), in the text format or whichever the scraper negotiates
// (protobuf too), gzipped when it accepts that.
func (m *Metrics) Handler() http.Handler { return m.handler }

// readCounters is a counter family of one label whose counts are read at
// each scrape, one for each of values in order.
type readCounters struct {
	desc   *prometheus.Desc
	values []string
	read   func() []float64
}

func newReadCounters(name, help, label string, values []string, read func() []float64) readCounters {
	return readCounters{desc: prometheus.NewDesc(name, help, []string{label}, nil), values: values, read: read}
}

func (c readCounters) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c readCounters) Collect(ch chan<- prometheus.Metric) {
	counts := c.read()
	for i, v := range c.values {
		if i >= len(counts) {
			return
		}
		m, err := prometheus.NewConstMetric(c.desc, prometheus.CounterValue, counts[i], v)
		if err != nil {
			m = prometheus.NewInvalidMetric(c.desc, err)
		}
		ch <- m
	}
}
