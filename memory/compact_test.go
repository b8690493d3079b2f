package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/internal/syncbuf"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

const testSummary = "## Goal\nPlan the teal garden party.\n## Progress\nGuest list drafted.\n## Decisions\nSaturday afternoon.\n## Next steps\nSend the invitations."

const flushFact = "Alice's favourite colour is teal"

// compactEnv is a runner with a Compactor on a real database, driven by a
// scripted echo model: it answers the flush with one memory_write, the
// summarizer with testSummary, and everything else with an echo.
type compactEnv struct {
	t      *testing.T
	db     *dbutil.DB
	store  *sessions.SQLStore
	mem    *Store
	comp   *Compactor
	rec    *recorder
	runner *agent.Runner
	bus    *events.Bus
	model  *echo.Model
	logs   *syncBuffer
	cfg    agent.AgentConfig
	key    sessions.Key
	sess   sessions.Session

	mu           sync.Mutex
	summaryErrs  []error // answers of the next summarizer calls
	summaryReqs  []llm.Request
	flushes      int
	retryWaits   []time.Duration
	mainRequests []llm.Request // main-turn requests, oldest first

	// models answer their specs instead of model; set before any run.
	models map[string]llm.Model
}

// recorder wraps the Compactor to see each request and what the session
// looked like around it.
type recorder struct {
	c     agent.Compactor
	store *sessions.SQLStore
	mu    sync.Mutex
	calls []compactCall
}

type compactCall struct {
	req        agent.CompactionRequest
	res        agent.CompactionResult
	err        error
	liveBefore []sessions.Message
	liveAfter  []sessions.Message
}

func (r *recorder) Compact(ctx context.Context, req agent.CompactionRequest) (agent.CompactionResult, error) {
	before, _ := r.store.Messages(context.Background(), req.Session.ID, sessions.MessagesOptions{})
	res, err := r.c.Compact(ctx, req)
	after, _ := r.store.Messages(context.Background(), req.Session.ID, sessions.MessagesOptions{})
	r.mu.Lock()
	r.calls = append(r.calls, compactCall{req: req, res: res, err: err, liveBefore: before, liveAfter: after})
	r.mu.Unlock()
	return res, err
}

func (r *recorder) all() []compactCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

type syncBuffer = syncbuf.Buffer

var testWindows = map[string]int{"echo/small": 1500, "echo/tiny": 400, "echo/cheap": 1200}

