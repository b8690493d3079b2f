package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
)

// The state gauges show what the daemon reads at the scrape; a read that
// fails leaves them out of that scrape and counts as a handler error, and
// the rest of the scrape is served.
func TestStateGauges(t *testing.T) {
	m := New()
	if body := scrape(t, m); strings.Contains(body, "parley_outbox_pending") {
		t.Fatal("state gauges exposed with no state function set")
	}
	fail := false
	m.SetState(func(ctx context.Context) (State, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the state is read without a deadline")
		}
		if fail {
			return State{}, errors.New("database out of reach")
		}
		return State{OutboxPending: 3, OutboxFailed: 1, OutboxOldest: time.Now().Add(-90 * time.Second),
			Channels: map[string]bool{"tg": true, "dc": false}, Replicas: 2, Held: 1,
			DiskFree: 10 << 30, DiskSize: 100 << 30,
			Spend: []AgentSpend{{Agent: "main", USD: 4.5, CapUSD: 5}}}, nil
	})
	body := scrape(t, m)
	wantLines(t, body,
		`parley_outbox_pending 3`,
		`parley_outbox_failed 1`,
		`parley_channel_up{channel="tg"} 1`,
		`parley_channel_up{channel="dc"} 0`,
		`parley_replicas_live 2`,
		`parley_replica_channels_held 1`,
		`parley_replica_fenced 0`,
		`parley_data_disk_free_bytes 1.073741824e+10`,
		`parley_data_disk_size_bytes 1.073741824e+11`,
		`parley_agent_spend_today_usd{agent="main"} 4.5`,
		`parley_agent_spend_cap_usd{agent="main"} 5`,
	)
	age := regexp.MustCompile(`(?m)^parley_outbox_oldest_pending_age_seconds (\S+)$`).FindStringSubmatch(body)
	if age == nil || !strings.HasPrefix(age[1], "9") {
		t.Errorf("oldest pending age: %v; want about 90 seconds", age)
	}
	fail = true
	body = scrape(t, m)
	if strings.Contains(body, "parley_outbox_pending") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("a failed state read: want the state gauges left out and the rest served:\n%s", body)
	}
	fail = false
	body = scrape(t, m)
	if !strings.Contains(body, "parley_outbox_pending 3") {
		t.Error("the state gauges did not come back once the state could be read")
	}
	// Counted after the failed scrape was written, so seen in the next.
	if !strings.Contains(body, `promhttp_metric_handler_errors_total{cause="gathering"} 1`) {
		t.Error("a failed state read is not counted as a gathering error")
	}
}

