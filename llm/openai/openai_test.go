package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wiretest"
	"github.com/parleyd/parley/llm/openai"
)

const apiKey = "sk-test-0123456789-secret"

func chunk(delta map[string]any, finish any) string {
	return wiretest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		"usage":   nil,
	})
}

func text(s string) string { return chunk(map[string]any{"content": s}, nil) }

func usageChunk(u map[string]any) string {
	return wiretest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
		"choices": []any{}, "usage": u,
	})
}

func toolDelta(index int, id, name, args string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"] = id
		tc["type"] = "function"
		tc["function"].(map[string]any)["name"] = name
	}
	return chunk(map[string]any{"tool_calls": []any{tc}}, nil)
}

var (
	roleChunk = chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	stop      = chunk(map[string]any{}, "stop")
	done      = "data: [DONE]"
	basicUse  = usageChunk(map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13})
)

func newModel(s *wiretest.Server) *openai.Model {
	return openai.New(openai.Options{APIKey: apiKey, BaseURL: s.URL + "/v1", HTTPClient: s.Client()})
}

func userReq(content string) llm.Request {
	return llm.Request{Model: "gpt-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: content}}}
}

// collect records the deltas a Stream call reports.
type collect struct{ deltas []llm.Delta }

func (c *collect) on(d llm.Delta) { c.deltas = append(c.deltas, d) }

func (c *collect) texts() []string {
	var out []string
	for _, d := range c.deltas {
		if d.ToolCallStarted == nil {
			out = append(out, d.Text)
		}
	}
	return out
}

func assertNoKey(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), apiKey) {
		t.Errorf("error leaks the API key: %v", err)
	}
}

func TestStreamText(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSE(roleChunk, text("Hel"), text("lo, "), text("world"), stop, basicUse, done))
	temp := 0.3
	req := llm.Request{
		Model: "gpt-test", System: "be brief", Temperature: &temp, MaxTokens: 256,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
	}
	var c collect
	resp, err := newModel(s).Stream(context.Background(), req, c.on)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.texts(), "|"); got != "Hel|lo, |world" {
		t.Errorf("deltas = %q", got)
	}
	if resp.Text != "Hello, world" || resp.StopReason != llm.StopEnd || resp.Model != "gpt-test" {
		t.Errorf("resp = %+v", resp)
	}
	if want := (llm.Usage{Input: 10, Output: 3}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}

	got := s.Requests()[0]
	if got.Path != "/v1/chat/completions" {
		t.Errorf("path = %s", got.Path)
	}
	if h := got.Header.Get("Authorization"); h != "Bearer "+apiKey {
		t.Errorf("Authorization = %q", h)
	}
	body := got.JSON(t)
	if body["stream"] != true || body["model"] != "gpt-test" || body["temperature"] != 0.3 ||
		body["max_completion_tokens"] != 256.0 {
		t.Errorf("body = %s", got.Body)
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", body["stream_options"])
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages = %v", msgs)
	}
	if m := msgs[0].(map[string]any); m["role"] != "system" || m["content"] != "be brief" {
		t.Errorf("system message = %v", m)
	}
	if m := msgs[1].(map[string]any); m["role"] != "user" || m["content"] != "hi" {
		t.Errorf("user message = %v", m)
	}
}

