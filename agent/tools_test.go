package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/tools"
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
			e.register(tools.Tool{Name: "weather", Schema: json.RawMessage(weatherSchema),
				Run: func(context.Context, tools.Call) (string, error) { ran.Store(true); return "sunny", nil }})
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
		tools.Tool{Name: "fails", Run: func(context.Context, tools.Call) (string, error) { return "", errors.New("disk full") }},
		tools.Tool{Name: "panics", Run: func(context.Context, tools.Call) (string, error) { panic("boom") }},
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

// TestToolCompletedIsErrorIsTheFact: tool.completed says a call failed when
// it failed, not when its output happens to start like an error.
func TestToolCompletedIsErrorIsTheFact(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "grep", `{}`), call("c2", "status", `{}`), call("c3", "fails", `{}`), call("c4", "nope", `{}`)}}).
		Then(llm.Response{Text: "ok"})
	e := newEnv(t, model)
	e.register(
		textTool("grep", "error: disk full (line 3 of the log)"),
		textTool("status", "aborted jobs: none"),
		tools.Tool{Name: "fails", Run: func(context.Context, tools.Call) (string, error) { return "", errors.New("disk full") }},
	)
	sub := e.bus.Subscribe(EventToolCompleted)
	sess := e.cliSession()
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"grep", "status", "fails"}}, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]ToolEvent{}
	for sub.Pending() > 0 {
		ev, _ := sub.Next(context.Background())
		te := ev.Data.(ToolEvent)
		got[te.CallID] = te
	}
	for _, want := range []ToolEvent{
		{CallID: "c1", Name: "grep", Result: "error: disk full (line 3 of the log)", IsError: false},
		{CallID: "c2", Name: "status", Result: "aborted jobs: none", IsError: false},
		{CallID: "c3", Name: "fails", Result: "error: disk full", IsError: true},
		{CallID: "c4", Name: "nope", Result: "error: unknown tool nope", IsError: true},
	} {
		if got[want.CallID] != want {
			t.Errorf("tool.completed %s = %+v, want %+v", want.CallID, got[want.CallID], want)
		}
	}
}

// A tool's retry policy works inside a turn: each failed try is a
// tool.retrying event, tool.completed counts the tries, and the stored
// tool result keeps the failed tries in its metadata.
func TestToolRetriesInATurn(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "flaky", `{}`)}}).
		Then(llm.Response{Text: "ok"})
	e := newEnv(t, model)
	var tries atomic.Int32
	e.register(tools.Tool{Name: "flaky", Retry: &tools.Retry{Attempts: 3, On: tools.Classes},
		Run: func(context.Context, tools.Call) (string, error) {
			if tries.Add(1) < 3 {
				return "", tools.ClassError(tools.ClassUnavailable, errors.New("the server broke off"))
			}
			return "third time", nil
		}})
	sub := e.bus.Subscribe(EventToolRetrying, EventToolCompleted)
	defer sub.Close()
	sess := e.cliSession()
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"flaky"}}, Inputs: []Input{{Text: "go"}}}); err != nil {
		t.Fatal(err)
	}
	var retried []int
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d := ev.Data.(ToolEvent)
		if ev.Type == EventToolRetrying {
			if d.Retry == nil || d.Retry.Class != tools.ClassUnavailable {
				t.Fatalf("retrying event %+v", d)
			}
			retried = append(retried, d.Retry.N)
			continue
		}
		if d.Attempts != 3 || d.IsError || d.Result != "third time" || fmt.Sprint(retried) != "[1 2]" {
			t.Fatalf("completed %+v after retrying events for tries %v; want 3 tries, the first two retried", d, retried)
		}
		break
	}
	result := e.messages(sess.ID)[2]
	var meta struct {
		Attempts []tools.Attempt `json:"attempts"`
	}
	if err := json.Unmarshal(result.Metadata, &meta); err != nil || len(meta.Attempts) != 2 || meta.Attempts[1].N != 2 ||
		!strings.Contains(meta.Attempts[0].Error, "broke off") || result.Content != "third time" {
		t.Fatalf("stored result %q with metadata %s (%v)", result.Content, result.Metadata, err)
	}
}