// Spend is counted against the agent whose turn the session runs, by
// provider and model; a fallback is counted with both models.
func TestFeedCountsCostAndFallbacks(t *testing.T) {
	m := New()
	bus := events.New()
	handled := startFeed(t, m, bus)
	now := time.Now()
	evs := []events.Event{
		{Type: agent.EventTurnStarted, SessionID: "s1", At: now, Data: agent.TurnStarted{AgentID: "main"}},
		{Type: agent.EventModelFallback, SessionID: "s1", At: now, Data: agent.ModelFallback{AgentID: "main", Model: "openai/gpt-4o", Fallback: "anthropic/claude-x"}},
		{Type: sessions.EventMessageAppended, SessionID: "s1", At: now, Data: sessions.MessageAppended{Message: sessions.Message{
			Role: sessions.RoleAssistant, Model: "anthropic/claude-x", Usage: &sessions.Usage{Input: 10, CostUSD: 0.25}}}},
		{Type: sessions.EventMessageAppended, SessionID: "s1", At: now, Data: sessions.MessageAppended{Message: sessions.Message{
			Role: sessions.RoleAssistant, Model: "anthropic/claude-x", Usage: &sessions.Usage{Input: 10, CostUSD: 0.5}}}},
		{Type: agent.EventTurnFinished, SessionID: "s1", At: now, Data: agent.TurnFinished{}},
		// Outside a turn (a summary written by a manual compaction).
		{Type: sessions.EventMessageAppended, SessionID: "s2", At: now, Data: sessions.MessageAppended{Message: sessions.Message{
			Role: sessions.RoleAssistant, Model: "openai/gpt-4o", Usage: &sessions.Usage{Input: 10, CostUSD: 1}}}},
	}
	for _, e := range evs {
		bus.Publish(e)
	}
	waitHandled(t, handled, len(evs))
	wantLines(t, scrape(t, m),
		`parley_model_fallbacks_total{agent="main",fallback="anthropic/claude-x",model="openai/gpt-4o"} 1`,
		`parley_cost_usd_total{agent="main",model="claude-x",provider="anthropic"} 0.75`,
		`parley_cost_usd_total{agent="unknown",model="gpt-4o",provider="openai"} 1`,
	)
	// The dashboard charts the fallback at its time, and counts it with
	// the model that failed.
	if got := m.Fallbacks(); len(got) != 1 || !got[0].Equal(now) {
		t.Fatalf("fallback times %v, want [%v]", got, now)
	}
	counted := -1
	for _, st := range m.ModelStats() {
		if st.Provider == "openai" && st.Model == "gpt-4o" {
			counted = st.Fallbacks
		}
	}
	if counted != 1 {
		t.Fatalf("the failed model's fallbacks: %d, want 1 (%+v)", counted, m.ModelStats())
	}
}

// Every metric the shipped Grafana dashboard and Prometheus alert rules
// name is one parley's /metrics exposes, once each series has been
// touched.
func TestDeployFilesNameExposedMetrics(t *testing.T) {
	m := New()
	touchEverything(m)
	body := scrape(t, m)
	exposed := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(name)
			exposed[f[0]] = true
			if f[1] == "histogram" || f[1] == "summary" {
				for _, s := range []string{"_bucket", "_count", "_sum"} {
					exposed[f[0]+s] = true
				}
			}
		}
	}
	named := regexp.MustCompile(`\b(?:parley|go|process)_[a-z_]+\b`)
	for _, path := range []string{"../deploy/grafana/parley.json", "../deploy/prometheus/alerts.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(path, ".json") {
			var dash struct {
				Panels []json.RawMessage `json:"panels"`
			}
			if err := json.Unmarshal(b, &dash); err != nil || len(dash.Panels) == 0 {
				t.Fatalf("%s: not a dashboard (%v)", path, err)
			}
		}
		var names []string
		for _, n := range named.FindAllString(string(b), -1) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if len(names) < 10 {
			t.Fatalf("%s names only %d metrics: %v", path, len(names), names)
		}
		for _, n := range names {
			if !exposed[n] {
				t.Errorf("%s names %s, which /metrics does not expose", path, n)
			}
		}
	}
	// The rules load in Prometheus's own checker (Debian's prometheus
	// package); CI installs it.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed; .ci/run installs Debian's prometheus package for it")
		}
		t.Log("promtool not found (apt-get install prometheus): the alert rules were not loaded in Prometheus's checker")
		return
	}
	if out, err := exec.Command(promtool, "check", "rules", "../deploy/prometheus/alerts.yaml").CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// touchEverything is touchAll with the families it leaves out: spend,
// fallbacks and the state gauges.
func touchEverything(m *Metrics) {
	touchAll(m)
	m.modelCall.WithLabelValues("openai", "gpt-4o", OutcomeError).Observe(1)
	m.cost.WithLabelValues("main", "openai", "gpt-4o").Add(1)
	m.fallbacks.WithLabelValues("main", "openai/gpt-4o", "openai/gpt-4o-mini").Inc()
	m.SetState(func(context.Context) (State, error) {
		return State{Channels: map[string]bool{"tg": true}, DiskFree: 1, DiskSize: 2,
			Spend: []AgentSpend{{Agent: "main", USD: 1, CapUSD: 2}}}, nil
	})
}