func newCompactEnv(t *testing.T, open dbtest.Opener) *compactEnv {
	t.Helper()
	e := &compactEnv{t: t, db: open(t), bus: events.New(), logs: &syncBuffer{}, key: aliceKey}
	c := newClock()
	log := slog.New(slog.NewTextHandler(e.logs, nil))
	e.store = sessions.NewStore(e.db, sessions.WithClock(c.Now))
	e.mem = builtinStore(t, e.db, c)
	e.model = echo.New(echo.WithScript(e.script))
	models := func(spec string) (llm.Model, error) {
		if m, ok := e.models[spec]; ok {
			return m, nil
		}
		return e.model, nil
	}
	e.comp = NewCompactor(CompactorOptions{Sessions: e.store, Memory: e.mem, Models: models, Bus: e.bus, Log: log, Now: c.Now,
		Retry: llm.RetryPolicy{Sleep: func(_ context.Context, d time.Duration) error {
			e.mu.Lock()
			e.retryWaits = append(e.retryWaits, d)
			e.mu.Unlock()
			return nil
		}}})
	e.rec = &recorder{c: e.comp, store: e.store}
	reg := tools.NewRegistry()
	for _, tool := range Tools(e.mem) {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	e.runner = agent.New(agent.Options{Store: e.store, Models: models, DefaultModel: "echo", Tools: reg, Bus: e.bus, Log: log,
		Now: c.Now, Compactor: e.rec, ContextWindow: func(spec string) int { return testWindows[spec] },
		Retry: llm.RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}})
	// A window of 4000 tokens: compaction at 70%, 2800 tokens, about a
	// dozen turns of this test's messages.
	// Five turns of a user message and its reply are kept (the last 10
	// messages), whatever their share of the window.
	e.cfg = agent.AgentConfig{ID: aliceKey.AgentID, Prompt: "You are a test agent.", Model: "echo",
		MaxContextTokens: 4000, MaxOutputTokens: 256, Compaction: agent.CompactionConfig{TailTurns: 5, TailBudgetPct: 90}}
	var err error
	e.sess, _, err = e.store.Resolve(context.Background(), e.key, sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *compactEnv) script(req llm.Request) (llm.Response, error) {
	if req.System == summarizeSystem {
		e.mu.Lock()
		e.summaryReqs = append(e.summaryReqs, req)
		var err error
		if len(e.summaryErrs) > 0 {
			err, e.summaryErrs = e.summaryErrs[0], e.summaryErrs[1:]
		}
		e.mu.Unlock()
		if err != nil {
			return llm.Response{}, err
		}
		return llm.Response{Text: testSummary}, nil
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleUser && last.Content == FlushPrompt {
		e.mu.Lock()
		e.flushes++
		n := e.flushes
		e.mu.Unlock()
		args, _ := json.Marshal(map[string]any{"content": flushFact, "tags": []string{"preferences"}})
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("flush-%d", n), Name: WriteToolName, Arguments: args}}}, nil
	}
	if last.Role == llm.RoleTool {
		return llm.Response{Text: "done"}, nil
	}
	e.mu.Lock()
	e.mainRequests = append(e.mainRequests, req)
	e.mu.Unlock()
	return llm.Response{Text: "echo: " + last.Content}, nil
}

// say runs one turn with a message of about 100 tokens.
func (e *compactEnv) say(ctx context.Context, n int, model string) (agent.Result, error) {
	text := fmt.Sprintf("message %02d: ", n) + strings.Repeat("plans for the garden party ", 14)
	return e.runner.Run(ctx, agent.Request{Session: e.sess, Agent: e.cfg, Inputs: []agent.Input{{Text: text, Model: model}}})
}

func (e *compactEnv) mustSay(n int) agent.Result {
	e.t.Helper()
	res, err := e.say(context.Background(), n, "")
	if err != nil {
		e.t.Fatalf("turn %d: %v", n, err)
	}
	return res
}

