package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/anthropic"
	"github.com/parleyd/parley/llm/internal/wiretest"
)

func transcript(t *testing.T, name string) wiretest.Step {
	t.Helper()
	return wiretest.File(t, "text/event-stream", filepath.Join("testdata", name))
}

// A recorded-format stream with extended thinking before a tool call: the
// thinking and redacted_thinking blocks come back in Response.Thinking, and
// the next request of the turn sends them back first, unchanged, as the
// API requires.
func TestThinkingPassedBack(t *testing.T) {
	s := wiretest.NewServer(t, transcript(t, "thinking_tool_use.sse"), okStream("Sunny."))
	m := newModel(s)
	req := userReq("weather in Paris?")
	var deltas []string
	resp, err := m.Stream(context.Background(), req, func(d llm.Delta) {
		if d.ToolCallStarted == nil {
			deltas = append(deltas, d.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, "|"); got != "Let me check." {
		t.Errorf("streamed text = %q: thinking must not be streamed as reply text", got)
	}
	wantThinking := []llm.Thinking{
		{Text: "The user wants the weather in Paris. I should call get_weather.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
		{Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
	}
	if len(resp.Thinking) != 2 || resp.Thinking[0] != wantThinking[0] || resp.Thinking[1] != wantThinking[1] {
		t.Errorf("thinking = %+v, want %+v", resp.Thinking, wantThinking)
	}
	if resp.Text != "Let me check." || resp.StopReason != llm.StopToolUse || resp.Model != "claude-sonnet-4-5-20250929" ||
		len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != `{"city": "Paris"}` {
		t.Errorf("resp = %+v", resp)
	}
	if want := (llm.Usage{Input: 472, Output: 48, Reasoning: 41, CacheRead: 2048}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}

	// The agent carries the response back as the assistant message.
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls, Thinking: resp.Thinking},
		llm.Message{Role: llm.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "sunny, 21°C"},
	)
	if _, err := m.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := s.Requests()[1].JSON(t)["messages"].([]any)
	blocks := msgs[1].(obj)["content"].([]any)
	var types []string
	for _, b := range blocks {
		types = append(types, b.(obj)["type"].(string))
	}
	if got := strings.Join(types, ","); got != "thinking,redacted_thinking,text,tool_use" {
		t.Fatalf("assistant blocks = %s", got)
	}
	th, red := blocks[0].(obj), blocks[1].(obj)
	if th["thinking"] != wantThinking[0].Text || th["signature"] != wantThinking[0].Signature || th["cache_control"] != nil {
		t.Errorf("thinking block = %v", th)
	}
	if red["data"] != wantThinking[1].Redacted {
		t.Errorf("redacted block = %v", red)
	}
}

// A thinking block whose text the API omitted (display "omitted") is still
// sent back with its (empty) thinking field: the API requires the field.
func TestOmittedThinkingKeepsItsFields(t *testing.T) {
	s := wiretest.NewServer(t, okStream("ok"))
	req := userReq("hi")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Thinking: []llm.Thinking{{Signature: "sig"}}, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "x"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Content: "done"},
	)
	if _, err := newModel(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	raw := s.Requests()[0].Body
	if !strings.Contains(string(raw), `{"type":"thinking","thinking":"","signature":"sig"}`) {
		t.Errorf("body = %s", raw)
	}
}

// Prompt caching: the system prompt and the last block of the conversation
// carry cache_control, and the cache counts land in Usage.
func TestPromptCaching(t *testing.T) {
	s := wiretest.NewServer(t, transcript(t, "cache_write_no_input_deltas.sse"))
	req := userReq("what is scheduled?")
	req.System = "You are parley's assistant."
	req.Messages = append([]llm.Message{
		{Role: llm.RoleUser, Content: "earlier"}, {Role: llm.RoleAssistant, Content: "earlier answer"},
	}, req.Messages...)
	resp, err := newModel(s).Stream(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.Usage{Input: 21, Output: 12, CacheWrite: 1830}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "toolu_01NoArgs" || string(resp.ToolCalls[0].Arguments) != "{}" {
		t.Errorf("tool calls = %+v", resp.ToolCalls)
	}
	body := s.Requests()[0].JSON(t)
	if sys := body["system"].([]any)[0].(obj); sys["cache_control"].(obj)["type"] != "ephemeral" {
		t.Errorf("system = %v", sys)
	}
	msgs := body["messages"].([]any)
	for i, m := range msgs {
		for _, b := range m.(obj)["content"].([]any) {
			_, marked := b.(obj)["cache_control"]
			if want := i == len(msgs)-1; marked != want {
				t.Errorf("message %d block %v: cache_control %v, want %v", i, b, marked, want)
			}
		}
	}
}

// Images reach the API in user messages and inside tool results.
func TestVision(t *testing.T) {
	s := wiretest.NewServer(t, okStream("a cat"))
	req := userReq("")
	req.Messages = []llm.Message{
		{Role: llm.RoleUser, Images: []llm.Image{{MediaType: "image/jpeg", Data: []byte{0xff, 0xd8}}}},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "screenshot", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "t1", Content: "here", Images: []llm.Image{{MediaType: "image/png", Data: []byte("PNG")}}},
	}
	if _, err := newModel(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := s.Requests()[0].JSON(t)["messages"].([]any)
	img := msgs[0].(obj)["content"].([]any)[0].(obj)
	if img["type"] != "image" || img["source"].(obj)["media_type"] != "image/jpeg" || img["source"].(obj)["data"] != "/9g=" {
		t.Errorf("user image = %v", img)
	}
	result := msgs[2].(obj)["content"].([]any)[0].(obj)["content"].([]any)
	if len(result) != 2 || result[1].(obj)["type"] != "image" || result[1].(obj)["source"].(obj)["data"] != "UE5H" {
		t.Errorf("tool result content = %v", result)
	}
}

func TestStreamFailures(t *testing.T) {
	t.Run("rate limit error event mid-stream", func(t *testing.T) {
		s := wiretest.NewServer(t, transcript(t, "rate_limit_midstream.sse"))
		resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
		var se *llm.StatusError
		if !errors.As(err, &se) || se.StatusCode != 429 || se.Code != "rate_limit_error" || !llm.Retryable(err) {
			t.Fatalf("err = %v", err)
		}
		if resp.StopReason != llm.StopError || resp.Usage.Input != 10 {
			t.Errorf("resp = %+v", resp)
		}
	})
	t.Run("connection cut mid-event", func(t *testing.T) {
		s := wiretest.NewServer(t, transcript(t, "cut_mid_event.sse"))
		resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
		if !errors.Is(err, llm.ErrIncompleteStream) || !llm.Retryable(err) {
			t.Fatalf("err = %v", err)
		}
		if resp.Text != "cut" || resp.StopReason != llm.StopError {
			t.Errorf("resp = %+v", resp)
		}
	})
	t.Run("proxy error page", func(t *testing.T) {
		s := wiretest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("<html><body><h1>503 Service Temporarily Unavailable</h1> key " + apiKey + "</body></html>"))
		})
		_, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
		var se *llm.StatusError
		if !errors.As(err, &se) || se.StatusCode != 503 || !strings.Contains(se.Message, "503 Service Temporarily Unavailable") || !llm.Retryable(err) {
			t.Fatalf("err = %v", err)
		}
		assertNoKey(t, err)
	})
}

