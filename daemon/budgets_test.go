package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/budgets"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
)

// A session's daily token cap: the first turn is answered, the next is
// refused in plain words without calling the model, /status and the API say
// what is left, and the refusal is counted; another chat is not affected.
func TestSpendCapRefusesTheTurnPastIt(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		tg := telegramtest.NewServer()
		defer tg.Close()
		path := writeConfigAt(t, dbURL, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\nbudgets:\n  session_daily_tokens: 10\n"+
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "))
		d, _, stop := testDaemonAt(t, path, configuredChannels(t))
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		say := func(chat int64, text string, n int) string {
			t.Helper()
			tg.InjectText(chat, chat, text)
			sent, err := tg.WaitSent(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			return sent[n-1].Text
		}
		if got := say(7, "a first question that uses some tokens", 1); !strings.Contains(got, "a first question") {
			t.Fatalf("the first turn: %q", got)
		}
		calls := len(d.offline.Requests())
		if got := say(7, "a second question", 2); !strings.Contains(got, "reached today's usage limit") {
			t.Fatalf("the turn past the cap: %q", got)
		}
		if n := len(d.offline.Requests()); n != calls {
			t.Fatalf("the model was called past the cap (%d calls, was %d)", n, calls)
		}
		if got := say(7, "/status", 3); !strings.Contains(got, "Today: session 0 of 10 tokens left.") {
			t.Fatalf("/status: %q", got)
		}
		if got := say(8, "another chat", 4); !strings.Contains(got, "another chat") {
			t.Fatalf("another chat's turn: %q", got)
		}
		s, err := d.sessions.Active(ctx, sessions.ChatKey("telegram", "7", "7", "default"))
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(d.APIHandler())
		defer hs.Close()
		req, _ := http.NewRequest("GET", hs.URL+"/v1/sessions/"+string(s.ID)+"/budget", nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b budgets.Budget
		_ = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b.Limits) != 1 || !b.Limits[0].Reached || b.Limits[0].Scope != "session" || b.Limits[0].Used < 10 {
			t.Fatalf("GET budget: %d %+v", resp.StatusCode, b)
		}
		rec := httptest.NewRecorder()
		d.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if !strings.Contains(rec.Body.String(), `parley_budget_refusals_total{scope="session"} 1`) {
			t.Fatalf("the refusal isn't counted:\n%s", rec.Body.String())
		}
	})
}

// Without a cap nothing reads usage_daily, so a reply writes nothing there;
// with one (above) each reply's usage is added.
func TestUsageIsRecordedOnlyWhileACapIsSet(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		tg := telegramtest.NewServer()
		defer tg.Close()
		path := writeConfigAt(t, dbURL, "gateway:\n  debounce: 0s\n"+
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "))
		d, _, stop := testDaemonAt(t, path, configuredChannels(t))
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		tg.InjectText(7, 7, "a question that uses some tokens")
		sent, err := tg.WaitSent(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(sent[0].Text, "a question") {
			t.Fatalf("the turn: %q", sent[0].Text)
		}
		s, err := d.sessions.Active(ctx, sessions.ChatKey("telegram", "7", "7", "default"))
		if err != nil {
			t.Fatal(err)
		}
		if s.Rollup.PromptTokens+s.Rollup.CompletionTokens == 0 {
			t.Fatal("the reply reported no usage: the test proves nothing")
		}
		var n int
		if err := d.db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM usage_daily").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("usage_daily holds %d rows with no cap set", n)
		}
	})
}

// /metrics shows what an operator's alerts watch, read from the running
// daemon: its channel up, the outbox empty once a reply went, spend today
// against the agent cap and the spend counter at the configured price,
// and (SQLite) the data disk.
func TestMetricsShowTheDaemonsState(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		tg := telegramtest.NewServer()
		defer tg.Close()
		model := llmtest.NewOpenAIEcho(t, 0)
		path := writeConfigAt(t, dbURL, "gateway:\n  debounce: 0s\nbudgets:\n  agent_daily_usd: 5\n  prices:\n    - model: openai/gpt-test\n      input: 1000\n      output: 1000\n"+
			model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n"+
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "))
		_, url, stop := testDaemonAt(t, path, configuredChannels(t))
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		tg.InjectText(7, 7, "a question that costs something")
		if _, err := tg.WaitSent(ctx, 1); err != nil {
			t.Fatal(err)
		}
		replicas := "parley_replicas_live 0" // SQLite: no replicas
		if strings.HasPrefix(dbURL, "postgres") {
			replicas = "parley_replicas_live 1" // PostgreSQL: this one
		}
		want := []string{`parley_channel_up{channel="tg-main"} 1`, "parley_outbox_failed 0", replicas, "parley_replica_fenced 0",
			`parley_agent_spend_cap_usd{agent="default"} 5`, `parley_cost_usd_total{agent="default",model="gpt-test",provider="openai"}`}
		deadline := time.Now().Add(20 * time.Second)
		for {
			text := scrapeMetrics(t, url)
			missing := ""
			for _, w := range want {
				if !strings.Contains(text, w) {
					missing = w
				}
			}
			spent := strings.Contains(text, `parley_agent_spend_today_usd{agent="default"} 0.`)
			disk := strings.Contains(text, "parley_data_disk_free_bytes")
			if missing == "" && spent && strings.Contains(text, "parley_outbox_pending 0") && disk == !strings.HasPrefix(dbURL, "postgres") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("metrics after a turn: missing %q (spend counted %v, disk shown %v):\n%s", missing, spent, disk, text)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
