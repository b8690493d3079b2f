package openai_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wiretest"
	"github.com/parleyd/parley/llm/openai"
)

func transcript(t *testing.T, name string) wiretest.Step {
	t.Helper()
	return wiretest.File(t, "text/event-stream", filepath.Join("testdata", name))
}

// Recorded-format streams from OpenAI and the compatible servers, each with
// its quirk (see stream.go).
func TestCompatibleServerTranscripts(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		text       string
		stop       string
		model      string
		usage      llm.Usage
		calls      []string // "name args"; ids are checked apart
		wantIDs    []string // "" = generated
		deltaCalls int
	}{
		{name: "ollama text", file: "ollama_text.sse", text: "Hello there", stop: llm.StopEnd, model: "llama3.2",
			usage: llm.Usage{Input: 26, Output: 2}},
		{name: "ollama whole tool calls without index, finish stop", file: "ollama_tools_whole.sse", stop: llm.StopToolUse, model: "qwen2.5",
			calls: []string{`get_weather {"city":"Paris"}`, `get_time {"tz":"CET"}`}, wantIDs: []string{"call_5z1rbd0m", "call_0kx2f3hd"}, deltaCalls: 2},
		{name: "llama.cpp data: without space, null content, no id, no [DONE]", file: "llamacpp_nospace_nodone.sse", text: "Bonjour",
			stop: llm.StopEnd, model: "gguf/mistral-7b"},
		{name: "vllm [DONE] without finish_reason", file: "vllm_done_without_finish.sse", text: "Done.", stop: llm.StopEnd,
			model: "meta-llama/Llama-3.1-8B-Instruct"},
		{name: "tgi eos_token and empty id", file: "tgi_eos.sse", text: "Hi!", stop: llm.StopEnd, model: "tgi"},
		{name: "localai tool calls without ids, arguments as an object", file: "localai_tools_noid_object_args.sse", stop: llm.StopToolUse,
			model: "hermes-2-pro", calls: []string{`get_weather {"city":"Oslo"}`, `get_time {}`}, wantIDs: []string{"", ""}, deltaCalls: 2},
		{name: "openrouter comments, CRLF, reasoning left out, usage on the finishing chunk", file: "openrouter_reasoning.sse", text: "Hello!",
			stop: llm.StopEnd, model: "deepseek/deepseek-r1", usage: llm.Usage{Input: 12, Output: 5, Reasoning: 35}},
		{name: "deepseek cache hit tokens", file: "deepseek_cache_hit.sse", text: "Yes", stop: llm.StopEnd, model: "deepseek-chat",
			usage: llm.Usage{Input: 176, Output: 1, CacheRead: 1024}},
		{name: "openai cached and reasoning tokens", file: "openai_cached_reasoning.sse", text: "42", stop: llm.StopEnd, model: "o4-mini-2025-04-16",
			usage: llm.Usage{Input: 86, Output: 44, Reasoning: 256, CacheRead: 1920}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := wiretest.NewServer(t, transcript(t, tc.file))
			var c collect
			resp, err := newModel(s).Stream(context.Background(), userReq("hi"), c.on)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tc.text || resp.StopReason != tc.stop || resp.Model != tc.model {
				t.Errorf("text %q stop %q model %q; want %q %q %q", resp.Text, resp.StopReason, resp.Model, tc.text, tc.stop, tc.model)
			}
			if got := strings.Join(c.texts(), ""); got != tc.text {
				t.Errorf("streamed text = %q", got)
			}
			if resp.Usage != tc.usage {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tc.usage)
			}
			var calls []string
			for _, call := range resp.ToolCalls {
				calls = append(calls, call.Name+" "+string(call.Arguments))
			}
			if strings.Join(calls, "|") != strings.Join(tc.calls, "|") {
				t.Errorf("calls = %q, want %q", calls, tc.calls)
			}
			seen := map[string]bool{}
			for i, call := range resp.ToolCalls {
				if want := tc.wantIDs[i]; want != "" && call.ID != want {
					t.Errorf("call %d id = %q, want %q", i, call.ID, want)
				}
				if !strings.HasPrefix(call.ID, "call_") || seen[call.ID] {
					t.Errorf("call %d id = %q: want a unique call_ id", i, call.ID)
				}
				seen[call.ID] = true
			}
			started := 0
			for _, d := range c.deltas {
				if d.ToolCallStarted != nil {
					if !seen[d.ToolCallStarted.ID] {
						t.Errorf("started call %q is not in the response", d.ToolCallStarted.ID)
					}
					started++
				}
			}
			if started != tc.deltaCalls {
				t.Errorf("%d ToolCallStarted deltas, want %d", started, tc.deltaCalls)
			}
		})
	}
}