// No key configured (a proxy that adds it) sends no x-api-key header.
func TestKeyless(t *testing.T) {
	s := wiretest.NewServer(t, okStream("hi"))
	m := newModelKey(s, "")
	if _, err := m.Stream(context.Background(), userReq("hi"), nil); err != nil {
		t.Fatal(err)
	}
	h := s.Requests()[0].Header
	if _, ok := h["X-Api-Key"]; ok || h.Get("Anthropic-Version") != "2026-10-21" {
		t.Errorf("headers = %v", h)
	}
}

func newModelKey(s *wiretest.Server, key string) *anthropic.Model {
	return anthropic.New(anthropic.Options{APIKey: key, BaseURL: s.URL, HTTPClient: s.Client()})
}

// A server that keeps the response open after message_stop does not hold
// the call.
func TestOpenAfterMessageStop(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSEThenBlock(messageStart(nil), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", nil), messageStop))
	got := make(chan error, 1)
	go func() {
		_, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stream still waits on a response held open after message_stop")
	}
}

// A server that ends the response a moment after message_stop (its handler
// returns after the last flush): each call reads on to that end, so the
// calls share one connection instead of dialling again each time.
func TestConnectionKeptAfterMessageStop(t *testing.T) {
	const calls = 5
	var mu sync.Mutex
	conns := map[string]bool{}
	var steps []wiretest.Step
	for range calls {
		steps = append(steps, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			conns[r.RemoteAddr] = true
			mu.Unlock()
			wiretest.SSE(messageStart(nil), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", nil), messageStop)(w, r)
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		})
	}
	s := wiretest.NewServer(t, steps...)
	m := newModel(s)
	for range calls {
		if _, err := m.Stream(context.Background(), userReq("hi"), nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("%d connections for %d calls one after another, want 1", len(conns), calls)
	}
}
