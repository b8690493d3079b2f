package admin

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/sessions"
)

const (
	insertInboundQuery = `INSERT INTO inbound (id, adapter, chat_id, platform_message_id, payload, status, session_id, error, received_at, updated_at)
	VALUES ($1, $2, $3, $4, '{}', $5, $6, $7, $8, $9)`
	insertOutboxQuery = `INSERT INTO outbox (id, idempotency_key, adapter, chat_id, text, status, next_attempt_at, created_at, sent_at)
	VALUES ($1, $2, 'tg', '1', 'hi', $3, $4, $4, $5)`
)

// seed stores two agents' turns, one failed message, one refused one and
// two replies (one still waiting), all within the last hour.
func seed(t *testing.T, db *dbutil.DB, now time.Time) {
	t.Helper()
	ctx := context.Background()
	store := sessions.NewStore(db, sessions.WithClock(func() time.Time { return now.Add(-time.Minute) }))
	helper, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "1", "1", "helper"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := store.Resolve(ctx, sessions.ChatKey("discord", "2", "2", "ops"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		s     sessions.ID
		model string
		u     sessions.Usage
	}{
		{helper.ID, "openai/gpt-a", sessions.Usage{Input: 100, Output: 20, CostUSD: 0.5}},
		{helper.ID, "openai/gpt-a", sessions.Usage{Input: 200, Output: 30}}, // priced by the table: 0.25
		{ops.ID, "anthropic/claude-b", sessions.Usage{Input: 10, Output: 5, CostUSD: 0.01}},
	} {
		u := m.u
		if _, err := store.Append(ctx, m.s, sessions.Message{Role: sessions.RoleAssistant, Content: "ok", Model: m.model, Usage: &u}); err != nil {
			t.Fatal(err)
		}
	}
	ms := func(d time.Duration) int64 { return dbutil.Millis(now.Add(-d)) }
	for i, row := range []struct {
		adapter, status string
		session         any
		errText         string
		received, took  time.Duration
	}{
		{"tg", "done", string(helper.ID), "", 10 * time.Minute, time.Second},
		{"tg", "done", string(helper.ID), "", 9 * time.Minute, 3 * time.Second},
		{"dc", "done", string(ops.ID), "", 8 * time.Minute, 2 * time.Second},
		{"tg", "failed", string(helper.ID), "ref x: boom", 7 * time.Minute, time.Second},
		{"tg", "done", nil, "denied: waiting for pairing", 6 * time.Minute, 0},
	} {
		if _, err := db.Write().ExecContext(ctx, insertInboundQuery, "in-"+string(rune('a'+i)), row.adapter, "c", "m-"+string(rune('a'+i)),
			row.status, row.session, row.errText, ms(row.received), ms(row.received-row.took)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Write().ExecContext(ctx, insertOutboxQuery, "o1", "k1", "sent", ms(5*time.Minute), ms(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write().ExecContext(ctx, insertOutboxQuery, "o2", "k2", "pending", ms(3*time.Minute), nil); err != nil {
		t.Fatal(err)
	}
}

func sum(vs []float64) (s float64) {
	for _, v := range vs {
		s += v
	}
	return s
}

// The charts' numbers come from the database alike on both engines: turns
// answered (not those refused or failed), time to answer, tokens and
// cost (priced by the table when the provider gave none), errors, and the
// replies waiting.
func TestReadStats(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		now := time.Now()
		seed(t, db, now)
		pricer := func(spec string, in, out int64) (float64, bool) { return 0.25, spec == "openai/gpt-a" }
		st, err := readStats(context.Background(), db, windowHours, ByAgent, now, pricer)
		if err != nil {
			t.Fatal(err)
		}
		last := len(st.Labels) - 1
		if len(st.Labels) != 24 || sum(st.Turns["helper"]) != 2 || sum(st.Turns["ops"]) != 1 || len(st.Turns) != 2 {
			t.Fatalf("turns by agent: %v", st.Turns)
		}
		if got := sum(st.Tokens["helper"]); got != 350 {
			t.Fatalf("helper's tokens: %v, want 350", got)
		}
		if got := sum(st.Cost["helper"]); math.Abs(got-0.75) > 1e-9 {
			t.Fatalf("helper's cost: %v, want 0.75 (0.5 reported, 0.25 priced)", got)
		}
		if sum(st.Errors) != 1 {
			t.Fatalf("errors: %v", st.Errors)
		}
		// The times to answer are 1, 2 and 3 s, in this hour or the one
		// before.
		known := func(vs []float64) (out float64) {
			for _, v := range vs[last-1:] {
				if !math.IsNaN(v) {
					out = math.Max(out, v)
				}
			}
			return out
		}
		p50, p95 := known(st.P50), known(st.P95)
		if !math.IsNaN(st.P50[0]) {
			t.Fatalf("a time to answer where nothing was answered: %v", st.P50[0])
		}
		// Estimated within their classes: the slowest, 3 s, is in (2 s, 3 s].
		if p50 < 0.5 || p50 > 3 || p95 <= 2 || p95 > 3 {
			t.Fatalf("p50 %v p95 %v, want within 0.5-3 s and (2, 3] s", p50, p95)
		}
		if st.Backlog[last] != 1 {
			t.Fatalf("backlog now: %v, want 1", st.Backlog[last])
		}
		byModel, err := readStats(context.Background(), db, windowDays, ByModel, now, pricer)
		if err != nil {
			t.Fatal(err)
		}
		if len(byModel.Labels) != 14 || sum(byModel.Tokens["openai/gpt-a"]) != 350 || sum(byModel.Tokens["anthropic/claude-b"]) != 15 {
			t.Fatalf("tokens by model: %v", byModel.Tokens)
		}
		byChannel, err := readStats(context.Background(), db, windowHours, ByChannel, now, pricer)
		if err != nil {
			t.Fatal(err)
		}
		if sum(byChannel.Tokens["telegram"]) != 350 || sum(byChannel.Turns["telegram"]) != 2 || sum(byChannel.Turns["discord"]) != 1 {
			t.Fatalf("by channel: tokens %v turns %v", byChannel.Tokens, byChannel.Turns)
		}
	})
}

// The new pages answer on both engines with what they are for; their
// tables sort by the links' column.
func TestDashboardPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		now := time.Now()
		seed(t, db, now)
		cfg := config.Default()
		cfg.Agents = []config.Agent{{ID: "helper", Model: "openai/gpt-a", FallbackModels: []string{"echo"}, Tools: []string{"memory_search"}},
			{ID: "ops", Model: "anthropic/claude-b"}}
		cfg.Providers = llm.ProvidersConfig{"openai": {APIKey: "sk-secret-key-value", BaseURL: "https://user:pw@llm.example/v1", MaxConcurrent: 4}}
		cfg.Adapters = []config.Adapter{{ID: "tg", Type: "telegram"}}
		cfg.Budgets.Prices = []config.Price{{Model: "openai/gpt-a", Input: 1000, Output: 1000}} // 200 in, 30 out: $0.23
		m := metrics.New()
		h, err := Handler(Options{Tokens: []string{testToken}, DB: db, Sessions: sessions.NewStore(db), Outbox: gateway.NewStore(db, nil),
			Config: func() *config.Config { return cfg }, Models: m.ModelStats, Fallbacks: m.Fallbacks, Now: func() time.Time { return now },
			Replicas: func(context.Context) ([]cluster.Replica, error) {
				return []cluster.Replica{{ID: "r1", Name: "alpha", Host: "h1", Channels: []string{"tg", "dc"}, Self: true, Started: now.Add(-time.Hour)},
					{ID: "r2", Name: "beta", Host: "h2", Started: now}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		get := func(path string) string {
			t.Helper()
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d\n%s", path, resp.StatusCode, b)
			}
			return string(b)
		}
		page := get("/admin/usage?range=24h&by=agent")
		for _, want := range []string{`id="chart-turns"`, `id="chart-latency"`, `id="chart-tokens"`, `id="chart-cost"`, `id="chart-errors"`, `id="chart-backlog"`,
			"helper: 2 in all", "<td>helper</td>"} {
			if !strings.Contains(page, want) {
				t.Fatalf("usage page without %q:\n%s", want, page)
			}
		}
		// A person no pairing named is named by their latest message.
		if _, err := db.Write().ExecContext(context.Background(), `INSERT INTO inbound (id, adapter, chat_id, platform_message_id, payload, status, received_at, updated_at)
			VALUES ('named', 'tg', '1', 'n1', '{"adapter":"tg","chat_id":"1","user_id":"1","display_name":"Ann <b>"}', 'done', $1, $1)`, dbutil.Millis(now)); err != nil {
			t.Fatal(err)
		}
		if page := get("/admin/sessions"); !strings.Contains(page, "Ann &lt;b&gt; <small>(telegram:1)</small>") || !strings.Contains(page, ">discord:2<") {
			t.Fatalf("sessions by name (and an unnamed one by its key):\n%s", page)
		}
		page = get("/admin/agents")
		if !strings.Contains(page, "$0.7300") || !strings.Contains(page, "memory_search") || strings.Count(page, "its provider has no key") != 1 {
			t.Fatalf("agents page:\n%s", page)
		}
		page = get("/admin/providers")
		if !strings.Contains(page, "of 4") || strings.Contains(page, "sk-secret-key-value") || strings.Contains(page, "pw@") {
			t.Fatalf("providers page (cap, no secret):\n%s", page)
		}
		// Sorted by name descending: ops before helper.
		page = get("/admin/usage?sort=-name")
		if i, j := strings.Index(page, "<td>ops</td>"), strings.Index(page, "<td>helper</td>"); i < 0 || j < 0 || i > j {
			t.Fatalf("sorted by name descending: ops at %d, helper at %d", i, j)
		}
		if !strings.Contains(page, `aria-sort="descending"`) {
			t.Fatal("the sorted column is not marked")
		}
		// Block from the people page's form: a channel the config lacks is
		// refused with its channels named; a known one is blocked.
		post := func(path string, form url.Values) string {
			t.Helper()
			req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(form.Encode()))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, c := range resp.Cookies() {
				if c.Name == flashCookie {
					flash, _ := url.QueryUnescape(c.Value)
					return flash
				}
			}
			t.Fatalf("%s: %d without an outcome", path, resp.StatusCode)
			return ""
		}
		if flash := post("/admin/people/block", url.Values{"channel": {"nope"}, "user": {"9"}}); !strings.Contains(flash, `no channel "nope" in the config; its channels: tg`) {
			t.Fatalf("blocking on an unknown channel: %q", flash)
		}
		if flash := post("/admin/people/block", url.Values{"channel": {"tg"}, "user": {"9"}}); !strings.HasPrefix(flash, "Blocked 9 on tg") {
			t.Fatalf("blocking: %q", flash)
		}
		if flash := post("/admin/people/revoke", url.Values{"channel": {"tg"}, "user": {"9"}}); !strings.Contains(flash, "was not approved") {
			t.Fatalf("revoking one never approved: %q", flash)
		}
		if page := get("/admin/people?state=blocked"); !strings.Contains(page, `id="person-tg-9"`) || !strings.Contains(page, "unblock") {
			t.Fatalf("the blocked person on the people page:\n%s", page)
		}
		page = get("/admin/replicas")
		if !strings.Contains(page, `<td class="held">tg, dc</td>`) || !strings.Contains(page, "(this one)") || !strings.Contains(page, `<td class="held">none</td>`) {
			t.Fatalf("replicas page (the channels each holds):\n%s", page)
		}
	})
}

// The time to answer's percentiles are read from the classes' counts,
// within the class they fall in.
func TestClassQuantile(t *testing.T) {
	counts := make([]int, len(latencyBounds)+1)
	if !math.IsNaN(classQuantile(counts, 0.5)) {
		t.Fatal("a percentile of nothing")
	}
	counts[3] = 10 // (0.5 s, 1 s]
	if got := classQuantile(counts, 0.5); got != 0.75 {
		t.Fatalf("p50 of ten in (0.5, 1]: %v, want 0.75", got)
	}
	counts[len(latencyBounds)] = 10 // past 600 s
	if got := classQuantile(counts, 0.95); got != latencyBounds[len(latencyBounds)-1] {
		t.Fatalf("p95 past every bound: %v, want the last bound", got)
	}
	if got := classQuantile(counts, 0.25); got <= 0.5 || got > 1 {
		t.Fatalf("p25: %v, want in (0.5, 1]", got)
	}
}
