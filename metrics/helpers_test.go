package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/parleyd/parley/events"
)

// textContentType is the Prometheus text format's, as the Go client sends it.
const textContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// histogramCount is how many values a histogram series observed.
func histogramCount(t testing.TB, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// startFeed runs m.Feed(bus) until the test ends and returns a channel that
// receives once per event the loop has handled. Events published before
// startFeed returns are not missed.
func startFeed(t testing.TB, m *Metrics, bus *events.Bus) <-chan struct{} {
	t.Helper()
	handled := make(chan struct{}, 1<<16)
	m.afterEvent = func() { handled <- struct{}{} }
	run := m.Feed(bus)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("feed returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("feed did not return after cancel")
		}
	})
	return handled
}

// waitHandled waits until n events were handled, or fails after a deadline.
func waitHandled(t testing.TB, handled <-chan struct{}, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-handled:
		case <-deadline:
			t.Fatalf("only %d of %d events handled before the deadline", i, n)
		}
	}
}

// scrape GETs the metrics handler through an httptest server and returns
// the exposition text.
func scrape(t testing.TB, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// wantLines fails for each line missing from the exposition text.
func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("exposition lacks %q", l)
		}
	}
}

// wantAbsent fails for each substring found in the exposition text.
func wantAbsent(t *testing.T, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(body, s) {
			t.Errorf("exposition contains %q", s)
		}
	}
}