func (e *compactEnv) live() []sessions.Message {
	e.t.Helper()
	msgs, err := e.store.Messages(context.Background(), e.sess.ID, sessions.MessagesOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

func (e *compactEnv) history() []sessions.Message {
	e.t.Helper()
	msgs, err := e.store.Messages(context.Background(), e.sess.ID, sessions.MessagesOptions{Archived: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

func (e *compactEnv) session() sessions.Session {
	e.t.Helper()
	s, err := e.store.Session(context.Background(), e.sess.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *compactEnv) count(query string) int {
	e.t.Helper()
	var n int
	if err := e.db.Reader().QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *compactEnv) summaryItems() int {
	return e.count("SELECT count(*) FROM memory_items WHERE kind = 'summary'")
}

func (e *compactEnv) archived() int { return e.count("SELECT count(*) FROM message_archive") }

// fill runs turns until the context is within one turn of the threshold.
func (e *compactEnv) fill(turns int) {
	e.t.Helper()
	for i := 1; i <= turns; i++ {
		e.mustSay(i)
	}
	if n := len(e.rec.all()); n != 0 {
		e.t.Fatalf("%d compactions while filling", n)
	}
}

func ids(msgs []sessions.Message) []sessions.MessageID {
	out := make([]sessions.MessageID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func conversation(msgs []sessions.Message) []sessions.Message {
	var out []sessions.Message
	for _, m := range msgs {
		if side, _ := sideTurn(m); !side {
			out = append(out, m)
		}
	}
	return out
}

// The whole path, end to end: a long conversation compacts at the
// threshold; the flush saves a memory; the archive holds exactly what was
// summarized (and the flush's own messages); the live context is the
// summary and the last 10; a later session finds the memory; the full
// history keeps every message.
func TestCompactionEndToEnd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		ctx := context.Background()
		sub := e.bus.Subscribe(EventContextCompacted)
		defer sub.Close()

		var appended []sessions.MessageID
		var forecast agent.Forecast
		turn := 0
		for len(e.rec.all()) == 0 {
			turn++
			if turn > 40 {
				t.Fatal("no compaction after 40 turns")
			}
			var err error
			forecast, err = e.runner.Forecast(ctx, e.sess, e.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if turn > 2 && (forecast.TurnsLeft < 0 || forecast.Threshold != 2800 || forecast.Window != 4000) {
				t.Fatalf("forecast before turn %d: %+v", turn, forecast)
			}
			res := e.mustSay(turn)
			appended = append(appended, ids(res.Messages)...)
		}
		calls := e.rec.all()
		if len(calls) != 1 {
			t.Fatalf("%d compactions", len(calls))
		}
		call := calls[0]
		if call.err != nil || !call.res.Compacted {
			t.Fatalf("compaction: %+v, %v", call.res, call.err)
		}
		// It fired at the threshold: not before it, and as soon as it was reached.
		if call.req.Threshold != 2800 || call.req.Used < call.req.Threshold || forecast.Used >= forecast.Threshold {
			t.Fatalf("compaction at %d of %d tokens (%s); the forecast before the turn said %d", call.req.Used,
				call.req.Threshold, call.req.When, forecast.Used)
		}
		if forecast.TurnsLeft > 1 {
			t.Errorf("the forecast before the compacting turn said %d turns left", forecast.TurnsLeft)
		}

		// The flush saved a memory, once.
		if e.flushes != 1 || call.res.Memories != 1 {
			t.Fatalf("%d flushes saved %d memories", e.flushes, call.res.Memories)
		}
		found := mustSearch(t, e.mem, alice, "teal colour", 5)
		if len(found) == 0 || found[0].Kind != KindMemory || found[0].Content != flushFact || found[0].SessionID != e.sess.ID {
			t.Fatalf("memory search after the flush: %+v", found)
		}

		// The live context is the summary plus the last 5 turns, from the
		// fifth-last user message on.
		before, after := conversation(call.liveBefore), call.liveAfter
		kept := turnStart(before, 5)
		if len(after) != len(before)-kept+1 || !after[0].Summary || after[0].Role != sessions.RoleSystem ||
			!strings.Contains(after[0].Content, testSummary) || after[0].ID != call.res.SummaryID {
			t.Fatalf("live context after compaction: %d messages, first %+v", len(after), after[0])
		}
		if !slices.Equal(ids(after[1:]), ids(before[kept:])) || after[1].Role != sessions.RoleUser {
			t.Fatalf("kept %v, want the last 5 turns of %v", ids(after[1:]), ids(before))
		}
		// The model's next prompt is that context.
		e.mu.Lock()
		next := e.mainRequests[len(e.mainRequests)-1]
		e.mu.Unlock()
		if next.Messages[0].Role != llm.RoleSystem || !strings.Contains(next.Messages[0].Content, testSummary) ||
			next.Messages[1].Content != before[kept].Content {
			t.Fatalf("prompt after compaction starts %q, %q", next.Messages[0].Content, next.Messages[1].Content)
		}
		for _, m := range next.Messages {
			if m.Content == FlushPrompt || strings.Contains(m.Content, "Saved memory") {
				t.Fatalf("the flush leaked into the prompt: %q", m.Content)
			}
		}

		// The archive holds exactly the summarized messages and the flush's.
		history := e.history()
		var archived, flushed []sessions.MessageID
		for _, m := range history {
			if m.Archived() {
				archived = append(archived, m.ID)
				if m.CompactionID != string(call.res.SummaryID) {
					t.Errorf("archived %s under compaction %q", m.ID, m.CompactionID)
				}
			}
			if side, name := sideTurn(m); side {
				if name != FlushTurnName || !m.Synthetic || !m.Archived() {
					t.Errorf("flush message %+v", m)
				}
				flushed = append(flushed, m.ID)
			}
		}
		want := append(ids(before[:kept]), flushed...)
		if len(flushed) != 4 || !sameIDs(archived, want) || call.res.Archived != len(want) || call.res.Summarized != kept {
			t.Fatalf("archived %d messages (%d flush), want %d; result %+v", len(archived), len(flushed), len(want), call.res)
		}

		// The full history still has every message.
		all := ids(history)
		for _, id := range appended {
			if !slices.Contains(all, id) {
				t.Fatalf("message %s missing from the full history", id)
			}
		}
		if len(history) != len(appended)+len(flushed)+1 {
			t.Fatalf("full history has %d messages, want %d appended + %d flush + the summary", len(history), len(appended), len(flushed))
		}

		// The session and the event agree.
		sess := e.session()
		if sess.CompactionSummary != after[0].Content || sess.Rollup.TokenCount >= call.res.TokensBefore ||
			call.res.TokensAfter >= call.res.TokensBefore {
			t.Fatalf("session after compaction: %+v; result %+v", sess, call.res)
		}
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		data := ev.Data.(ContextCompacted)
		if ev.SessionID != string(e.sess.ID) || data.SummaryID != call.res.SummaryID || data.Archived != call.res.Archived ||
			data.Summarized != call.res.Summarized || data.Memories != 1 || data.TokensBefore != call.res.TokensBefore ||
			data.TokensAfter != call.res.TokensAfter || data.Trigger != call.req.When || data.Model != "echo" {
			t.Fatalf("event %+v, result %+v", data, call.res)
		}
		// The summary's usage, for the token metrics, is what the summary
		// message carries.
		if data.Usage == nil || after[0].Usage == nil || *data.Usage != *after[0].Usage || data.Usage.Input == 0 {
			t.Fatalf("event usage %+v, summary message's %+v", data.Usage, after[0].Usage)
		}
		if e.summaryItems() != 1 {
			t.Fatalf("%d summaries indexed", e.summaryItems())
		}

		// A later session, after a reset, finds the memory and the summary.
		fresh, err := e.store.Reset(ctx, e.key)
		if err != nil {
			t.Fatal(err)
		}
		e.model.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "s1", Name: SearchToolName, Arguments: json.RawMessage(`{"query": "teal"}`)}}}).
			Then(llm.Response{Text: "You like teal."})
		cfg := e.cfg
		cfg.Tools = []string{SearchToolName}
		res, err := e.runner.Run(ctx, agent.Request{Session: fresh, Agent: cfg, Inputs: []agent.Input{{Text: "What colour do I like?"}}})
		if err != nil {
			t.Fatal(err)
		}
		result := res.Messages[2]
		if result.Role != sessions.RoleTool || !strings.Contains(result.Content, flushFact) ||
			!strings.Contains(result.Content, "[summary]") || !strings.Contains(result.Content, "from session "+string(e.sess.ID)) {
			t.Fatalf("memory_search in the new session returned %q", result.Content)
		}
	})
}

// turnStart is the index in msgs of the user message that starts the
// last n turns.
func turnStart(msgs []sessions.Message, n int) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == sessions.RoleUser {
			if n--; n == 0 {
				return i
			}
		}
	}
	return 0
}

