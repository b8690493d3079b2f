package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// fakeCompactor records what it is asked and answers with fn.
type fakeCompactor struct {
	mu   sync.Mutex
	reqs []CompactionRequest
	fn   func(ctx context.Context, req CompactionRequest) (CompactionResult, error)
}

func (f *fakeCompactor) Compact(ctx context.Context, req CompactionRequest) (CompactionResult, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	fn := f.fn
	f.mu.Unlock()
	if fn == nil {
		return CompactionResult{Skipped: "fake"}, nil
	}
	return fn(ctx, req)
}

func (f *fakeCompactor) requests() []CompactionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]CompactionRequest(nil), f.reqs...)
}

func withCompactor(c Compactor) func(*Options) { return func(o *Options) { o.Compactor = c } }

func TestThreshold(t *testing.T) {
	cases := []struct {
		name   string
		cfg    AgentConfig
		window int
		want   int64
	}{
		{"70% by default", AgentConfig{MaxOutputTokens: 4096}, 128_000, 89_600},
		{"the configured share", AgentConfig{MaxOutputTokens: 4096, Compaction: CompactionConfig{Threshold: 0.5}}, 100_000, 50_000},
		{"the window less the reply's room when lower", AgentConfig{MaxOutputTokens: 4096, Compaction: CompactionConfig{Threshold: 0.95}}, 50_000, 45_904},
		{"the room is at most 20k", AgentConfig{MaxOutputTokens: 64_000, Compaction: CompactionConfig{Threshold: 0.95}}, 200_000, 180_000},
		{"an unset max output reserves 4096", AgentConfig{Compaction: CompactionConfig{Threshold: 1}}, 10_000, 5904},
		{"reserve_tokens sets the reply's room", AgentConfig{MaxOutputTokens: 4096, Compaction: CompactionConfig{Threshold: 0.95, ReserveTokens: 10_000}}, 50_000, 40_000},
		{"reserve_tokens past 20k", AgentConfig{MaxOutputTokens: 4096, Compaction: CompactionConfig{Threshold: 0.95, ReserveTokens: 30_000}}, 200_000, 170_000},
		{"a small window", AgentConfig{MaxOutputTokens: 4096}, 4000, 0},
		{"an unknown window", AgentConfig{}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Threshold(tc.cfg, tc.window); got != tc.want {
				t.Fatalf("Threshold = %d, want %d", got, tc.want)
			}
		})
	}
}

// seedUsage stores a user message and a reply whose provider usage says the
// context was used tokens, so the next turn's context is exactly known.
func seedUsage(t *testing.T, e *env, sess sessions.Session, used int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.store.Append(ctx, sess.ID, sessions.Message{Role: sessions.RoleUser, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Append(ctx, sess.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "hello",
		Usage: &sessions.Usage{Input: used - 10, Output: 10}}); err != nil {
		t.Fatal(err)
	}
}

// The check before a turn uses the provider's count plus the new message,
// and fires exactly at the threshold.
func TestCompactionFiresAtTheThreshold(t *testing.T) {
	cfg := AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100} // threshold 700
	for _, tc := range []struct {
		name string
		used int64
		want int
	}{
		{"one token under", 698, 0},
		{"at the threshold", 699, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeCompactor{}
			e := newEnv(t, echo.New().Then(llm.Response{Text: "ok", Usage: llm.Usage{Input: 1, Output: 1}}), withCompactor(fake))
			sess := e.cliSession()
			seedUsage(t, e, sess, tc.used)
			// "abcd" is one token: the context with it is used + 1.
			if _, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "abcd"}}}); err != nil {
				t.Fatal(err)
			}
			reqs := fake.requests()
			if len(reqs) != tc.want {
				t.Fatalf("%d compactions", len(reqs))
			}
			if tc.want == 1 && (reqs[0].When != CompactBeforeTurn || reqs[0].Used != 700 || reqs[0].Threshold != 700 ||
				reqs[0].Window != 1000 || reqs[0].SummaryModel != "echo" || reqs[0].Session.ID != sess.ID) {
				t.Fatalf("request %+v", reqs[0])
			}
		})
	}
}

// After a turn, the reply's own usage is measured; a reply that crosses the
// threshold compacts at once, unless the caller defers it.
func TestCompactionAfterTheTurn(t *testing.T) {
	cfg := AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100}
	big := llm.Response{Text: "long answer", Usage: llm.Usage{Input: 600, Output: 150}}
	fake := &fakeCompactor{fn: func(context.Context, CompactionRequest) (CompactionResult, error) {
		return CompactionResult{Compacted: true, Notice: "Summarized 4 earlier messages to free up context."}, nil
	}}
	e := newEnv(t, echo.New().Then(big).Then(big), withCompactor(fake))
	sess := e.cliSession()
	res, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := fake.requests()
	if len(reqs) != 1 || reqs[0].When != CompactAfterTurn || reqs[0].Used != 750 {
		t.Fatalf("requests %+v", reqs)
	}
	if len(res.Notices) != 1 || res.Notices[0] != "Summarized 4 earlier messages to free up context." {
		t.Fatalf("notices %q", res.Notices)
	}

	sess2 := e.session(sessions.CLIKey("u2", "a1"))
	if _, err := e.run(Request{Session: sess2, Agent: cfg, Inputs: []Input{{Text: "q"}}, DeferCompaction: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.requests()); n != 1 {
		t.Fatalf("a deferred check ran: %d compactions", n)
	}
	if _, err := e.runner.AfterTurn(context.Background(), Request{Session: sess2, Agent: cfg}); err != nil {
		t.Fatal(err)
	}
	if reqs := fake.requests(); len(reqs) != 2 || reqs[1].When != CompactAfterTurn || reqs[1].Session.ID != sess2.ID {
		t.Fatalf("requests %+v", reqs)
	}
}

