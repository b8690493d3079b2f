package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

func TestRunPlainReplyIsPersistedInOrder(t *testing.T) {
	model := echo.New().Then(llm.Response{Text: "hello back", Usage: llm.Usage{Input: 11, Output: 3, Reasoning: 2, CacheRead: 5, CacheWrite: 7}})
	e := newEnv(t, model)
	sub := e.bus.Subscribe(EventTurnStarted, EventMessageDelta, EventTurnFinished)
	defer sub.Close()
	sess := e.cliSession()

	res, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hello"}, {Text: "again"}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Reply != "hello back" || res.Steps != 1 || res.Aborted {
		t.Errorf("Result = %+v", res)
	}
	msgs := e.messages(sess.ID)
	want := []string{"user:hello", "user:again", "assistant:hello back"}
	if got := roles(msgs); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("log = %q, want %q", got, want)
	}
	if len(res.Messages) != 3 || res.Messages[2].ID != msgs[2].ID {
		t.Errorf("Result.Messages = %v, want the 3 appended messages", roles(res.Messages))
	}
	a := msgs[2]
	wantUsage := sessions.Usage{Input: 11, Output: 3, Reasoning: 2, CacheRead: 5, CacheWrite: 7}
	if a.Usage == nil || *a.Usage != wantUsage || a.Model != "echo" {
		t.Errorf("assistant usage = %+v model %q, want %+v echo", a.Usage, a.Model, wantUsage)
	}
	got, err := e.store.Session(context.Background(), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Rollup
	if r.PromptTokens != 11 || r.CompletionTokens != 3 || r.ReasoningTokens != 2 || r.CacheRead != 5 || r.CacheWrite != 7 {
		t.Errorf("rollup = %+v", r)
	}
	if st := e.runner.Status(sess.ID); st.State != StateIdle {
		t.Errorf("status = %+v, want idle", st)
	}
	var types []string
	var text string
	for sub.Pending() > 0 {
		ev, err := sub.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ev.SessionID != string(sess.ID) {
			t.Errorf("event %s for session %q", ev.Type, ev.SessionID)
		}
		if ev.Type == EventMessageDelta {
			text += ev.Data.(string)
			continue
		}
		types = append(types, string(ev.Type))
	}
	if strings.Join(types, ",") != "turn.started,turn.finished" || text != "hello back" {
		t.Errorf("events = %v, deltas %q", types, text)
	}
}

func TestToolResultsAreRecordedInCallOrder(t *testing.T) {
	model := echo.New().
		Then(llm.Response{Text: "checking", ToolCalls: []llm.ToolCall{call("c1", "slow", `{}`), call("c2", "fast", `{}`)}}).
		Then(llm.Response{Text: "done"})
	e := newEnv(t, model)
	fastDone := make(chan struct{})
	e.register(
		tools.Tool{Name: "slow", Run: func(ctx context.Context, c tools.Call) (string, error) {
			select { // finishes only after fast has
			case <-fastDone:
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(5 * time.Second):
				return "", errors.New("fast never finished: tools are not concurrent")
			}
			return "slow result", nil
		}},
		tools.Tool{Name: "fast", Run: func(_ context.Context, c tools.Call) (string, error) {
			defer close(fastDone)
			if c.ID != "c2" || c.Key.Surface != "cli" {
				return "", fmt.Errorf("call = %+v", c)
			}
			return "fast result", nil
		}},
	)
	sess := e.cliSession()
	res, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"slow", "fast"}}, Inputs: []Input{{Text: "go"}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"user:go", "assistant:checking call(c1 slow) call(c2 fast)",
		"tool[c1]:slow result", "tool[c2]:fast result", "assistant:done"}
	if got := roles(e.messages(sess.ID)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := llmRoles(model.Requests()[1].Messages); strings.Join(got, "|") != strings.Join(want[:4], "|") {
		t.Errorf("second request = %q, want %q", got, want[:4])
	}
	if res.Reply != "done" || res.Steps != 2 {
		t.Errorf("Result = %+v", res)
	}
}