func sameIDs(a, b []sessions.MessageID) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A summarizer failing with a transient error is retried twice; then the
// turn goes on without compaction, and a warning is logged. The next turn
// compacts, without a second flush.
func TestCompactionSummarizerFailureThenRecovery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		unavailable := &llm.StatusError{Provider: "echo", StatusCode: 503, Message: "overloaded"}
		e.summaryErrs = []error{unavailable, unavailable, unavailable}
		turn := 0
		for len(e.rec.all()) == 0 {
			turn++
			e.mustSay(turn)
		}
		first := e.rec.all()[0]
		if first.err != nil || first.res.Compacted || !strings.Contains(first.res.Skipped, "the summary failed") {
			t.Fatalf("first compaction: %+v, %v", first.res, first.err)
		}
		if len(e.summaryReqs) != 3 || len(e.retryWaits) != 2 || e.flushes != 1 {
			t.Fatalf("%d summarizer calls, %d retry waits, %d flushes", len(e.summaryReqs), len(e.retryWaits), e.flushes)
		}
		if logs := e.logs.String(); !strings.Contains(logs, "level=WARN msg=\"compaction skipped; the turn goes on without it\"") ||
			!strings.Contains(logs, "503") {
			t.Fatalf("no warning logged:\n%s", logs)
		}
		if e.archived() != 0 || e.summaryItems() != 0 || e.session().CompactionSummary != "" {
			t.Fatal("a failed compaction changed the session")
		}
		// The turn was answered, and nothing is lost.
		live := e.live()
		if last := live[len(live)-1]; last.Role != sessions.RoleAssistant || !strings.HasPrefix(last.Content, "echo: message") {
			t.Fatalf("the turn was not answered: %+v", last)
		}
		if got := len(conversation(live)); got != 2*turn {
			t.Fatalf("%d conversation messages after %d turns", got, turn)
		}

		// The next turn compacts; the flush does not run again, and its
		// earlier messages are archived with the rest.
		e.mustSay(turn + 1)
		calls := e.rec.all()
		if len(calls) != 2 || !calls[1].res.Compacted || e.flushes != 1 {
			t.Fatalf("%d compactions (%+v), %d flushes", len(calls), calls[len(calls)-1].res, e.flushes)
		}
		for _, m := range e.live() {
			if side, _ := sideTurn(m); side {
				t.Fatalf("flush message %s still live", m.ID)
			}
		}
	})
}

