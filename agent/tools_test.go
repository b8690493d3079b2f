package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
)

const weatherSchema = `{
	"type": "object",
	"properties": {
		"city": {"type": "string"},
		"days": {"type": "integer"},
		"unit": {"enum": ["c", "f"]},
		"tags": {"type": "array", "items": {"type": "string"}}
	},
	"required": ["city"],
	"additionalProperties": false
}`

func TestRegistry(t *testing.T) {
	run := func(context.Context, Call) (string, error) { return "", nil }
	r := NewRegistry()
	if err := r.Register(Tool{Name: "weather", Schema: json.RawMessage(weatherSchema), Run: run}); err != nil {
		t.Fatalf("register: %v", err)
	}
	tests := []struct {
		name string
		tool Tool
		want error
	}{
		{"duplicate", Tool{Name: "weather", Run: run}, ErrDuplicateTool},
		{"invalid schema", Tool{Name: "bad", Schema: json.RawMessage(`{"type": 12}`), Run: run}, ErrInvalidTool},
		{"schema not json", Tool{Name: "bad2", Schema: json.RawMessage(`{`), Run: run}, ErrInvalidTool},
		{"no name", Tool{Run: run}, ErrInvalidTool},
		{"no run", Tool{Name: "norun"}, ErrInvalidTool},
		{"no schema is fine", Tool{Name: "ping", Run: run}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Register(tc.tool)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Register = %v, want %v", err, tc.want)
			}
		})
	}
	if _, ok := r.Tool("weather"); !ok {
		t.Error("Tool(weather) not found")
	}
	got, err := r.Select([]string{"ping", "weather"})
	if err != nil || len(got) != 2 || got[0].Name != "ping" || got[1].Name != "weather" {
		t.Errorf("Select = %v, %v; want ping, weather in order", got, err)
	}
	if _, err := r.Select([]string{"weather", "teleport"}); !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), "teleport") {
		t.Errorf("Select unknown = %v, want ErrUnknownTool naming teleport", err)
	}
}

func TestInvalidArgumentsBecomeToolResult(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string // substring of the tool result
	}{
		{"valid", `{"city": "Paris", "days": 2}`, "sunny"},
		{"missing required", `{"days": 2}`, "city"},
		{"wrong type", `{"city": "Paris", "days": "two"}`, "/days"},
		{"not in enum", `{"city": "Paris", "unit": "k"}`, "/unit"},
		{"bad item", `{"city": "Paris", "tags": [1]}`, "/tags/0"},
		{"extra property", `{"city": "Paris", "wind": true}`, "wind"},
		{"not json", `{"city": `, "not valid JSON"},
		{"not an object", `[1]`, "object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := echo.New().
				Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "weather", tc.args)}}).
				Then(llm.Response{Text: "ok"})
			e := newEnv(t, model)
			var ran atomic.Bool
			e.register(Tool{Name: "weather", Schema: json.RawMessage(weatherSchema),
				Run: func(context.Context, Call) (string, error) { ran.Store(true); return "sunny", nil }})
			sess := e.cliSession()
			if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"weather"}}, Inputs: []Input{{Text: "weather?"}}}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			result := e.messages(sess.ID)[2]
			t.Logf("result: %s", result.Content)
			if result.ToolCallID != "c1" || !strings.Contains(result.Content, tc.want) {
				t.Fatalf("tool result = %+v, want it to contain %q", result, tc.want)
			}
			valid := tc.name == "valid"
			if valid != ran.Load() {
				t.Errorf("tool ran = %v, want %v", ran.Load(), valid)
			}
			if !valid && !strings.HasPrefix(result.Content, "error: invalid arguments: ") {
				t.Errorf("tool result = %q, want the invalid arguments prefix", result.Content)
			}
		})
	}
}

func TestUnknownAndUnselectedTools(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "nope", `{}`), call("c2", "hidden", `{}`), call("c3", "ping", `{}`)}}).
		Then(llm.Response{Text: "ok"})
	e := newEnv(t, model)
	e.register(textTool("ping", "pong"), textTool("hidden", "secret"))
	sess := e.cliSession()
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"ping"}}, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := roles(e.messages(sess.ID))[2:5]
	want := []string{"tool[c1]:error: unknown tool nope", "tool[c2]:error: unknown tool hidden", "tool[c3]:pong"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tools := model.Requests()[0].Tools; len(tools) != 1 || tools[0].Name != "ping" {
		t.Errorf("tools offered = %+v, want only ping", tools)
	}
}

func TestToolErrorAndPanic(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "fails", `{}`), call("c2", "panics", `{}`)}}).
		Then(llm.Response{Text: "ok"})
	e := newEnv(t, model)
	e.register(
		Tool{Name: "fails", Run: func(context.Context, Call) (string, error) { return "", errors.New("disk full") }},
		Tool{Name: "panics", Run: func(context.Context, Call) (string, error) { panic("boom") }},
	)
	sess := e.cliSession()
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"fails", "panics"}}, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	msgs := e.messages(sess.ID)
	if msgs[2].Content != "error: disk full" {
		t.Errorf("error result = %q", msgs[2].Content)
	}
	if !strings.HasPrefix(msgs[3].Content, "error: tool panics crashed: boom") {
		t.Errorf("panic result = %q", msgs[3].Content)
	}
}