func TestStreamToolCalls(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSE(
		roleChunk,
		toolDelta(0, "call_a", "get_weather", ""),
		toolDelta(0, "", "", `{"ci`),
		toolDelta(0, "", "", `ty":"Paris"}`),
		toolDelta(1, "call_b", "get_time", `{"tz":`),
		toolDelta(1, "", "", `"CET"}`),
		chunk(map[string]any{}, "tool_calls"), basicUse, done,
	))
	req := llm.Request{
		Model: "gpt-test",
		Tools: []llm.Tool{
			{Name: "get_weather", Description: "weather for a city", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "get_time"},
		},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "look", Images: []llm.Image{{MediaType: "image/png", Data: []byte("PNG")}}},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
			{Role: llm.RoleTool, ToolCallID: "call_0", Content: "rain"},
		},
	}
	var c collect
	resp, err := newModel(s).Stream(context.Background(), req, c.on)
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, d := range c.deltas {
		if d.ToolCallStarted != nil {
			started = append(started, d.ToolCallStarted.ID+":"+d.ToolCallStarted.Name)
		}
	}
	if got := strings.Join(started, ","); got != "call_a:get_weather,call_b:get_time" {
		t.Errorf("started = %s", got)
	}
	if resp.StopReason != llm.StopToolUse || len(resp.ToolCalls) != 2 {
		t.Fatalf("resp = %+v", resp)
	}
	want := []llm.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`{"tz":"CET"}`)},
	}
	for i, w := range want {
		g := resp.ToolCalls[i]
		if g.ID != w.ID || g.Name != w.Name || string(g.Arguments) != string(w.Arguments) {
			t.Errorf("tool call %d = %+v, want %+v", i, g, w)
		}
	}

	body := s.Requests()[0].JSON(t)
	tools := body["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if tools[0].(map[string]any)["type"] != "function" || fn["name"] != "get_weather" || fn["description"] != "weather for a city" {
		t.Errorf("tool 0 = %v", tools[0])
	}
	if req := fn["parameters"].(map[string]any)["required"].([]any); req[0] != "city" {
		t.Errorf("tool 0 parameters = %v", fn["parameters"])
	}
	if p := tools[1].(map[string]any)["function"].(map[string]any)["parameters"].(map[string]any); p["type"] != "object" {
		t.Errorf("tool without schema gets parameters %v", p)
	}
	msgs := body["messages"].([]any)
	parts := msgs[0].(map[string]any)["content"].([]any)
	if img := parts[1].(map[string]any); img["type"] != "image_url" || img["image_url"].(map[string]any)["url"] != "data:image/png;base64,UE5H" {
		t.Errorf("image part = %v", img)
	}
	asst := msgs[1].(map[string]any)
	tc := asst["tool_calls"].([]any)[0].(map[string]any)
	if asst["role"] != "assistant" || tc["id"] != "call_0" || tc["function"].(map[string]any)["arguments"] != `{"city":"Oslo"}` {
		t.Errorf("assistant message = %v", asst)
	}
	if tr := msgs[2].(map[string]any); tr["role"] != "tool" || tr["tool_call_id"] != "call_0" || tr["content"] != "rain" {
		t.Errorf("tool result = %v", tr)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name  string
		usage map[string]any
		want  llm.Usage
	}{
		{"plain", map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
			llm.Usage{Input: 100, Output: 20}},
		{"cached and reasoning", map[string]any{
			"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 800},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 250},
		}, llm.Usage{Input: 200, Output: 50, Reasoning: 250, CacheRead: 800}},
		{"cache write", map[string]any{
			"prompt_tokens": 500, "completion_tokens": 5, "total_tokens": 505,
			"prompt_tokens_details": map[string]any{"cached_tokens": 100, "cache_write_tokens": 300},
		}, llm.Usage{Input: 100, Output: 5, CacheRead: 100, CacheWrite: 300}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := wiretest.NewServer(t, wiretest.SSE(text("ok"), stop, usageChunk(tc.usage), done))
			resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tc.want {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tc.want)
			}
		})
	}
}

// retryRecorder is a RetryPolicy whose Sleep returns at once and records.
type retryRecorder struct {
	attempts []int
	waits    []time.Duration
	errs     []error
	slept    []time.Duration
}

func (r *retryRecorder) policy() llm.RetryPolicy {
	return llm.RetryPolicy{
		Base: time.Millisecond, Max: 10 * time.Millisecond,
		OnRetry: func(_ context.Context, attempt int, err error, wait time.Duration) {
			r.attempts = append(r.attempts, attempt)
			r.waits = append(r.waits, wait)
			r.errs = append(r.errs, err)
		},
		Sleep: func(_ context.Context, d time.Duration) error {
			r.slept = append(r.slept, d)
			return nil
		},
	}
}