// Killed between the summary and the archive, a compaction leaves every
// message where it was; the next turn compacts.
func TestCompactionKilledBeforeArchive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.comp.afterSummary = cancel
		turn := 0
		for len(e.rec.all()) == 0 {
			turn++
			if _, err := e.say(ctx, turn, ""); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("turn %d: %v", turn, err)
			}
		}
		call := e.rec.all()[0]
		if !errors.Is(call.err, context.Canceled) || len(e.summaryReqs) != 1 {
			t.Fatalf("compaction %+v, %v; %d summarizer calls", call.res, call.err, len(e.summaryReqs))
		}
		if e.archived() != 0 || e.summaryItems() != 0 || e.session().CompactionSummary != "" {
			t.Fatal("an interrupted compaction changed the session")
		}
		// Everything that was live still is, with the flush's messages after it.
		if got := call.liveAfter; !slices.Equal(ids(got[:len(call.liveBefore)]), ids(call.liveBefore)) ||
			len(conversation(got)) != len(call.liveBefore) {
			t.Fatal("live messages changed")
		}
		e.comp.afterSummary = nil
		e.mustSay(turn + 1)
		calls := e.rec.all()
		if !calls[len(calls)-1].res.Compacted || e.flushes != 1 {
			t.Fatalf("after the interruption: %+v, %d flushes", calls[len(calls)-1].res, e.flushes)
		}
	})
}

// A failure inside the transaction, after the archive statements ran,
// rolls all of it back, the summary's memory item included.
func TestCompactionFailsInsideTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		e.cfg.MaxContextTokens = 100_000
		e.fill(8)
		before, sess := e.live(), e.session()
		e.comp.failInTx = func() error { return errors.New("injected failure before commit") }
		_, err := e.runner.Compact(context.Background(), e.sess, e.cfg)
		if err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("Compact = %v", err)
		}
		if e.archived() != 0 || e.summaryItems() != 0 {
			t.Fatalf("%d archived, %d summaries after a failed transaction", e.archived(), e.summaryItems())
		}
		after := e.live()
		if !slices.Equal(ids(conversation(after)), ids(before)) {
			t.Fatal("live conversation changed")
		}
		if got := e.session(); got.CompactionSummary != "" || got.MessageCount != sess.MessageCount+int64(len(after)-len(before)) {
			t.Fatalf("session after a failed compaction: %+v", got)
		}

		e.comp.failInTx = nil
		res, err := e.runner.Compact(context.Background(), e.sess, e.cfg)
		if err != nil || !res.Compacted || res.Summarized != 6 || e.flushes != 1 {
			t.Fatalf("Compact = %+v, %v (%d flushes)", res, err, e.flushes)
		}
	})
}