func TestToolConcurrencyIsCapped(t *testing.T) {
	const n = 12
	var calls []llm.ToolCall
	for i := range n {
		calls = append(calls, call(fmt.Sprintf("c%d", i), "block", fmt.Sprintf(`{"i":%d}`, i)))
	}
	model := echo.New().Then(llm.Response{ToolCalls: calls}).Then(llm.Response{Text: "ok"})
	e := newEnv(t, model)
	var running, peak atomic.Int32
	started := make(chan struct{}, n)
	release := make(chan struct{})
	e.register(tools.Tool{Name: "block", Run: func(ctx context.Context, c tools.Call) (string, error) {
		now := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		started <- struct{}{}
		select {
		case <-release:
			return "done " + c.ID, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}})
	sess := e.cliSession()
	errc := make(chan error, 1)
	go func() {
		_, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"block"}}, Inputs: []Input{{Text: "go"}}})
		errc <- err
	}()
	for i := range MaxParallelTools {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d tools started", i)
		}
	}
	select { // no 11th may start while ten hold their slots
	case <-started:
		t.Fatalf("more than %d tools ran at once", MaxParallelTools)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if p := peak.Load(); p != MaxParallelTools {
		t.Errorf("peak concurrency = %d, want %d", p, MaxParallelTools)
	}
	msgs := e.messages(sess.ID)
	for i := range n {
		if m := msgs[2+i]; m.ToolCallID != fmt.Sprintf("c%d", i) || m.Content != "done "+m.ToolCallID {
			t.Errorf("result %d = %s %q", i, m.ToolCallID, m.Content)
		}
	}
}

func TestMaxStepsCap(t *testing.T) {
	var n atomic.Int32
	model := echo.New(echo.WithScript(func(llm.Request) (llm.Response, error) {
		i := n.Add(1)
		return llm.Response{Text: fmt.Sprintf("step %d", i), ToolCalls: []llm.ToolCall{call(fmt.Sprintf("c%d", i), "ping", fmt.Sprintf(`{"n":%d}`, i))}}, nil
	}))
	e := newEnv(t, model)
	e.register(textTool("ping", "pong"))
	sess := e.cliSession()
	res, err := e.run(Request{Session: sess, Agent: AgentConfig{MaxSteps: 3, Tools: []string{"ping"}}, Inputs: []Input{{Text: "loop"}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := len(model.Requests()); got != 3 || res.Steps != 3 {
		t.Fatalf("model calls = %d, steps %d; want 3", got, res.Steps)
	}
	msgs := e.messages(sess.ID)
	last := msgs[len(msgs)-1]
	if last.Role != sessions.RoleAssistant || !last.Synthetic || !strings.Contains(last.Content, "3 steps") {
		t.Errorf("last message = %+v, want the synthetic step limit note", last)
	}
	if prev := msgs[len(msgs)-2]; prev.Role != sessions.RoleTool || prev.ToolCallID != "c3" {
		t.Errorf("the last step's call has no result: %+v", prev)
	}
	if !strings.Contains(res.Reply, "step 3") || !strings.Contains(res.Reply, "3 steps") {
		t.Errorf("Reply = %q", res.Reply)
	}
}

func TestDoomLoopWarning(t *testing.T) {
	tests := []struct {
		name  string
		args  []string // one call per step, then a text reply
		warns int      // warnings in the log
		at    int      // request index that first carries the warning; -1 for none
	}{
		{"three identical", []string{`{"a":1,"b":2}`, `{"b": 2, "a": 1}`, `{"a":1,"b":2}`}, 1, 3},
		{"once per streak", []string{`{"a":1}`, `{"a":1}`, `{"a":1}`, `{"a":1}`, `{"a":1}`}, 1, 3},
		{"new streak warns again", []string{`{"a":1}`, `{"a":1}`, `{"a":1}`, `{"a":2}`, `{"a":2}`, `{"a":2}`}, 2, 3},
		{"different arguments", []string{`{"a":1}`, `{"a":2}`, `{"a":1}`}, 0, -1},
		{"two identical", []string{`{"a":1}`, `{"a":1}`}, 0, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := echo.New()
			for i, a := range tc.args {
				model.Then(llm.Response{ToolCalls: []llm.ToolCall{call(fmt.Sprintf("c%d", i), "ping", a)}})
			}
			model.Then(llm.Response{Text: "ok"})
			e := newEnv(t, model)
			e.register(textTool("ping", "pong"))
			sess := e.cliSession()
			if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"ping"}}, Inputs: []Input{{Text: "go"}}}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			warns := 0
			for _, m := range e.messages(sess.ID) {
				if m.Role == sessions.RoleSystem && m.Synthetic && strings.Contains(m.Content, "same arguments") {
					warns++
				}
			}
			if warns != tc.warns {
				t.Errorf("warnings = %d, want %d", warns, tc.warns)
			}
			for i, req := range model.Requests() {
				has := false
				for _, m := range req.Messages {
					has = has || (m.Role == llm.RoleSystem && strings.Contains(m.Content, "same arguments"))
				}
				if want := tc.at >= 0 && i >= tc.at; has != want {
					t.Errorf("request %d carries the warning = %v, want %v", i, has, want)
				}
			}
		})
	}
}

