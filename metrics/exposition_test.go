package metrics

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/parleyd/parley/llm"
)

// touchAll gives every parley_ family a series, so each is exposed.
func touchAll(m *Metrics) {
	m.SendObserved("tg-main", 40*time.Millisecond, nil)
	m.AdapterError("tg-main")
	m.Reconnect("wa")
	m.DuplicateDropped()
	m.OutboxRetry()
	m.OutboxReclaimed(2)
	m.WebhookDelivery("answered")
	m.CronRun("ok")
	m.BudgetRefused("user")
	m.WebhookRefused("ci", "stale")
	m.turns.WithLabelValues("main", "ok").Inc()
	m.turnDuration.WithLabelValues("main", "ok").Observe(1)
	m.tokens.WithLabelValues("prompt", "openai", "gpt").Add(3)
	m.compactionTime.Observe(2)
	mod := m.Model("openai/gpt", scriptedModel{deltas: []llm.Delta{{Text: "x"}}})
	_, _ = mod.Stream(context.Background(), llm.Request{}, nil)
}

// The exposition has the families, help texts and types, in the same order,
// that the Prometheus Go client (client_golang v1.25 with its Go and
// process collectors and promhttp) gave: testdata holds its # lines.
func TestExpositionMatchesThePrometheusClients(t *testing.T) {
	want, err := os.ReadFile("testdata/client_golang_families.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	touchAll(m)
	var got strings.Builder
	for l := range strings.Lines(scrape(t, m)) {
		if strings.HasPrefix(l, "# ") {
			got.WriteString(l)
		}
	}
	if runtime.GOOS != "linux" {
		t.Skip("process_* families other than the start time need /proc")
	}
	if got.String() != string(want) {
		t.Errorf("families differ from client_golang's\ngot:\n%s\nwant:\n%s", got.String(), want)
	}
}

// The official parser reads the exposition, with every histogram whole.
func TestExpositionParses(t *testing.T) {
	m := New()
	touchAll(m)
	m.storeWait.WithLabelValues("odd \"op\"\\\n").Observe(0.001)
	families, err := parse(t, scrape(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		buckets []float64
	}{
		{"parley_turn_duration_seconds", turnBuckets},
		{"parley_model_call_duration_seconds", modelBuckets},
		{"parley_model_first_token_seconds", firstTokenBuckets},
		{"parley_store_wait_duration_seconds", storeBuckets},
		{"parley_adapter_send_duration_seconds", sendBuckets},
		{"parley_compaction_duration_seconds", compactionBuckets},
	} {
		f := families[tc.name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s: %v, want a histogram", tc.name, f)
			continue
		}
		want := append(slices.Clone(tc.buckets), math.Inf(1))
		for _, s := range f.Metric {
			h := s.GetHistogram()
			var bounds []float64
			for _, b := range h.Bucket {
				bounds = append(bounds, b.GetUpperBound())
			}
			if !slices.Equal(bounds, want) || h.GetSampleCount() != h.Bucket[len(h.Bucket)-1].GetCumulativeCount() {
				t.Errorf("%s: buckets %v with count %d, want %v", tc.name, bounds, h.GetSampleCount(), want)
			}
		}
	}
	for name, typ := range map[string]dto.MetricType{"parley_tokens_total": dto.MetricType_COUNTER,
		"parley_queue_depth": dto.MetricType_GAUGE, "go_gc_duration_seconds": dto.MetricType_SUMMARY,
		"go_goroutines": dto.MetricType_GAUGE, "process_start_time_seconds": dto.MetricType_GAUGE} {
		if f := families[name]; f == nil || f.GetType() != typ {
			t.Errorf("%s: %v, want a %s", name, f, typ)
		}
	}
	found := false
	for _, s := range families["parley_store_wait_duration_seconds"].Metric {
		for _, l := range s.Label {
			found = found || l.GetValue() == "odd \"op\"\\\n"
		}
	}
	if !found {
		t.Error("a label value with a quote, a backslash and a newline did not come back whole")
	}
}

// parse reads an exposition with the Prometheus text parser, as a
// Prometheus server of the legacy name scheme (every parley name fits it).
func parse(t *testing.T, text string) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// A scraper that accepts gzip gets the same exposition gzipped.
func TestHandlerGzips(t *testing.T) {
	m := New()
	touchAll(m)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		name, accept string
		gzipped      bool
	}{
		{"gzip", "gzip", true},
		{"as Prometheus asks", "gzip, deflate", true},
		{"refused", "gzip;q=0, identity", false},
		{"none", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("Accept-Encoding", tc.accept) // set, so the transport doesn't add its own
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != textContentType {
				t.Errorf("Content-Type %q", ct)
			}
			var body io.Reader = resp.Body
			if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tc.gzipped {
				t.Fatalf("gzipped = %v, want %v", got, tc.gzipped)
			}
			if tc.gzipped {
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				body = zr
			}
			b, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, string(b), `parley_outbox_retries_total 1`, `parley_outbox_reclaimed_total 2`)
		})
	}
}

