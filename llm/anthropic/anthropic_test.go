package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/anthropic"
	"github.com/parleyd/parley/llm/internal/wiretest"
)

const apiKey = "sk-ant-test-0123456789-secret"

type obj = map[string]any

func messageStart(usage obj) string {
	if usage == nil {
		usage = obj{"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
	}
	return wiretest.Event("message_start", obj{"type": "message_start", "message": obj{
		"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-test",
		"stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
}

func textStart(i int) string {
	return wiretest.Event("content_block_start", obj{"type": "content_block_start", "index": i, "content_block": obj{"type": "text", "text": ""}})
}

func textDelta(i int, s string) string {
	return wiretest.Event("content_block_delta", obj{"type": "content_block_delta", "index": i, "delta": obj{"type": "text_delta", "text": s}})
}

func toolStart(i int, id, name string) string {
	return wiretest.Event("content_block_start", obj{"type": "content_block_start", "index": i,
		"content_block": obj{"type": "tool_use", "id": id, "name": name, "input": obj{}}})
}

func jsonDelta(i int, s string) string {
	return wiretest.Event("content_block_delta", obj{"type": "content_block_delta", "index": i, "delta": obj{"type": "input_json_delta", "partial_json": s}})
}

func blockStop(i int) string {
	return wiretest.Event("content_block_stop", obj{"type": "content_block_stop", "index": i})
}

func messageDelta(stop string, usage obj) string {
	if usage == nil {
		usage = obj{"output_tokens": 5}
	}
	return wiretest.Event("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
}

var (
	messageStop = wiretest.Event("message_stop", obj{"type": "message_stop"})
	ping        = wiretest.Event("ping", obj{"type": "ping"})
)

func errorBody(typ, msg string) string {
	b, _ := json.Marshal(obj{"type": "error", "error": obj{"type": typ, "message": msg}, "request_id": "req_1"})
	return string(b)
}

func newModel(s *wiretest.Server) *anthropic.Model {
	return anthropic.New(anthropic.Options{APIKey: apiKey, BaseURL: s.URL, HTTPClient: s.Client()})
}

func userReq(content string) llm.Request {
	return llm.Request{Model: "claude-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: content}}}
}

func assertNoKey(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), apiKey) {
		t.Errorf("error leaks the API key: %v", err)
	}
}

func sentKey(h http.Header) bool {
	return h.Get("X-Api-Key") == apiKey || h.Get("Authorization") == "Bearer "+apiKey
}

func TestStreamText(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSE(
		messageStart(nil), textStart(0), ping, textDelta(0, "Hel"), textDelta(0, "lo, "), textDelta(0, "world"),
		blockStop(0), messageDelta("end_turn", nil), messageStop,
	))
	var deltas []string
	req := userReq("hi")
	req.System = "be brief"
	resp, err := newModel(s).Stream(context.Background(), req, func(d llm.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, "|"); got != "Hel|lo, |world" {
		t.Errorf("deltas = %q", got)
	}
	if resp.Text != "Hello, world" || resp.StopReason != llm.StopEnd || resp.Model != "claude-test" {
		t.Errorf("resp = %+v", resp)
	}

	got := s.Requests()[0]
	if got.Path != "/v1/messages" || !sentKey(got.Header) || got.Header.Get("Anthropic-Version") == "" {
		t.Errorf("path %s, headers %v", got.Path, got.Header)
	}
	body := got.JSON(t)
	if body["stream"] != true || body["model"] != "claude-test" || body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("body = %s", got.Body)
	}
	if _, ok := body["temperature"]; ok {
		t.Errorf("temperature sent: %s", got.Body)
	}
	system := body["system"].([]any)
	sys0 := system[0].(obj)
	if len(system) != 1 || sys0["type"] != "text" || sys0["text"] != "be brief" ||
		sys0["cache_control"].(obj)["type"] != "ephemeral" {
		t.Errorf("system = %v", system)
	}
	msgs := body["messages"].([]any)
	m0 := msgs[0].(obj)
	if len(msgs) != 1 || m0["role"] != "user" || m0["content"].([]any)[0].(obj)["text"] != "hi" {
		t.Errorf("messages = %v", msgs)
	}
}

func TestStreamToolCalls(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSE(
		messageStart(nil),
		textStart(0), textDelta(0, "Let me check."), blockStop(0),
		toolStart(1, "toolu_a", "get_weather"), jsonDelta(1, `{"ci`), jsonDelta(1, `ty": "Paris"}`), blockStop(1),
		toolStart(2, "toolu_b", "get_time"), jsonDelta(2, ""), jsonDelta(2, `{"tz":"CET"}`), blockStop(2),
		messageDelta("tool_use", nil), messageStop,
	))
	temp := 0.3
	req := llm.Request{
		Model: "claude-test", System: "sys", MaxTokens: 1000, Temperature: &temp,
		Tools: []llm.Tool{
			{Name: "get_weather", Description: "weather", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
			{Name: "get_time"},
		},
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "summary of earlier turns"},
			{Role: llm.RoleUser, Content: "look", Images: []llm.Image{{MediaType: "image/png", Data: []byte("PNG")}}},
			{Role: llm.RoleAssistant, Content: "on it", ToolCalls: []llm.ToolCall{
				{ID: "t1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
				{ID: "t2", Name: "get_time", Arguments: json.RawMessage(`{"tz":`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "t1", Content: "rain"},
			{Role: llm.RoleTool, ToolCallID: "t2", Content: ""},
			{Role: llm.RoleUser, Content: "and?"},
		},
	}
	var started []string
	resp, err := newModel(s).Stream(context.Background(), req, func(d llm.Delta) {
		if d.ToolCallStarted != nil {
			started = append(started, d.ToolCallStarted.ID+":"+d.ToolCallStarted.Name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(started, ","); got != "toolu_a:get_weather,toolu_b:get_time" {
		t.Errorf("started = %s", got)
	}
	if resp.Text != "Let me check." || resp.StopReason != llm.StopToolUse || len(resp.ToolCalls) != 2 {
		t.Fatalf("resp = %+v", resp)
	}
	want := []llm.ToolCall{
		{ID: "toolu_a", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)},
		{ID: "toolu_b", Name: "get_time", Arguments: json.RawMessage(`{"tz":"CET"}`)},
	}
	for i, w := range want {
		g := resp.ToolCalls[i]
		if g.ID != w.ID || g.Name != w.Name || string(g.Arguments) != string(w.Arguments) {
			t.Errorf("tool call %d = %+v (args %s), want %+v", i, g, g.Arguments, w)
		}
	}

	body := s.Requests()[0].JSON(t)
	if body["max_tokens"] != 1000.0 {
		t.Errorf("max_tokens = %v", body["max_tokens"])
	}
	system := body["system"].([]any)
	if len(system) != 2 || system[1].(obj)["text"] != "summary of earlier turns" || system[1].(obj)["cache_control"] != nil {
		t.Errorf("system = %v", system)
	}
	tools := body["tools"].([]any)
	t0 := tools[0].(obj)
	schema := t0["input_schema"].(obj)
	if t0["name"] != "get_weather" || t0["description"] != "weather" || schema["type"] != "object" ||
		schema["required"].([]any)[0] != "city" || schema["additionalProperties"] != false ||
		schema["properties"].(obj)["city"] == nil {
		t.Errorf("tool 0 = %v", t0)
	}
	if s1 := tools[1].(obj)["input_schema"].(obj); s1["type"] != "object" {
		t.Errorf("tool 1 schema = %v", s1)
	}

	msgs := body["messages"].([]any)
	var shape []string
	for _, m := range msgs {
		var types []string
		for _, b := range m.(obj)["content"].([]any) {
			types = append(types, b.(obj)["type"].(string))
		}
		shape = append(shape, m.(obj)["role"].(string)+"["+strings.Join(types, ",")+"]")
	}
	if got := strings.Join(shape, " "); got != "user[text,image] assistant[text,tool_use,tool_use] user[tool_result,tool_result,text]" {
		t.Fatalf("message shape = %s", got)
	}
	img := msgs[0].(obj)["content"].([]any)[1].(obj)["source"].(obj)
	if img["type"] != "base64" || img["media_type"] != "image/png" || img["data"] != "UE5H" {
		t.Errorf("image = %v", img)
	}
	uses := msgs[1].(obj)["content"].([]any)
	if u := uses[1].(obj); u["id"] != "t1" || u["input"].(obj)["city"] != "Oslo" {
		t.Errorf("tool_use = %v", u)
	}
	if u := uses[2].(obj); len(u["input"].(obj)) != 0 {
		t.Errorf("invalid arguments should be sent as {}: %v", u)
	}
	results := msgs[2].(obj)["content"].([]any)
	r0, r1 := results[0].(obj), results[1].(obj)
	if r0["tool_use_id"] != "t1" || r0["content"].([]any)[0].(obj)["text"] != "rain" {
		t.Errorf("tool_result 0 = %v", r0)
	}
	if r1["tool_use_id"] != "t2" || r1["content"] != nil {
		t.Errorf("empty tool_result 1 = %v", r1)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name        string
		start, last obj
		want        llm.Usage
	}{
		{"plain",
			obj{"input_tokens": 100, "output_tokens": 1},
			obj{"output_tokens": 20},
			llm.Usage{Input: 100, Output: 20}},
		{"cache write and read",
			obj{"input_tokens": 12, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 2000, "output_tokens": 1},
			obj{"output_tokens": 40},
			llm.Usage{Input: 12, Output: 40, CacheRead: 2000, CacheWrite: 300}},
		{"thinking",
			obj{"input_tokens": 50, "output_tokens": 1},
			obj{"output_tokens": 130, "output_tokens_details": obj{"thinking_tokens": 100}},
			llm.Usage{Input: 50, Output: 30, Reasoning: 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := wiretest.NewServer(t, wiretest.SSE(messageStart(tc.start), textStart(0), textDelta(0, "ok"), blockStop(0),
				messageDelta("end_turn", tc.last), messageStop))
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

func okStream(text string) wiretest.Step {
	return wiretest.SSE(messageStart(nil), textStart(0), textDelta(0, text), blockStop(0), messageDelta("end_turn", nil), messageStop)
}

func TestRetry429ThenSuccess(t *testing.T) {
	s := wiretest.NewServer(t,
		wiretest.Status(429, errorBody("rate_limit_error", "Number of request tokens has exceeded your rate limit"), "retry-after: 12"),
		okStream("fine"),
	)
	var rec retryRecorder
	resp, err := llm.WithRetry(newModel(s), rec.policy()).Stream(context.Background(), userReq("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "fine" {
		t.Errorf("text = %q", resp.Text)
	}
	if len(rec.attempts) != 1 || rec.attempts[0] != 1 || rec.waits[0] != 12*time.Second || rec.slept[0] != 12*time.Second {
		t.Fatalf("OnRetry attempts %v waits %v slept %v; want one retry after 12s", rec.attempts, rec.waits, rec.slept)
	}
	var se *llm.StatusError
	if !errors.As(rec.errs[0], &se) || se.StatusCode != 429 || se.Code != "rate_limit_error" {
		t.Errorf("retried error = %#v", rec.errs[0])
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
}

func TestServerErrorThreeTimes(t *testing.T) {
	fail := wiretest.Status(500, errorBody("api_error", "Internal server error"))
	s := wiretest.NewServer(t, fail, fail, fail)
	var rec retryRecorder
	p := rec.policy()
	p.MaxAttempts = 3
	_, err := llm.WithRetry(newModel(s), p).Stream(context.Background(), userReq("hi"), nil)
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || se.Provider != "anthropic" {
		t.Fatalf("err = %v, want a 500 *llm.StatusError", err)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	if len(rec.attempts) != 2 {
		t.Errorf("OnRetry attempts = %v, want [1 2]", rec.attempts)
	}
	assertNoKey(t, err)
}

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
		s := wiretest.NewServer(t, wiretest.SSEThenBlock(messageStart(nil), textStart(0), textDelta(0, "Hello")))
		resp, err, took := streamAsync(t, newModel(s), userReq("hi"), func(llm.Delta) bool { return true })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if resp.Text != "Hello" || resp.StopReason != llm.StopAborted || resp.Usage.Input != 10 {
			t.Errorf("resp = %+v", resp)
		}
		if took > 2*time.Second {
			t.Errorf("returned %v after cancel", took)
		}
	})
	t.Run("keeps only complete tool calls", func(t *testing.T) {
		s := wiretest.NewServer(t, wiretest.SSEThenBlock(
			messageStart(nil), textStart(0), textDelta(0, "Checking."), blockStop(0),
			toolStart(1, "toolu_a", "get_weather"), jsonDelta(1, `{"city":"Paris"}`), blockStop(1),
			toolStart(2, "toolu_b", "get_time"), jsonDelta(2, `{"tz":`),
		))
		resp, err, _ := streamAsync(t, newModel(s), userReq("hi"), func(d llm.Delta) bool {
			return d.ToolCallStarted != nil && d.ToolCallStarted.ID == "toolu_b"
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if resp.Text != "Checking." || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "toolu_a" ||
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
		text       string
	}{
		{"prompt too long", wiretest.Status(400, errorBody("invalid_request_error", "prompt is too long: 208000 tokens > 200000 maximum")),
			400, true, false, ""},
		{"input plus max_tokens over limit", wiretest.Status(400, errorBody("invalid_request_error", "input length and `max_tokens` exceed context limit: 188000 + 20000 > 200000, decrease input length or `max_tokens` and try again")),
			400, true, false, ""},
		{"other invalid request", wiretest.Status(400, errorBody("invalid_request_error", "messages: text content blocks must be non-empty")),
			400, false, false, ""},
		{"bad key echoed in message", wiretest.Status(401, errorBody("authentication_error", "invalid x-api-key "+apiKey)),
			401, false, false, ""},
		{"overloaded", wiretest.Status(529, errorBody("overloaded_error", "Overloaded")), 529, false, true, ""},
		{"overloaded event mid-stream", wiretest.SSE(messageStart(nil), textStart(0), textDelta(0, "par"),
			wiretest.Event("error", obj{"type": "error", "error": obj{"type": "overloaded_error", "message": "Overloaded"}})),
			529, false, true, "par"},
		{"stream cut before message_stop", wiretest.SSE(messageStart(nil), textStart(0), textDelta(0, "cut")), 0, false, true, "cut"},
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
			if tc.status != 0 && (!errors.As(err, &se) || se.StatusCode != tc.status || se.Message == "") {
				t.Errorf("err = %v, want status %d with a message", err, tc.status)
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

func TestRequestWithoutModel(t *testing.T) {
	m := anthropic.New(anthropic.Options{APIKey: apiKey, BaseURL: "http://127.0.0.1:1"})
	if _, err := m.Stream(context.Background(), llm.Request{}, nil); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("err = %v", err)
	}
}

// A reasoning effort becomes extended thinking with its budget, within a
// max_tokens above it; none sends no thinking.
func TestReasoningEffortBecomesThinking(t *testing.T) {
	s := wiretest.NewServer(t, okStream("ok"), okStream("ok"))
	req := userReq("think")
	req.ReasoningEffort, req.MaxTokens = "medium", 1000
	if _, err := newModel(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newModel(s).Stream(context.Background(), userReq("plain"), nil); err != nil {
		t.Fatal(err)
	}
	body := s.Requests()[0].JSON(t)
	th, _ := body["thinking"].(map[string]any)
	if th["type"] != "enabled" || th["budget_tokens"] != float64(llm.ThinkingBudget("medium")) ||
		body["max_tokens"].(float64) <= float64(llm.ThinkingBudget("medium")) {
		t.Errorf("body = %s", s.Requests()[0].Body)
	}
	if _, ok := s.Requests()[1].JSON(t)["thinking"]; ok {
		t.Errorf("a request without an effort sent thinking: %s", s.Requests()[1].Body)
	}
}