func TestRetryStatus(t *testing.T) {
	model := echo.New().ThenError(&llm.StatusError{Provider: "test", StatusCode: 429, Message: "slow down"})
	var seen []Status
	var e *env
	var id sessions.ID
	e = newEnv(t, model, func(o *Options) {
		o.Retry = llm.RetryPolicy{Base: 2 * time.Second, Max: 2 * time.Second,
			Sleep: func(context.Context, time.Duration) error { seen = append(seen, e.runner.Status(id)); return nil }}
	})
	sess := e.cliSession()
	id = sess.ID
	res, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hi"}}})
	if err != nil || res.Reply != "hi" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(seen) != 1 {
		t.Fatalf("retries = %d, want 1", len(seen))
	}
	st := seen[0]
	if st.State != StateRetrying || st.Attempt != 1 || !strings.Contains(st.Message, "provider returned 429") ||
		!strings.Contains(st.Message, "(attempt 1)") || !st.StartedAt.Equal(testNow) {
		t.Errorf("status while retrying = %+v", st)
	}
	if st := e.runner.Status(id); st.State != StateIdle {
		t.Errorf("status after = %+v, want idle", st)
	}
}

func TestModelErrorSetsErrorStatus(t *testing.T) {
	fail := &llm.StatusError{Provider: "test", StatusCode: 500, Message: "down"}
	model := echo.New().ThenError(fail).ThenError(fail)
	e := newEnv(t, model, func(o *Options) {
		o.Retry = llm.RetryPolicy{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}
	})
	sess := e.cliSession()
	_, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hi"}}})
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 {
		t.Fatalf("Run error = %v, want the 500 StatusError", err)
	}
	if st := e.runner.Status(sess.ID); st.State != StateError || st.Message != err.Error() {
		t.Errorf("status = %+v, want error with %q", st, err)
	}
	if got := roles(e.messages(sess.ID)); len(got) != 1 || got[0] != "user:hi" {
		t.Errorf("log = %q, want only the user message", got)
	}
}

