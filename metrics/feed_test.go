package metrics

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

const secretText = "sk-live-SECRET my private message"

func TestFeed(t *testing.T) {
	m := New()
	bus := events.New()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	evs := []events.Event{
		// s1: an ok turn of 3s with one model call.
		{Type: agent.EventTurnStarted, SessionID: "s1", At: at(0), Data: agent.TurnStarted{AgentID: "main", Model: "openai/gpt-4o-mini"}},
		{Type: sessions.EventMessageAppended, SessionID: "s1", At: at(time.Second), Data: sessions.MessageAppended{Message: sessions.Message{
			Role: sessions.RoleUser, Content: secretText}}},
		{Type: sessions.EventMessageAppended, SessionID: "s1", At: at(2 * time.Second), Data: sessions.MessageAppended{Message: sessions.Message{
			Role: sessions.RoleAssistant, Content: secretText, Model: "openai/gpt-4o-mini",
			Usage: &sessions.Usage{Input: 100, Output: 20, Reasoning: 5, CacheRead: 50, CacheWrite: 7}}}},
		{Type: agent.EventTurnFinished, SessionID: "s1", At: at(3 * time.Second), Data: agent.TurnFinished{Steps: 1, Usage: llm.Usage{Input: 100}}},
		// s2: aborted after 500ms; its data comes as pointers.
		{Type: agent.EventTurnStarted, SessionID: "s2", At: at(0), Data: &agent.TurnStarted{AgentID: "helper", Model: "echo"}},
		{Type: sessions.EventMessageAppended, SessionID: "s2", At: at(0), Data: &sessions.MessageAppended{Message: sessions.Message{
			Role: sessions.RoleAssistant, Model: "echo", Usage: &sessions.Usage{Input: 3, Output: 4}}}},
		{Type: agent.EventTurnFinished, SessionID: "s2", At: at(500 * time.Millisecond), Data: &agent.TurnFinished{Aborted: true, Error: "context canceled"}},
		// s3: failed after 1.5s; the error text must not become a label.
		{Type: agent.EventTurnStarted, SessionID: "s3", At: at(0), Data: agent.TurnStarted{AgentID: "main"}},
		{Type: agent.EventTurnFinished, SessionID: "s3", At: at(1500 * time.Millisecond), Data: agent.TurnFinished{Error: "model openai/x: 401 " + secretText}},
		// s4: failed before it started.
		{Type: agent.EventTurnFinished, SessionID: "s4", At: at(0), Data: agent.TurnFinished{Error: "store: " + secretText}},
		// s5: an agent id that is not an id.
		{Type: agent.EventTurnStarted, SessionID: "s5", At: at(0), Data: agent.TurnStarted{AgentID: secretText}},
		{Type: agent.EventTurnFinished, SessionID: "s5", At: at(time.Second), Data: agent.TurnFinished{}},
		{Type: memory.EventContextCompacted, SessionID: "s1", At: at(4 * time.Second), Data: memory.ContextCompacted{
			Trigger: agent.CompactAfterTurn, Duration: 2 * time.Second, Model: "openai/gpt-4o-mini",
			Usage: &sessions.Usage{Input: 900, Output: 80}}},
		{Type: memory.EventContextCompacted, SessionID: "s2", At: at(4 * time.Second), Data: memory.ContextCompacted{
			Trigger: agent.CompactManual, Duration: 40 * time.Second}},
		// Not fed: filtered by the subscription.
		{Type: agent.EventMessageDelta, SessionID: "s1", At: at(0), Data: secretText},
	}
	// Feed counts from when it is called: everything published before its
	// loop runs is counted too.
	handled := make(chan struct{}, len(evs))
	m.afterEvent = func() { handled <- struct{}{} }
	run := m.Feed(bus)
	for _, e := range evs {
		bus.Publish(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	waitHandled(t, handled, len(evs)-1)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("feed returned %v after cancel, want nil", err)
	}

	body := scrape(t, m)
	wantLines(t, body,
		`parley_turns_total{agent="main",outcome="ok"} 1`,
		`parley_turns_total{agent="main",outcome="error"} 1`,
		`parley_turns_total{agent="helper",outcome="aborted"} 1`,
		`parley_turns_total{agent="unknown",outcome="error"} 1`,
		`parley_turns_total{agent="other",outcome="ok"} 1`,
		`parley_turn_duration_seconds_sum{agent="main",outcome="ok"} 3`,
		`parley_turn_duration_seconds_count{agent="main",outcome="ok"} 1`,
		`parley_turn_duration_seconds_bucket{agent="main",outcome="ok",le="2.5"} 0`,
		`parley_turn_duration_seconds_bucket{agent="main",outcome="ok",le="5"} 1`,
		`parley_turn_duration_seconds_sum{agent="helper",outcome="aborted"} 0.5`,
		`parley_turn_duration_seconds_sum{agent="main",outcome="error"} 1.5`,
		// The turn's model call and the compaction's summary.
		`parley_tokens_total{kind="prompt",model="gpt-4o-mini",provider="openai"} 1000`,
		`parley_tokens_total{kind="completion",model="gpt-4o-mini",provider="openai"} 100`,
		`parley_tokens_total{kind="reasoning",model="gpt-4o-mini",provider="openai"} 5`,
		`parley_tokens_total{kind="cache_read",model="gpt-4o-mini",provider="openai"} 50`,
		`parley_tokens_total{kind="cache_write",model="gpt-4o-mini",provider="openai"} 7`,
		`parley_tokens_total{kind="prompt",model="echo",provider="echo"} 3`,
		`parley_tokens_total{kind="completion",model="echo",provider="echo"} 4`,
		`parley_compactions_total{trigger="after_turn"} 1`,
		`parley_compactions_total{trigger="manual"} 1`,
		`parley_compaction_duration_seconds_sum 42`,
		`parley_compaction_duration_seconds_count 2`,
		`parley_compaction_duration_seconds_bucket{le="2.5"} 1`,
	)
	// The turn that never started has no duration; user messages carry no
	// tokens; no text reaches a label.
	for _, bad := range []string{`parley_turn_duration_seconds_count{agent="unknown"`, `kind="prompt",model="unknown"`, "SECRET", "private", "sk-live"} {
		if strings.Contains(body, bad) {
			t.Errorf("exposition contains %q", bad)
		}
	}
	if n := testutil.CollectAndCount(m.turns); n != 5 {
		t.Errorf("parley_turns_total has %d series, want 5", n)
	}
}

func TestFeedStopsOnCancel(t *testing.T) {
	m := New()
	bus := events.New()
	handled := startFeed(t, m, bus)
	bus.Publish(events.Event{Type: agent.EventTurnFinished, SessionID: "s", Data: agent.TurnFinished{}})
	waitHandled(t, handled, 1)
	if got := testutil.ToFloat64(m.turns.WithLabelValues("unknown", "ok")); got != 1 {
		t.Errorf("turns = %v, want 1", got)
	}
	// startFeed's cleanup checks the loop returns nil once ctx ends.
}

func TestObserveDB(t *testing.T) {
	ctx := context.Background()
	db, err := dbutil.Open(ctx, dbutil.Options{URL: t.TempDir() + "/x.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := New()
	db.Observe(m.ObserveDB())
	defer db.Observe(nil)

	for range 2 {
		if err := db.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS t (x INTEGER)")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.View(ctx, func(q dbutil.Querier) error {
		var n int
		return q.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, m)
	wantLines(t, body,
		`parley_store_wait_duration_seconds_count{op="write"} 2`,
		`parley_store_wait_duration_seconds_count{op="read"} 1`,
		`parley_store_wait_duration_seconds_bucket{op="write",le="+Inf"} 2`,
	)
}

func TestObserveDBOps(t *testing.T) {
	m := New()
	o := m.ObserveDB()
	for _, tc := range []struct {
		op   dbutil.Op
		took time.Duration
	}{
		{dbutil.OpWrite, 3 * time.Millisecond},
		{dbutil.OpRead, 200 * time.Microsecond},
		{dbutil.Op("vacuum now please"), time.Second},
	} {
		o(tc.op, time.Now(), tc.took)
	}
	wantLines(t, scrape(t, m),
		`parley_store_wait_duration_seconds_sum{op="write"} 0.003`,
		`parley_store_wait_duration_seconds_sum{op="read"} 0.0002`,
		`parley_store_wait_duration_seconds_bucket{op="write",le="0.0025"} 0`,
		`parley_store_wait_duration_seconds_bucket{op="write",le="0.005"} 1`,
		`parley_store_wait_duration_seconds_count{op="other"} 1`,
	)
}

func TestFeedForgetsStaleTurns(t *testing.T) {
	f := feeder{m: New(), started: map[string]turnStart{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxStarted {
		f.handle(events.Event{Type: agent.EventTurnStarted, SessionID: fmt.Sprint("stale", i), At: t0, Data: agent.TurnStarted{AgentID: "main"}})
	}
	f.handle(events.Event{Type: agent.EventTurnStarted, SessionID: "fresh", At: t0.Add(2 * time.Hour), Data: agent.TurnStarted{AgentID: "main"}})
	if len(f.started) != 1 {
		t.Fatalf("%d turns remembered, want only the fresh one", len(f.started))
	}
	f.handle(events.Event{Type: agent.EventTurnFinished, SessionID: "fresh", At: t0.Add(2*time.Hour + time.Second), Data: agent.TurnFinished{}})
	if got := testutil.ToFloat64(f.m.turns.WithLabelValues("main", "ok")); got != 1 || len(f.started) != 0 {
		t.Errorf("turns = %v with %d remembered, want 1 and 0", got, len(f.started))
	}
}