// A compaction after a summary ignores the usage reported before it.
func TestUsageBeforeASummaryIsStale(t *testing.T) {
	cfg := AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100}
	e := newEnv(t, echo.New())
	sess := e.cliSession()
	seedUsage(t, e, sess, 900)
	f, err := e.runner.Forecast(context.Background(), sess, cfg)
	if err != nil || f.Used != 900 || f.Threshold != 700 || f.Window != 1000 || f.TurnsLeft != 0 {
		t.Fatalf("forecast %+v, %v", f, err)
	}
	if _, err := e.store.Compact(context.Background(), sess.ID, sessions.CompactInput{Through: 1, Expect: 1, Summary: "the user said hi"}); err != nil {
		t.Fatal(err)
	}
	f, err = e.runner.Forecast(context.Background(), sess, cfg)
	if err != nil || f.Used >= 100 || f.TurnsLeft != -1 {
		t.Fatalf("forecast after the summary %+v, %v", f, err)
	}
}

func TestForecastTurnsLeft(t *testing.T) {
	cfg := AgentConfig{MaxContextTokens: 10_000, MaxOutputTokens: 100} // threshold 7000
	e := newEnv(t, echo.New())
	sess := e.cliSession()
	for range 3 {
		// 100 + 100 tokens a turn.
		if _, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: strings.Repeat("abcd", 100)}}}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := e.runner.Forecast(context.Background(), sess, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Threshold != 7000 || f.TurnsLeft != int((f.Threshold-f.Used)/200) || f.TurnsLeft < 30 {
		t.Fatalf("forecast %+v", f)
	}
}

// A side turn stores synthetic, marked messages with only its tools and its
// settings, publishes nothing, and no later prompt includes it.
func TestSideTurn(t *testing.T) {
	model := echo.New()
	var saved []string
	note := tools.Tool{Name: "note", Description: "note a fact", Schema: []byte(`{"type":"object","properties":{"fact":{"type":"string"}},"required":["fact"]}`),
		Run: func(_ context.Context, c tools.Call) (string, error) {
			saved = append(saved, string(c.Arguments))
			return "noted", nil
		}}
	temp := 0.3
	fake := &fakeCompactor{fn: func(ctx context.Context, req CompactionRequest) (CompactionResult, error) {
		model.Then(llm.Response{ToolCalls: []llm.ToolCall{call("n1", "note", `{"fact": "likes teal"}`)}}).Then(llm.Response{Text: "done"})
		res, err := req.Side(ctx, SideTurn{Name: "test_side", Prompt: "save what matters", Tools: []tools.Tool{note}, Temperature: &temp, MaxTokens: 2048})
		if err != nil || len(res.Messages) != 4 {
			return CompactionResult{}, fmt.Errorf("side turn: %d messages, %v", len(res.Messages), err)
		}
		return CompactionResult{}, nil
	}}
	e := newEnv(t, model, withCompactor(fake))
	e.register(textTool("search", "found"))
	sub := e.bus.Subscribe()
	defer sub.Close()
	sess := e.cliSession()
	seedUsage(t, e, sess, 800)
	cfg := AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100, Tools: []string{"search"}}
	var lines []string
	onStatus := func(st Status) { lines = append(lines, st.Line()) }
	if _, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "next"}}, OnStatus: onStatus}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(lines, "|") != "compacting the conversation" {
		t.Fatalf("the channel was shown %q", lines)
	}
	if len(saved) != 1 || saved[0] != `{"fact": "likes teal"}` {
		t.Fatalf("tool calls %q", saved)
	}
	reqs := model.Requests()
	side := reqs[0]
	if len(side.Tools) != 1 || side.Tools[0].Name != "note" || side.Temperature == nil || *side.Temperature != 0.3 ||
		side.MaxTokens != 2048 || side.Messages[len(side.Messages)-1].Content != "save what matters" {
		t.Fatalf("side request %+v", side)
	}
	main := reqs[len(reqs)-1]
	if got := llmRoles(main.Messages); strings.Join(got, "|") != "user:hi|assistant:hello|user:next" {
		t.Fatalf("main prompt %q", got)
	}
	msgs := e.messages(sess.ID)
	for _, m := range msgs[3:7] {
		if !m.Synthetic || !isSide(&m) || m.Parts[0].Name != "test_side" {
			t.Fatalf("side message %+v", m)
		}
	}
	var turns int
	var order []string // the main turn's start, its compaction's status, its end
	for sub.Pending() > 0 {
		ev, _ := sub.Next(context.Background())
		switch {
		case ev.Type == EventToolStarted || ev.Type == EventToolCompleted || ev.Type == EventMessageDelta && ev.Data == "done":
			t.Fatalf("the side turn published %s %v", ev.Type, ev.Data)
		case ev.Type == EventTurnStarted || ev.Type == EventTurnFinished:
			turns++
			order = append(order, string(ev.Type))
		case ev.Type == EventStatusChanged:
			st := ev.Data.(Status)
			order = append(order, string(st.State)+":"+st.Message)
		}
	}
	if turns != 2 {
		t.Fatalf("%d turn events, want the main turn's 2", turns)
	}
	// The compaction before the turn is shown within the run, so a client
	// following the run sees it.
	if got := strings.Join(order, " | "); got != "turn.started | busy:compacting the conversation | busy: | turn.finished" {
		t.Fatalf("events %s", got)
	}
}