func TestConcurrentRunOfOneSessionIsBusy(t *testing.T) {
	model := echo.New().Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "block", `{}`)}}) // then echoes
	e := newEnv(t, model)
	started, release := make(chan struct{}), make(chan struct{})
	e.register(tools.Tool{Name: "block", Run: func(ctx context.Context, _ tools.Call) (string, error) {
		close(started)
		<-release
		return "done", nil
	}})
	sess := e.cliSession()
	errc := make(chan error, 1)
	go func() {
		_, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"block"}}, Inputs: []Input{{Text: "first"}}})
		errc <- err
	}()
	wait(t, started, "the first run's tool")
	if st := e.runner.Status(sess.ID); st.State != StateBusy || !st.StartedAt.Equal(testNow) {
		t.Errorf("status while running = %+v", st)
	}
	if _, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "second"}}}); !errors.Is(err, ErrBusy) {
		t.Errorf("second Run = %v, want ErrBusy", err)
	}
	other := e.session(sessions.ChatKey("telegram", "42", "u2", "a1"))
	if res, err := e.run(Request{Session: other, Inputs: []Input{{Text: "elsewhere"}}}); err != nil || res.Reply != "elsewhere" {
		t.Errorf("other session Run = %+v, %v", res, err)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("first Run: %v", err)
	}
	for _, m := range e.messages(sess.ID) {
		if m.Content == "second" {
			t.Error("the refused run persisted its input")
		}
	}
}

func TestSteeringJoinsAtStepBoundary(t *testing.T) {
	model := echo.New().Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "ping", `{}`)}}).Then(llm.Response{Text: "ok"})
	e := newEnv(t, model)
	e.register(textTool("ping", "pong"))
	sub := e.bus.Subscribe(EventTurnStarted, EventTurnJoined, EventTurnFinished)
	defer sub.Close()
	sess := e.cliSession()
	var asked int
	steer := func() []Input {
		asked++
		if asked == 1 {
			return []Input{{Text: "also this", RunID: "run-b"}}
		}
		return nil
	}
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"ping"}}, Inputs: []Input{{Text: "go", RunID: "run-a"}}, Steer: steer}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The events name the run ids of the inputs: those it began with, and
	// those that joined it.
	var seen []string
	for sub.Pending() > 0 {
		ev, err := sub.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		switch d := ev.Data.(type) {
		case TurnStarted:
			seen = append(seen, fmt.Sprint("started ", d.RunIDs))
		case TurnJoined:
			seen = append(seen, fmt.Sprint("joined ", d.RunIDs))
		case TurnFinished:
			seen = append(seen, fmt.Sprint("finished ", d.RunIDs))
		}
	}
	if got := strings.Join(seen, ", "); got != "started [run-a], joined [run-b], finished [run-a run-b]" {
		t.Errorf("events: %s", got)
	}
	want := []string{"user:go", "assistant: call(c1 ping)", "tool[c1]:pong", "user:also this", "assistant:ok"}
	if got := roles(e.messages(sess.ID)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("log = %q, want %q", got, want)
	}
	reqs := model.Requests()
	if got := llmRoles(reqs[1].Messages); strings.Join(got, "|") != strings.Join(want[:4], "|") {
		t.Errorf("second request = %q, want %q", got, want[:4])
	}
	if len(reqs[0].Messages) != 1 || asked != 1 {
		t.Errorf("first request has %d messages, steer asked %d times; want 1 and 1", len(reqs[0].Messages), asked)
	}
}

// readsStore notes the options of every history read.
type readsStore struct {
	sessions.Store
	mu    sync.Mutex
	reads []sessions.MessagesOptions
}

func (s *readsStore) Messages(ctx context.Context, id sessions.ID, opts sessions.MessagesOptions) ([]sessions.Message, error) {
	s.mu.Lock()
	s.reads = append(s.reads, opts)
	s.mu.Unlock()
	return s.Store.Messages(ctx, id, opts)
}

