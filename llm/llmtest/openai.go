// Package llmtest has model providers' fakes at the wire, shared by the
// tests of every package that runs parley's real provider clients.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// OpenAIEcho is an OpenAI-compatible server at the wire: every streamed
// chat completion answers with the text of the request's last user
// message, after delay, so a daemon pointed at it (providers.openai.base_url)
// runs its real provider path and a test can tell which message a reply
// answers.
type OpenAIEcho struct {
	*httptest.Server
	delay time.Duration
	// Calls counts the chat completions asked for.
	Calls atomic.Int64
	mu    sync.Mutex
	seen  map[string]int // model calls per last user message
	reqs  []OpenAIRequest
	calls map[string]toolCall // tool calls by the user message that asks for them
	fails []int               // the statuses the next requests are refused with
}

// FailNext refuses the next n chat completion requests with status (a
// 429 or 5xx the client retries), each with an OpenAI error body.
func (f *OpenAIEcho) FailNext(n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.fails = append(f.fails, status)
	}
}

type toolCall struct{ name, args string }

// CallTool makes a request whose last message is the user message prompt
// answer with one call of the tool name with args (JSON); the request
// that carries its result is answered "tool said: <result>".
func (f *OpenAIEcho) CallTool(prompt, name, args string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]toolCall{}
	}
	f.calls[prompt] = toolCall{name, args}
}

// OpenAIRequest is what the fake read of one chat completion request.
type OpenAIRequest struct {
	Model           string
	ReasoningEffort string
	// LastUser is the text of its last user message.
	LastUser string
	// System is the text of its first system message: the system prompt.
	System string
	// Tools are the names of the tools it offered the model.
	Tools []string
	// Images are the URLs (data: URLs) of its image parts, in order.
	Images []string
	// Tool is the content of the tool result that ends the request, if
	// one does.
	Tool string
}

// Requests are the chat completion requests the fake took, in order.
func (f *OpenAIEcho) Requests() []OpenAIRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]OpenAIRequest(nil), f.reqs...)
}

// NewOpenAIEcho starts the fake, closed when tb ends.
func NewOpenAIEcho(tb testing.TB, delay time.Duration) *OpenAIEcho {
	f := &OpenAIEcho{delay: delay, seen: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.Close)
	return f
}

// ConfigYAML is the providers section pointing openai at the fake.
func (f *OpenAIEcho) ConfigYAML() string {
	return "providers:\n  openai:\n    api_key: sk-test-fake-key-000000000000000000000000\n    base_url: " + f.URL + "/v1\n"
}

// Models are the model ids GET /v1/models lists, as an OpenAI-compatible
// server (Ollama, LM Studio, vLLM) answers it.
var Models = []string{"gpt-test", "llama-test:8b", "qwen-test:14b"}

func (f *OpenAIEcho) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		w.Header().Set("Content-Type", "application/json")
		var data []map[string]any
		for _, id := range Models {
			data = append(data, map[string]any{"id": id, "object": "model", "owned_by": "llmtest"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Model           string `json:"model"`
		ReasoningEffort string `json:"reasoning_effort"`
		Messages        []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	last, lastRole, tool, system := "", "", "", ""
	var images []string
	for _, m := range req.Messages {
		lastRole = m.Role
		if m.Role == "tool" {
			_ = json.Unmarshal(m.Content, &tool)
		}
		if m.Role == "system" && system == "" {
			_ = json.Unmarshal(m.Content, &system)
		}
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			_ = json.Unmarshal(m.Content, &parts)
			s = ""
			for _, p := range parts {
				s += p.Text
				if p.Type == "image_url" {
					images = append(images, p.ImageURL.URL)
				}
			}
		}
		last = s
	}
	var offered []string
	for _, t := range req.Tools {
		offered = append(offered, t.Function.Name)
	}
	f.Calls.Add(1)
	f.mu.Lock()
	f.seen[last]++
	if len(f.fails) > 0 {
		status := f.fails[0]
		f.fails = f.fails[1:]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"message":"the fake is refusing this one","type":"server_error"}}`))
		return
	}
	call, calls := f.calls[last]
	if lastRole != "tool" {
		tool = ""
	}
	f.reqs = append(f.reqs, OpenAIRequest{Model: req.Model, ReasoningEffort: req.ReasoningEffort, LastUser: last, System: system, Tools: offered, Tool: tool, Images: images})
	f.mu.Unlock()
	select {
	case <-time.After(f.delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	switch {
	case calls && lastRole == "user":
		chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": call.name, "arguments": ""}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": call.args}}}}, nil)
		chunk(map[string]any{}, "tool_calls")
	case calls && lastRole == "tool":
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		chunk(map[string]any{"content": "tool said: " + tool}, nil)
		chunk(map[string]any{}, "stop")
	default:
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		chunk(map[string]any{"content": last}, nil)
		chunk(map[string]any{}, "stop")
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}