func TestNonStreamingAnswer(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.File(t, "application/json", filepath.Join("testdata", "nonstream_completion.json")))
	resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != llm.StopToolUse || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_q1" ||
		string(resp.ToolCalls[0].Arguments) != `{"tz":"UTC"}` || resp.Usage != (llm.Usage{Input: 50, Output: 9}) {
		t.Errorf("resp = %+v", resp)
	}
}

func TestStreamErrorTranscripts(t *testing.T) {
	tests := []struct {
		name, file string
		status     int
		code, msg  string
		retryable  bool
		text       string
	}{
		{"openrouter provider error mid-stream", "openrouter_error_midstream.sse", 502, "502", "Provider returned error", true, "Par"},
		{"lm studio error as a string", "lmstudio_error_string.sse", 500, "", "Model unloaded.", true, "Par"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := wiretest.NewServer(t, transcript(t, tc.file))
			resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
			var se *llm.StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status || se.Code != tc.code || se.Message != tc.msg {
				t.Fatalf("err = %#v (%v), want status %d code %q message %q", se, err, tc.status, tc.code, tc.msg)
			}
			if llm.Retryable(err) != tc.retryable || resp.Text != tc.text || resp.StopReason != llm.StopError {
				t.Errorf("retryable %v, resp %+v", llm.Retryable(err), resp)
			}
		})
	}
}

func TestStreamCutMidChunk(t *testing.T) {
	s := wiretest.NewServer(t, transcript(t, "cut_mid_chunk.sse"))
	resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
	if !errors.Is(err, llm.ErrIncompleteStream) || !llm.Retryable(err) {
		t.Fatalf("err = %v, want ErrIncompleteStream", err)
	}
	if resp.Text != "cut" || resp.StopReason != llm.StopError {
		t.Errorf("resp = %+v", resp)
	}
}