func TestCompactionGuards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		e.cfg.MaxContextTokens = 100_000
		e.mustSay(1)
		e.mustSay(2)
		_, err := e.runner.Compact(context.Background(), e.sess, e.cfg)
		if err == nil || !strings.Contains(err.Error(), "only 4 live messages; compaction needs at least 6") {
			t.Fatalf("Compact with 4 messages = %v", err)
		}
		e.mustSay(3)
		e.mustSay(4)
		_, err = e.runner.Compact(context.Background(), e.sess, e.cfg)
		if err == nil || !strings.Contains(err.Error(), "nothing older than the 5 latest turns, which are kept as they are") {
			t.Fatalf("Compact with 8 messages = %v", err)
		}
		if e.flushes != 0 || len(e.summaryReqs) != 0 || e.archived() != 0 {
			t.Fatal("a refused compaction ran")
		}

		// Over the threshold with too few messages, a turn goes on as long
		// as the history fits the window.
		e.cfg.MaxContextTokens = 1400
		if _, err := e.say(context.Background(), 5, ""); err != nil {
			t.Fatal(err)
		}
		if calls := e.rec.all(); len(calls) == 0 || calls[0].res.Compacted || calls[0].res.Skipped == "" || e.flushes != 0 {
			t.Fatalf("compactions %+v", calls)
		}
	})
}

// A turn on a model with a smaller window forces a compaction first; if
// the history still doesn't fit, the turn fails and says so.
func TestModelSwitch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		e.cfg.MaxContextTokens = 100_000
		e.fill(12)
		if _, err := e.say(context.Background(), 13, "echo/small"); err != nil {
			t.Fatal(err)
		}
		calls := e.rec.all()
		if len(calls) != 1 || !calls[0].res.Compacted || calls[0].req.When != agent.CompactBeforeTurn ||
			calls[0].req.Window != 1500 || calls[0].req.Model != "echo/small" {
			t.Fatalf("compactions %+v", calls)
		}

		e.mu.Lock()
		mainCalls := len(e.mainRequests)
		e.mu.Unlock()
		// A message that alone outgrows the tiny model's window: the
		// compaction keeps only its turn, and that still does not fit.
		long := "message 14: " + strings.Repeat("plans for the garden party ", 70)
		_, err := e.runner.Run(context.Background(), agent.Request{Session: e.sess, Agent: e.cfg,
			Inputs: []agent.Input{{Text: long, Model: "echo/tiny"}}})
		if !errors.Is(err, agent.ErrContextFull) || !strings.Contains(err.Error(), "/reset") ||
			!strings.Contains(err.Error(), "400-token window of echo/tiny") {
			t.Fatalf("turn on a too-small model = %v", err)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.mainRequests) != mainCalls {
			t.Fatal("the model was called with a history that does not fit")
		}
		// Compacted again, down to the new message's own turn, and nothing
		// dropped: the new message is live.
		if got := e.live(); len(got) != 2 || !got[0].Summary || got[1].Role != sessions.RoleUser || got[1].Content != long ||
			len(e.rec.all()) != 2 {
			t.Fatalf("live after the refused turn: %d messages", len(got))
		}
	})
}