func TestManualCompact(t *testing.T) {
	e := newEnv(t, echo.New())
	sess := e.cliSession()
	if _, err := e.runner.Compact(context.Background(), sess, AgentConfig{}); !errors.Is(err, ErrNoCompactor) {
		t.Fatalf("Compact without a compactor = %v", err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	fake := &fakeCompactor{fn: func(ctx context.Context, req CompactionRequest) (CompactionResult, error) {
		if req.When == CompactManual {
			return CompactionResult{Compacted: true}, nil
		}
		close(entered)
		<-release
		return CompactionResult{}, nil
	}}
	e = newEnv(t, echo.New(), withCompactor(fake))
	sess = e.cliSession()
	seedUsage(t, e, sess, 900)
	cfg := AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100}
	done := make(chan error, 1)
	go func() {
		_, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "x"}}})
		done <- err
	}()
	wait(t, entered, "the turn's compaction")
	if st := e.runner.Status(sess.ID); st.State != StateBusy || st.Message != "compacting the conversation" {
		t.Errorf("status while compacting %+v", st)
	}
	if _, err := e.runner.Compact(context.Background(), sess, cfg); !errors.Is(err, ErrBusy) {
		t.Fatalf("Compact during a turn = %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := e.runner.Compact(context.Background(), sess, cfg)
	if err != nil || !res.Compacted {
		t.Fatalf("Compact = %+v, %v", res, err)
	}
	if reqs := fake.requests(); reqs[len(reqs)-1].When != CompactManual {
		t.Fatalf("requests %+v", reqs)
	}
}

// A context-length error prunes tool outputs aggressively and retries once;
// a second one fails the turn, saying what to do.
func TestContextLengthRetriesWithAggressivePruning(t *testing.T) {
	tooLong := &llm.StatusError{Provider: "openai", StatusCode: 400, Message: "too long"}
	errLen := fmt.Errorf("%w: %w", llm.ErrContextLength, tooLong)
	for _, tc := range []struct {
		name  string
		model *echo.Model
		fail  bool
	}{
		{"the retry fits", echo.New().ThenError(errLen).Then(llm.Response{Text: "ok"}), false},
		{"the retry does not", echo.New().ThenError(errLen).ThenError(errLen), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.model)
			sess := e.cliSession()
			ctx := context.Background()
			big := strings.Repeat("x", 20_000)
			for _, m := range []sessions.Message{
				{Role: sessions.RoleUser, Content: "run"},
				{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "shell", Arguments: []byte(`{}`)}}},
				{Role: sessions.RoleTool, ToolCallID: "c1", Content: big},
				{Role: sessions.RoleAssistant, Content: "a2"},
				{Role: sessions.RoleUser, Content: "u"},
				{Role: sessions.RoleAssistant, Content: "a3"},
				{Role: sessions.RoleUser, Content: "u"},
				{Role: sessions.RoleAssistant, Content: "a4"},
			} {
				if _, err := e.store.Append(ctx, sess.ID, m); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.run(Request{Session: sess, Agent: AgentConfig{MaxContextTokens: 200_000}, Inputs: []Input{{Text: "again"}}})
			reqs := tc.model.Requests()
			if len(reqs) != 2 || reqs[0].Messages[2].Content != big || !strings.Contains(reqs[1].Messages[2].Content, "were trimmed") {
				t.Fatalf("%d requests; the retry's tool result is %d characters", len(reqs), len(reqs[len(reqs)-1].Messages[2].Content))
			}
			if !tc.fail {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, llm.ErrContextLength) || !strings.Contains(err.Error(), "/compact") || !strings.Contains(err.Error(), "/reset") {
				t.Fatalf("turn = %v", err)
			}
			// Storage keeps the whole result.
			if msgs := e.messages(sess.ID); msgs[2].Content != big {
				t.Fatal("the stored tool result changed")
			}
		})
	}
}