// A server that refuses stream_options gets the request again without it,
// and later calls leave it out from the start.
func TestStreamOptionsRefused(t *testing.T) {
	refuse := wiretest.Status(400, `{"object":"error","message":"[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted'}]","type":"BadRequestError","param":null,"code":400}`)
	ok := func() wiretest.Step { return wiretest.SSE(text("fine"), stop, done) }
	s := wiretest.NewServer(t, refuse, ok(), ok())
	m := newModel(s)
	for i := range 2 {
		resp, err := m.Stream(context.Background(), userReq("hi"), nil)
		if err != nil || resp.Text != "fine" || resp.Usage != (llm.Usage{}) {
			t.Fatalf("call %d: resp %+v, err %v", i, resp, err)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		_, sent := r.JSON(t)["stream_options"]
		if want := i == 0; sent != want {
			t.Errorf("request %d sent stream_options = %v, want %v", i, sent, want)
		}
	}
}

// A 400 that is not about stream_options is returned, not retried.
func TestOtherBadRequestIsNotResent(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.Status(400, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`))
	_, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || se.Code != "invalid_value" || len(s.Requests()) != 1 {
		t.Fatalf("err = %v after %d requests", err, len(s.Requests()))
	}
}

func TestProxyErrorPage(t *testing.T) {
	s := wiretest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>\n<head><title>502 Bad Gateway</title></head>\n<body>upstream " + apiKey + "</body></html>\n"))
	})
	_, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != 502 || !llm.Retryable(err) || llm.RetryAfter(err) != 3e9 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(se.Message, "502 Bad Gateway") || strings.Contains(se.Message, "\n") {
		t.Errorf("message = %q", se.Message)
	}
	assertNoKey(t, err)
}

// Calls share kept-alive connections, also when several run at once: a
// burst of 8 concurrent calls, then another, uses 8 connections, not 8 plus
// the 6 that net/http's default of 2 idle connections per host would close
// and open again.
func TestConnectionsReused(t *testing.T) {
	// A server can end the response a moment after [DONE] (the handler
	// returns after its last flush): the call reads on to that end, or
	// the connection is closed instead of kept.
	for _, tc := range []struct {
		name string
		late time.Duration
	}{{"end at once", 0}, {"end a little after [DONE]", 10 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) { testConnectionsReused(t, tc.late) })
	}
}

func testConnectionsReused(t *testing.T, late time.Duration) {
	const burst = 8
	var mu sync.Mutex
	conns := map[string]bool{} // client addresses
	var steps []wiretest.Step
	for range 2 {
		var arrived sync.WaitGroup
		arrived.Add(burst)
		for range burst {
			steps = append(steps, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				conns[r.RemoteAddr] = true
				mu.Unlock()
				arrived.Done()
				arrived.Wait() // all of the burst are in flight at once
				wiretest.SSE(text("ok"), stop, basicUse, done)(w, r)
				if late > 0 {
					w.(http.Flusher).Flush()
					time.Sleep(late)
				}
			})
		}
	}
	s := wiretest.NewServer(t, steps...)
	m := openai.New(openai.Options{APIKey: apiKey, BaseURL: s.URL + "/v1"}) // the default client
	for range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, burst)
		for range burst {
			wg.Go(func() {
				_, err := m.Stream(context.Background(), userReq("hi"), nil)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// A connection of the first burst may not be back in the pool when the
	// second starts (its body is closed as the call returns), so allow two
	// more; net/http's default of 2 idle connections per host opens 14.
	if n := len(conns); n > burst+2 {
		t.Errorf("%d connections for two bursts of %d calls, want at most %d", n, burst, burst+2)
	}
}

// The hand-written request body is valid JSON that carries every string
// exactly, whatever it holds.
func TestRequestBodyEscapes(t *testing.T) {
	tricky := "quote \" backslash \\ newline\n tab\t nul \x00 <b>&amp; é ✓ 😀 \u2028"
	s := wiretest.NewServer(t, wiretest.SSE(text("ok"), stop, done))
	req := llm.Request{Model: "m\"x", System: tricky, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: tricky},
		{Role: llm.RoleAssistant, Content: tricky, ToolCalls: []llm.ToolCall{{ID: "c\"1", Name: "n", Arguments: []byte(`{"q":"` + "\\\"" + `"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c\"1", Content: tricky},
	}, Tools: []llm.Tool{{Name: "n", Description: tricky, Schema: []byte(" {\n\"type\": \"object\"}\n")}}}
	if _, err := newModel(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	body := s.Requests()[0].JSON(t)
	msgs := body["messages"].([]any)
	if body["model"] != "m\"x" || msgs[0].(map[string]any)["content"] != tricky || msgs[1].(map[string]any)["content"] != tricky ||
		msgs[2].(map[string]any)["content"] != tricky || msgs[3].(map[string]any)["content"] != tricky ||
		msgs[3].(map[string]any)["tool_call_id"] != "c\"1" {
		t.Errorf("body = %s", s.Requests()[0].Body)
	}
	if args := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"]; args != `{"q":"\""}` {
		t.Errorf("arguments = %v", args)
	}
	if d := body["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)["description"]; d != tricky {
		t.Errorf("description = %v", d)
	}
}

// A server that streams under Content-Type: application/json is still read
// as a stream.
func TestStreamUnderJSONContentType(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.File(t, "application/json; charset=utf-8", filepath.Join("testdata", "ollama_text.sse")))
	resp, err := newModel(s).Stream(context.Background(), userReq("hi"), nil)
	if err != nil || resp.Text != "Hello there" || resp.Usage.Input != 26 {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
}

// A server that keeps the response open after [DONE] does not hold the
// call.
func TestOpenAfterDone(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSEThenBlock(text("ok"), stop, done))
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
		t.Fatal("Stream still waits on a response held open after [DONE]")
	}
}

// A reasoning effort goes on the wire as reasoning_effort; none, nothing.
func TestReasoningEffortOnTheWire(t *testing.T) {
	s := wiretest.NewServer(t, wiretest.SSE(text("ok"), stop, done), wiretest.SSE(text("ok"), stop, done))
	req := userReq("think")
	req.ReasoningEffort = "high"
	if _, err := newModel(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newModel(s).Stream(context.Background(), userReq("plain"), nil); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()[0].JSON(t)["reasoning_effort"]; got != "high" {
		t.Errorf("reasoning_effort = %v, want high", got)
	}
	if _, ok := s.Requests()[1].JSON(t)["reasoning_effort"]; ok {
		t.Errorf("a request without an effort sent one: %s", s.Requests()[1].Body)
	}
}
