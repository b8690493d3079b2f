package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/stalltest"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/turns"
)

// The whole daemon compacts a conversation that outgrows its context: the
// live context becomes a summary plus the recent messages, the archive
// keeps the rest, /status forecasts, /compact answers, and
// `parley sessions compact` works on the stopped daemon's database.
func TestCompactionThroughTheDaemon(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "gateway:\n  debounce: 0s\nagents:\n  - id: default\n    max_context_tokens: 2048\n    max_output_tokens: 512\n    compaction:\n      threshold: 0.5\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := adapterstest.New()
	d, err := build(ctx, cfg, slog.New(slog.DiscardHandler), map[adapters.ID]adapters.Adapter{"tg": rec})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		d.Close()
	}
	say := func(n int, text string) string {
		t.Helper()
		in := adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "42", UserID: "7", MessageID: fmt.Sprint("m", n), Text: text, Time: time.Now()}
		if err := d.gw.Deliver(ctx, in); err != nil {
			t.Fatal(err)
		}
		wctx, c := context.WithTimeout(ctx, 20*time.Second)
		defer c()
		sent, err := rec.WaitSent(wctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return sent[n-1].Text
	}
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 10) // ~110 tokens
	for i := 1; i <= 16; i++ {
		say(i, fmt.Sprintf("message %d: %s", i, long))
	}
	key := sessions.ChatKey("telegram", "42", "7", "default")
	s, err := d.sessions.Active(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	live, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{Archived: true, Hidden: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(live) == 0 || !live[0].Summary {
		t.Fatalf("the live context doesn't start with a summary: %d messages, first %+v", len(live), live[0])
	}
	asked := 0
	for _, m := range all {
		if m.Role == sessions.RoleUser && strings.HasPrefix(m.Content, "message ") {
			asked++
		}
	}
	if asked != 16 {
		t.Fatalf("the full history holds %d of the 16 user messages", asked)
	}
	if len(all) <= len(live) {
		t.Fatalf("nothing was archived: %d live, %d in all", len(live), len(all))
	}
	if status := say(17, "/status"); !strings.Contains(status, "Compaction at ~") {
		t.Fatalf("/status has no forecast: %q", status)
	} else if n := len(regexp.MustCompile(`~\d+ (of \d+ )?tokens used|\(now ~\d+\)`).FindAllString(status, -1)); n != 1 {
		// One figure for what the session holds, not two that disagree.
		t.Fatalf("/status gives %d token counts: %q", n, status)
	}
	if got := say(18, "/compact"); !strings.HasPrefix(got, "Summarized ") && !strings.HasPrefix(got, "Nothing to compact: ") {
		t.Fatalf("/compact answered %q", got)
	}
	for i := 19; i <= 30; i++ {
		say(i, fmt.Sprintf("message %d: short", i))
	}
	stop()
	code, out, errOut := parley(t, ctx, "sessions", "compact", string(s.ID), "--config", path)
	// It says what it summarized and what it kept: the last two turns
	// (compaction.tail_turns' default), from a user message.
	if code != 0 || !strings.HasPrefix(out, "Summarized ") ||
		!strings.Contains(out, `Kept the last 2 turns (4 messages) as they are, from "message 29: short".`) {
		t.Fatalf("parley sessions compact: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := parley(t, ctx, "sessions", "compact", "01a200f4-0000-7000-8000-000000000000", "--config", path); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("an unknown session: exit %d %q", code, errOut)
	}
}

// An agent's compaction settings and timeouts reach the runner, and a
// provider's timeouts reach its client: a call to a provider that sends
// headers and nothing ends at the configured first_byte.
func TestConfiguredTimeoutsAndCompactionReachTheirUsers(t *testing.T) {
	stalled := stalltest.Stall(t, stalltest.HeadersOnly, 0)
	path, _ := writeConfig(t, "providers:\n  openai:\n    base_url: "+stalled.BaseURL()+"\n    timeouts:\n      first_byte: 150ms\n"+
		"agents:\n  - id: default\n    model: openai/gpt-test\n    timeouts:\n      idle: 30s\n"+
		"    compaction:\n      tail_turns: 3\n      tail_budget_pct: 40\n      summary_max_tokens: 2000\n      reserve_tokens: 5000\n"+
		"      retries: 0\n      flush_timeout: 20s\n      summary_timeout: 40s\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cfg.Agent("default")
	ac := turns.AgentConfig(a, sessions.CLIKey("u", "default"))
	c := ac.Compaction
	if c.TailTurns != 3 || c.TailBudgetPct != 40 || c.SummaryMaxTokens != 2000 || c.ReserveTokens != 5000 || c.Retries == nil ||
		*c.Retries != 0 || c.FlushTimeout != 20*time.Second || c.SummaryTimeout != 40*time.Second || ac.Timeouts.Idle != 30*time.Second {
		t.Fatalf("agent config %+v", ac)
	}
	m, err := turns.Models(cfg)("openai/gpt-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = m.Stream(ctx, llm.Request{Model: "gpt-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}, nil)
	var te *llm.TimeoutError
	if !errors.As(err, &te) || te.Phase != llm.PhaseFirstByte || te.After != 150*time.Millisecond {
		t.Fatalf("a call to the stalled provider: %v; want its configured 150ms first-byte timeout", err)
	}
}