// Over the summarizer's window: long tool outputs are pruned, the
// transcript is summarized in chunks, and the middle of what is left to
// merge is dropped.
func TestSummarizerOverItsWindow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		e.cfg.MaxContextTokens = 100_000
		e.cfg.Compaction.Model = "echo/cheap"
		e.cfg.Compaction.Notify = true
		ctx := context.Background()
		big := strings.Repeat("0123456789", 6000)
		if _, err := e.store.Append(ctx, e.sess.ID, sessions.Message{Role: sessions.RoleUser, Content: "run it"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Append(ctx, e.sess.ID, sessions.Message{Role: sessions.RoleAssistant,
			ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "shell", Arguments: json.RawMessage(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Append(ctx, e.sess.ID, sessions.Message{Role: sessions.RoleTool, ToolCallID: "c1", Content: big}); err != nil {
			t.Fatal(err)
		}
		e.fill(20)
		res, err := e.runner.Compact(ctx, e.sess, e.cfg)
		if err != nil || !res.Compacted {
			t.Fatalf("Compact = %+v, %v", res, err)
		}
		if res.Notice != "Summarized 33 earlier messages to free up context." {
			t.Fatalf("notice %q", res.Notice)
		}
		var parts, merges int
		for _, r := range e.summaryReqs {
			text := r.Messages[0].Content
			if r.Model != "cheap" || r.MaxTokens != config.DefaultSummaryMaxTokens || r.Temperature == nil || *r.Temperature != 0.3 {
				t.Fatalf("summarizer request %+v", r)
			}
			if est := sessions.EstimateTokens(text); est > inputBudget(1200)+100 {
				t.Fatalf("a summarizer call of %d tokens, over the budget of %d", est, inputBudget(1200))
			}
			switch {
			case strings.HasPrefix(text, "Summarize part "):
				parts++
				if strings.Contains(text, big[:3000]) {
					t.Fatal("the long tool output went to the summarizer whole")
				}
			case strings.HasPrefix(text, mergeInstruction):
				merges++
				if !strings.Contains(text, "middle parts left out") {
					t.Fatalf("merge without dropping the middle:\n%s", text)
				}
			}
		}
		if parts < 3 || merges != 1 {
			t.Fatalf("%d part summaries, %d merges", parts, merges)
		}
	})
}

func TestChunkAndDropMiddle(t *testing.T) {
	es := []entry{newEntry(strings.Repeat("a", 400)), newEntry(strings.Repeat("b", 400)), newEntry(strings.Repeat("c", 4000)), newEntry("d")}
	chunks := chunkEntries(es, 250)
	if len(chunks) != 2 || len(chunks[0]) != 2 || len(chunks[1]) != 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for _, ch := range chunks {
		if n := totalTokens(ch); n > 250 {
			t.Fatalf("a chunk of %d tokens", n)
		}
	}
	if !strings.Contains(chunks[1][0].text, "characters left out") {
		t.Fatalf("an entry over the budget kept its middle: %d tokens", chunks[1][0].tokens)
	}

	parts := make([]entry, 10)
	for i := range parts {
		parts[i] = newEntry(fmt.Sprintf("part %d ", i) + strings.Repeat("x", 200))
	}
	kept := dropMiddle(parts, 400)
	if n := totalTokens(kept); n > 400 {
		t.Fatalf("%d tokens after dropping the middle", n)
	}
	if !strings.HasPrefix(kept[0].text, "part 0 ") || !strings.HasPrefix(kept[len(kept)-1].text, "part 9 ") ||
		!strings.Contains(kept[len(kept)/2].text, "middle parts left out") {
		t.Fatalf("kept %d entries: %v", len(kept), kept)
	}
	if got := dropMiddle(parts[:2], 400); len(got) != 2 {
		t.Fatalf("dropped from what fits: %v", got)
	}
}

func TestNotifyAddsANotice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		e.cfg.Compaction.Notify = true
		for turn := 1; ; turn++ {
			if turn > 40 {
				t.Fatal("no compaction")
			}
			res := e.mustSay(turn)
			if len(e.rec.all()) > 0 {
				if len(res.Notices) != 1 || !strings.HasPrefix(res.Notices[0], "Summarized ") {
					t.Fatalf("notices %q", res.Notices)
				}
				return
			}
			if len(res.Notices) != 0 {
				t.Fatalf("notices %q without a compaction", res.Notices)
			}
		}
	})
}