// A turn reads its prompt as the append of its last input left the
// session (which the store may hold already), and that only once: every
// other read of the turn checks the database.
func TestTurnReadsItsPromptAfterItsOwnAppend(t *testing.T) {
	model := echo.New().
		Then(llm.Response{Text: "checking", ToolCalls: []llm.ToolCall{call("c1", "look", `{}`)}}).
		Then(llm.Response{Text: "first"}).
		Then(llm.Response{Text: "second"})
	var rs *readsStore
	e := newEnv(t, model, func(o *Options) {
		rs = &readsStore{Store: o.Store}
		o.Store = rs
	})
	e.register(textTool("look", "seen"))
	sess := e.cliSession()
	for turn, inputs := range [][]Input{{{Text: "one"}, {Text: "two"}}, {{Text: "three"}}} {
		rs.mu.Lock()
		rs.reads = nil
		rs.mu.Unlock()
		res, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"look"}}, Inputs: inputs})
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		rs.mu.Lock()
		reads := slices.Clone(rs.reads)
		rs.mu.Unlock()
		if len(reads) == 0 {
			t.Fatalf("turn %d read no history", turn)
		}
		if want := res.Messages[len(inputs)-1].ID; reads[0].AfterAppend != want {
			t.Errorf("turn %d's first read named %q; want its last input %q", turn, reads[0].AfterAppend, want)
		}
		for i, r := range reads[1:] {
			if r.AfterAppend != "" {
				t.Errorf("turn %d's read %d named %q; only the first may", turn, i+1, r.AfterAppend)
			}
		}
		if got := llmRoles(model.Requests()[len(model.Requests())-1].Messages); !slices.Contains(got, "user:"+inputs[len(inputs)-1].Text) {
			t.Errorf("turn %d's last request %q lacks its input", turn, got)
		}
	}
}

// After a compaction before the turn, the prompt is read again from the
// database: that read is not the one right after the turn's append.
func TestTurnRereadsAfterCompactionFromTheDatabase(t *testing.T) {
	cfg := AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100} // threshold 700
	fake := &fakeCompactor{fn: func(context.Context, CompactionRequest) (CompactionResult, error) {
		return CompactionResult{Compacted: true}, nil
	}}
	var rs *readsStore
	e := newEnv(t, echo.New().Then(llm.Response{Text: "ok", Usage: llm.Usage{Input: 1, Output: 1}}), withCompactor(fake),
		func(o *Options) {
			rs = &readsStore{Store: o.Store}
			o.Store = rs
		})
	sess := e.cliSession()
	seedUsage(t, e, sess, 699)
	rs.mu.Lock()
	rs.reads = nil
	rs.mu.Unlock()
	res, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "abcd"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.requests()) != 1 {
		t.Fatalf("%d compactions; want the one before the turn", len(fake.requests()))
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.reads) < 2 || rs.reads[0].AfterAppend != res.Messages[0].ID {
		t.Fatalf("reads %+v; want the first after the input %s, then one after the compaction", rs.reads, res.Messages[0].ID)
	}
	for i, r := range rs.reads[1:] {
		if r.AfterAppend != "" {
			t.Errorf("read %d after the compaction named %q", i+1, r.AfterAppend)
		}
	}
}

// The reasoning blocks a response carries go back with its assistant
// message in the next request of the turn (Anthropic requires them after
// extended thinking with tool use).
func TestThinkingGoesBackWithinTheTurn(t *testing.T) {
	thinking := []llm.Thinking{{Text: "call ping", Signature: "sig"}, {Redacted: "enc"}}
	model := echo.New().
		Then(llm.Response{Thinking: thinking, ToolCalls: []llm.ToolCall{call("c1", "ping", `{}`)}}).
		Then(llm.Response{Text: "done"})
	e := newEnv(t, model)
	e.register(textTool("ping", "pong"))
	if _, err := e.run(Request{Session: e.cliSession(), Agent: AgentConfig{Tools: []string{"ping"}}, Inputs: []Input{{Text: "go"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	msgs := model.Requests()[1].Messages
	var got []llm.Thinking
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			got = m.Thinking
		}
	}
	if len(got) != 2 || got[0] != thinking[0] || got[1] != thinking[1] {
		t.Errorf("assistant message thinking = %+v, want %+v", got, thinking)
	}
}