func TestRetry429ThenSuccess(t *testing.T) {
	s := wiretest.NewServer(t,
		wiretest.Status(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After: 7"),
		wiretest.SSE(text("fine"), stop, basicUse, done),
	)
	var rec retryRecorder
	resp, err := llm.WithRetry(newModel(s), rec.policy()).Stream(context.Background(), userReq("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "fine" {
		t.Errorf("text = %q", resp.Text)
	}
	if len(rec.attempts) != 1 || rec.attempts[0] != 1 {
		t.Fatalf("OnRetry attempts = %v, want [1]", rec.attempts)
	}
	if rec.waits[0] != 7*time.Second || len(rec.slept) != 1 || rec.slept[0] != 7*time.Second {
		t.Errorf("wait = %v, slept %v; want Retry-After 7s honoured", rec.waits, rec.slept)
	}
	var se *llm.StatusError
	if !errors.As(rec.errs[0], &se) || se.StatusCode != 429 || se.RetryAfter != 7*time.Second || se.Code != "rate_limit_exceeded" {
		t.Errorf("retried error = %#v", rec.errs[0])
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
}

func TestServerErrorThreeTimes(t *testing.T) {
	fail := wiretest.Status(500, `{"error":{"message":"The server had an error","type":"server_error","code":null}}`)
	s := wiretest.NewServer(t, fail, fail, fail)
	var rec retryRecorder
	p := rec.policy()
	p.MaxAttempts = 3
	_, err := llm.WithRetry(newModel(s), p).Stream(context.Background(), userReq("hi"), nil)
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || se.Provider != "openai" {
		t.Fatalf("err = %v, want a 500 *llm.StatusError", err)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	if len(rec.attempts) != 2 {
		t.Errorf("OnRetry called for attempts %v, want [1 2]", rec.attempts)
	}
	assertNoKey(t, err)
}

// streamAsync runs Stream in a goroutine, calling cancel from onDelta when
// cancelOn says so, and returns the result with the time it took after the
// cancel.
func streamAsync(t *testing.T, m llm.Model, req llm.Request, cancelOn func(llm.Delta) bool) (llm.Response, error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		resp llm.Response
		err  error
		at   time.Time
	}
	var cancelledAt time.Time
	done := make(chan result, 1)
	go func() {
		resp, err := m.Stream(ctx, req, func(d llm.Delta) {
			if cancelledAt.IsZero() && cancelOn(d) {
				cancelledAt = time.Now()
				cancel()
			}
		})
		done <- result{resp, err, time.Now()}
	}()
	select {
	case r := <-done:
		if cancelledAt.IsZero() {
			t.Fatalf("stream ended before any cancel: %+v, %v", r.resp, r.err)
		}
		return r.resp, r.err, r.at.Sub(cancelledAt)
	case <-time.After(10 * time.Second):
		t.Fatal("Stream did not return after ctx was cancelled")
		return llm.Response{}, nil, 0
	}
}

func TestAbortMidStream(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		s := wiretest.NewServer(t, wiretest.SSEThenBlock(roleChunk, text("Hello")))
		resp, err, took := streamAsync(t, newModel(s), userReq("hi"), func(llm.Delta) bool { return true })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if resp.Text != "Hello" || resp.StopReason != llm.StopAborted {
			t.Errorf("resp = %+v", resp)
		}
		if took > 2*time.Second {
			t.Errorf("returned %v after cancel", took)
		}
	})
	t.Run("keeps only complete tool calls", func(t *testing.T) {
		s := wiretest.NewServer(t, wiretest.SSEThenBlock(
			roleChunk, text("Checking."),
			toolDelta(0, "call_a", "get_weather", `{"city":"Paris"}`),
			toolDelta(1, "call_b", "get_time", `{"tz":`),
		))
		resp, err, _ := streamAsync(t, newModel(s), userReq("hi"), func(d llm.Delta) bool {
			return d.ToolCallStarted != nil && d.ToolCallStarted.ID == "call_b"
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if resp.Text != "Checking." || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_a" ||
			string(resp.ToolCalls[0].Arguments) != `{"city":"Paris"}` {
			t.Errorf("resp = %+v", resp)
		}
	})
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		step       wiretest.Step
		status     int
		contextLen bool
		retryable  bool
		text       string // partial text expected with the error
	}{
		{"context length", wiretest.Status(400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`),
			400, true, false, ""},
		{"compatible server context wording", wiretest.Status(400, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","code":400}}`),
			400, true, false, ""},
		{"ollama error shape", wiretest.Status(404, `{"error":"model \"llama3\" not found, try pulling it first"}`),
			404, false, false, ""},
		{"vllm context length shape", wiretest.Status(400, `{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","param":null,"code":400}`),
			400, true, false, ""},
		{"bad key echoed in message", wiretest.Status(401, `{"error":{"message":"Incorrect API key provided: `+apiKey+`.","type":"invalid_request_error","code":"invalid_api_key"}}`),
			401, false, false, ""},
		{"overloaded", wiretest.Status(503, `{"error":{"message":"overloaded","type":"server_error"}}`), 503, false, true, ""},
		{"error event mid-stream", wiretest.SSE(text("par"), `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`),
			500, false, true, "par"},
		{"rate limit event mid-stream", wiretest.SSE(`data: {"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`),
			429, false, true, ""},
		{"stream cut before finish", wiretest.SSE(text("cut")), 0, false, true, "cut"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := wiretest.NewServer(t, tc.step)
			resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
			if err == nil {
				t.Fatal("no error")
			}
			assertNoKey(t, err)
			var se *llm.StatusError
			if tc.status != 0 && (!errors.As(err, &se) || se.StatusCode != tc.status) {
				t.Errorf("err = %v, want status %d", err, tc.status)
			}
			if se != nil && se.StatusCode < 500 && se.Message == "" {
				t.Errorf("StatusError has no message: %#v", se)
			}
			if se != nil && strings.Contains(se.Message, apiKey) {
				t.Errorf("StatusError.Message leaks the key: %q", se.Message)
			}
			if got := errors.Is(err, llm.ErrContextLength); got != tc.contextLen {
				t.Errorf("errors.Is(ErrContextLength) = %v for %v", got, err)
			}
			if got := llm.Retryable(err); got != tc.retryable {
				t.Errorf("Retryable = %v for %v", got, err)
			}
			if resp.Text != tc.text {
				t.Errorf("partial text = %q, want %q", resp.Text, tc.text)
			}
		})
	}
}

func TestTransportErrorIsRetryable(t *testing.T) {
	s := wiretest.NewServer(t)
	url := s.URL
	s.Close()
	m := openai.New(openai.Options{APIKey: apiKey, BaseURL: url})
	_, err := m.Stream(context.Background(), userReq("hi"), nil)
	if err == nil || !llm.Retryable(err) {
		t.Fatalf("err = %v, want a retryable transport error", err)
	}
	assertNoKey(t, err)
}

func TestRequestWithoutModel(t *testing.T) {
	m := openai.New(openai.Options{APIKey: apiKey, BaseURL: "http://127.0.0.1:1"})
	if _, err := m.Stream(context.Background(), llm.Request{}, nil); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("err = %v", err)
	}
}

func TestToolImagesFollowToolResults(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSE(text("seen"), stop, done))
	req := userReq("shoot")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "screenshot"}, {ID: "c2", Name: "noop"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "took one", Images: []llm.Image{{MediaType: "image/jpeg", Data: []byte{1}}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c2", Content: "ok"},
	)
	if _, err := newModel(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := s.Requests()[0].JSON(t)["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,tool,user" {
		t.Fatalf("roles = %s", got)
	}
	parts := msgs[4].(map[string]any)["content"].([]any)
	if url := parts[1].(map[string]any)["image_url"].(map[string]any)["url"]; url != "data:image/jpeg;base64,AQ==" {
		t.Errorf("image url = %v", url)
	}
	if c := msgs[1].(map[string]any)["content"]; c != nil {
		t.Errorf("assistant with only tool calls sent content %v", c)
	}
}

func TestKeylessCompatibleServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env") // never read: config is the only source
	s := wiretest.NewServer(t, wiretest.SSE(text("local"), stop, done))
	m := openai.New(openai.Options{BaseURL: s.URL + "/v1"})
	resp, err := m.Stream(context.Background(), userReq("hi"), nil)
	if err != nil || resp.Text != "local" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	if h := s.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none", h)
	}
}
