package metrics

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPlainCounters(t *testing.T) {
	m := New()
	m.SendObserved("tg-main", 40*time.Millisecond, nil)
	m.SendObserved("tg-main", 2*time.Second, errors.New("429: "+secretText))
	m.SendObserved("discord-1", 10*time.Millisecond, nil)
	m.AdapterError("tg-main")
	m.AdapterError("tg-main")
	m.Reconnect("wa")
	m.DuplicateDropped()
	m.DuplicateDropped()
	m.DuplicateDropped()
	m.OutboxRetry()
	m.WebhookDelivery("answered")
	m.WebhookDelivery("failed")
	m.WebhookDelivery("answered")
	m.CronRun("ok")
	m.CronRun("timeout")
	m.CronRun(secretText)
	m.WebhookRefused("ci", "stale")
	m.WebhookRefused("ci", "stale")
	m.WebhookRefused("", "not_found")
	var queue atomic.Int64
	queue.Store(7)
	m.SetQueue(func() int { return int(queue.Load()) })
	m.SetActiveLanes(func() int { return 3 })
	m.SetHistoryCache(func() (int64, int64) { return 41, 5 })
	m.SetCheckpoints(func() (int64, int64) { return 12, 1 })

	body := scrape(t, m)
	wantLines(t, body,
		`parley_adapter_send_duration_seconds_count{adapter="tg-main",outcome="ok"} 1`,
		`parley_adapter_send_duration_seconds_count{adapter="tg-main",outcome="error"} 1`,
		`parley_adapter_send_duration_seconds_sum{adapter="tg-main",outcome="error"} 2`,
		`parley_adapter_send_duration_seconds_bucket{adapter="tg-main",outcome="ok",le="0.025"} 0`,
		`parley_adapter_send_duration_seconds_bucket{adapter="tg-main",outcome="ok",le="0.05"} 1`,
		`parley_adapter_send_duration_seconds_count{adapter="discord-1",outcome="ok"} 1`,
		`parley_adapter_errors_total{adapter="tg-main"} 2`,
		`parley_history_cache_reads_total{result="hit"} 41`,
		`parley_history_cache_reads_total{result="miss"} 5`,
		`parley_sqlite_checkpoints_total{result="ok"} 12`,
		`parley_sqlite_checkpoints_total{result="failed"} 1`,
		`parley_adapter_reconnects_total{adapter="wa"} 1`,
		`parley_inbound_duplicates_dropped_total 3`,
		`parley_outbox_retries_total 1`,
		`parley_webhook_deliveries_total{status="answered"} 2`,
		`parley_webhook_deliveries_total{status="failed"} 1`,
		`parley_cron_runs_total{status="ok"} 1`,
		`parley_cron_runs_total{status="timeout"} 1`,
		`parley_cron_runs_total{status="other"} 1`,
		`parley_webhook_refused_total{hook="ci",reason="stale"} 2`,
		`parley_webhook_refused_total{hook="unknown",reason="not_found"} 1`,
		`parley_queue_depth 7`,
		`parley_active_lanes 3`,
	)
	// The error's text, not the digits 429, which runtime figures such as
	// byte counts can hold.
	if strings.Contains(body, "SECRET") || strings.Contains(body, "429: ") {
		t.Error("text reached the exposition")
	}
	// The gauge reads the function at each scrape.
	queue.Store(2)
	m.SetActiveLanes(nil)
	wantLines(t, scrape(t, m), `parley_queue_depth 2`, `parley_active_lanes 0`)
}

func TestHandlerExposesRuntime(t *testing.T) {
	body := scrape(t, New())
	for _, want := range []string{
		"# TYPE parley_store_wait_duration_seconds histogram",
		`parley_store_wait_duration_seconds_count{op="read"} 0`,
		`parley_compactions_total{trigger="before_turn"} 0`,
		"# TYPE parley_compaction_duration_seconds histogram",
		"# TYPE parley_queue_depth gauge",
		"# TYPE parley_inbound_duplicates_dropped_total counter",
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// Every metric of parley's own is parley_-prefixed.
	for _, l := range strings.Split(body, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if name := strings.FieldsFunc(l, func(r rune) bool { return r == '{' || r == ' ' })[0]; !strings.HasPrefix(name, "parley_") &&
			!strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("unprefixed metric %q", name)
		}
	}
}

func TestNewIsIndependent(t *testing.T) {
	a, b := New(), New()
	a.OutboxRetry()
	wantLines(t, scrape(t, b), `parley_outbox_retries_total 0`)
}

func TestLabel(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"id", "tg-main", "tg-main"},
		{"enum", "cache_read", "cache_read"},
		{"spec", "ollama/llama3.1:8b", "ollama/llama3.1:8b"},
		{"http status", "200", "200"},
		{"empty", "", "unknown"},
		{"space", "hello world", "other"},
		{"newline", "a\nb", "other"},
		{"quote", `a"b`, "other"},
		{"unicode", "héllo", "other"},
		{"too long", strings.Repeat("a", 65), "other"},
		{"longest", strings.Repeat("a", 64), strings.Repeat("a", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := label(tc.in); got != tc.want {
				t.Errorf("label(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSplitSpec(t *testing.T) {
	for _, tc := range []struct{ spec, provider, model string }{
		{"openai/gpt-4o-mini", "openai", "gpt-4o-mini"},
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"echo", "echo", "echo"},
		{"echo/", "echo", "echo"},
		{"", "unknown", "unknown"},
		{"openai/has space", "openai", "other"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p, m := splitSpec(tc.spec)
			if p != tc.provider || m != tc.model {
				t.Errorf("splitSpec(%q) = %q, %q; want %q, %q", tc.spec, p, m, tc.provider, tc.model)
			}
		})
	}
}