// Updates racing scrapes lose nothing, and each scrape sees whole
// histograms (its +Inf bucket equals its count). Run with -race.
func TestConcurrentUpdatesAndScrapes(t *testing.T) {
	m := New()
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				m.SendObserved(fmt.Sprint("a", i%3), time.Duration(i)*time.Millisecond, nil)
				m.tokens.WithLabelValues(TokensPrompt, "p", fmt.Sprint("m", w)).Add(2)
				m.DuplicateDropped()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for scraping := true; scraping; {
		select {
		case <-done:
			scraping = false
		default:
		}
		families, err := parse(t, scrape(t, m))
		if err != nil {
			t.Fatal(err)
		}
		if f := families["parley_adapter_send_duration_seconds"]; f != nil {
			for _, s := range f.Metric {
				h := s.GetHistogram()
				if h.GetSampleCount() != h.Bucket[len(h.Bucket)-1].GetCumulativeCount() {
					t.Fatalf("a histogram seen half updated: %v", h)
				}
			}
		}
	}
	body := scrape(t, m)
	wantLines(t, body, fmt.Sprintf("parley_inbound_duplicates_dropped_total %d", workers*each))
	for w := range workers {
		wantLines(t, body, fmt.Sprintf(`parley_tokens_total{kind="prompt",model="m%d",provider="p"} %d`, w, 2*each))
	}
	var n uint64
	for a := range 3 {
		n += histogramCount(t, m.adapterSend.WithLabelValues(fmt.Sprint("a", a), OutcomeOK))
	}
	if n != workers*each {
		t.Errorf("%d sends observed, want %d", n, workers*each)
	}
}

// Each scrape is counted once it is answered, as promhttp counted them.
func TestScrapesAreCounted(t *testing.T) {
	m := New()
	wantLines(t, scrape(t, m), `promhttp_metric_handler_requests_total{code="200"} 0`, `promhttp_metric_handler_requests_in_flight 1`)
	wantLines(t, scrape(t, m), `promhttp_metric_handler_requests_total{code="200"} 1`)
}

// A scraper that asks for the protobuf format (Prometheus with native
// histograms on, or a federating agent) gets it, as promhttp negotiates,
// with the same families and values as the text.
func TestHandlerNegotiatesProtobuf(t *testing.T) {
	m := New()
	touchAll(m)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	format := expfmt.ResponseFormat(resp.Header)
	if format.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("Content-Type %q, want the delimited protobuf format", resp.Header.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(resp.Body, format)
	families := map[string]*dto.MetricFamily{}
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		families[f.GetName()] = &f
	}
	text, err := parse(t, scrape(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"parley_outbox_reclaimed_total", "parley_turn_duration_seconds", "parley_tokens_total", "go_goroutines"} {
		got, want := families[name], text[name]
		if got == nil || want == nil || got.GetHelp() != want.GetHelp() || got.GetType() != want.GetType() || len(got.Metric) != len(want.Metric) {
			t.Errorf("%s: protobuf %v, text %v", name, got, want)
		}
	}
	if v := families["parley_outbox_reclaimed_total"].GetMetric()[0].GetCounter().GetValue(); v != 2 {
		t.Errorf("parley_outbox_reclaimed_total = %v over protobuf, want 2", v)
	}
}
