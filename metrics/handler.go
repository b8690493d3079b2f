package metrics

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"
)

// contentType is the Prometheus text format's, as the Go client sends it.
const contentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// Handler serves the metrics in the Prometheus text format: the Go
// runtime's (go_*), parley's (parley_*), the process's (process_*) and the
// scrapes' own (promhttp_*), with the names, help and values the Prometheus
// Go client gave them. The body is gzipped when the scraper accepts it.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.scraping.Add(1)
		defer m.scraping.Add(-1)
		h := w.Header()
		h.Set("Content-Type", contentType)
		var out io.Writer = w
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			h.Add("Vary", "Accept-Encoding")
			gz := gzipWriters.Get().(*gzip.Writer)
			gz.Reset(w)
			defer func() {
				if err := gz.Close(); err != nil {
					m.writeErrors.Add(1)
				}
				gz.Reset(nil)
				gzipWriters.Put(gz)
			}()
			out = gz
		}
		if err := m.write(out); err != nil {
			m.writeErrors.Add(1)
		}
		m.scrapes.Add(1)
	})
}

// write writes the whole exposition, its families sorted by name.
func (m *Metrics) write(w io.Writer) error {
	e := newExposer(w)
	writeGo(e)
	m.reg.write(e)
	writeProcess(e)
	e.header("promhttp_metric_handler_errors_total", "Total number of internal errors encountered by the promhttp metric handler.", typeCounter)
	cause := []string{"cause"}
	e.sample("promhttp_metric_handler_errors_total", cause, []string{"encoding"}, []int{0}, "", "", float64(m.writeErrors.Load()))
	e.sample("promhttp_metric_handler_errors_total", cause, []string{"gathering"}, []int{0}, "", "", 0)
	e.gauge("promhttp_metric_handler_requests_in_flight", "Current number of scrapes being served.", float64(m.scraping.Load()))
	e.header("promhttp_metric_handler_requests_total", "Total number of scrapes by HTTP status code.", typeCounter)
	code := []string{"code"}
	e.sample("promhttp_metric_handler_requests_total", code, []string{"200"}, []int{0}, "", "", float64(m.scrapes.Load()))
	e.sample("promhttp_metric_handler_requests_total", code, []string{"500"}, []int{0}, "", "", 0)
	e.sample("promhttp_metric_handler_requests_total", code, []string{"503"}, []int{0}, "", "", 0)
	return e.flush()
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
