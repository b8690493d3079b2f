package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
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
	got, err := r.Select([]string{"ping", "weather", "ping"})
	if err != nil || len(got) != 2 || got[0].Name != "ping" || got[1].Name != "weather" {
		t.Errorf("Select = %v, %v; want ping, weather in order", got, err)
	}
	if _, err := r.Select([]string{"weather", "teleport"}); !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), "teleport") {
		t.Errorf("Select unknown = %v, want ErrUnknownTool naming teleport", err)
	}
	if names := r.Names(); strings.Join(names, ",") != "ping,weather" {
		t.Errorf("Names = %v", names)
	}
	var none *Registry
	if _, err := none.Select([]string{"ping"}); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("nil registry Select = %v, want ErrUnknownTool", err)
	}
}

// TestCall covers the one door: every outcome is a Result whose IsError is
// the fact, whatever the text says.
func TestCall(t *testing.T) {
	r := NewRegistry()
	var ran []string
	for _, tool := range []Tool{
		{Name: "weather", Schema: json.RawMessage(weatherSchema), Run: func(_ context.Context, c Call) (string, error) {
			ran = append(ran, c.Name+" "+c.ID)
			return "sunny", nil
		}},
		// Output that reads like an error is still output.
		{Name: "grep", Run: func(context.Context, Call) (string, error) { return "error: disk full (line 3 of the log)", nil }},
		{Name: "fails", Run: func(context.Context, Call) (string, error) { return "", errors.New("disk full") }},
		{Name: "panics", Run: func(context.Context, Call) (string, error) { panic("boom") }},
		{Name: "waits", Run: func(ctx context.Context, _ Call) (string, error) { <-ctx.Done(); return "", ctx.Err() }},
	} {
		if err := r.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		call    Call
		content string // the whole text, or its start when it ends in "..."
		isError bool
		errIs   error
	}{
		{"ok", context.Background(), Call{Name: "weather", ID: "c1", Arguments: json.RawMessage(`{"city": "Paris"}`)}, "sunny", false, nil},
		{"output that looks like an error", context.Background(), Call{Name: "grep"}, "error: disk full (line 3 of the log)", false, nil},
		{"unknown", context.Background(), Call{Name: "nope"}, "error: unknown tool nope", true, ErrUnknownTool},
		{"invalid", context.Background(), Call{Name: "weather", Arguments: json.RawMessage(`{"days": 2}`)},
			"error: invalid arguments: at /: missing property 'city'", true, ErrInvalidArguments},
		{"not json", context.Background(), Call{Name: "weather", Arguments: json.RawMessage(`{"city": "Paris"} {}`)},
			"error: invalid arguments: arguments are not valid JSON: extra data after the JSON value", true, ErrInvalidArguments},
		{"tool error", context.Background(), Call{Name: "fails"}, "error: disk full", true, nil},
		{"panic", context.Background(), Call{Name: "panics"}, "error: tool panics crashed: boom", true, nil},
		{"aborted", canceled, Call{Name: "waits"}, "aborted", true, ErrAborted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Call(tc.ctx, tc.call)
			if res.Content != tc.content || res.IsError != tc.isError || (res.Err != nil) != tc.isError {
				t.Fatalf("Call = %+v, want content %q, IsError %v", res, tc.content, tc.isError)
			}
			if tc.errIs != nil && !errors.Is(res.Err, tc.errIs) {
				t.Errorf("Err = %v, want %v", res.Err, tc.errIs)
			}
		})
	}
	var pe *PanicError
	if res := r.Call(context.Background(), Call{Name: "panics"}); !errors.As(res.Err, &pe) || len(pe.Stack) == 0 || pe.Tool != "panics" {
		t.Errorf("panic Err = %#v, want a *PanicError with the stack", res.Err)
	}
	if strings.Join(ran, ";") != "weather c1" {
		t.Errorf("ran %v; want only the valid weather call", ran)
	}
	var none *Registry
	if res := none.Call(context.Background(), Call{Name: "x"}); !res.IsError || !errors.Is(res.Err, ErrUnknownTool) {
		t.Errorf("nil registry Call = %+v", res)
	}
}

// With a scrub set, a tool's output and error (its text; errors.Is still
// sees the error) have the secrets hidden, whatever tool said them.
func TestCallResultsAreScrubbed(t *testing.T) {
	const secret = "vault-value-0123456789"
	errBackend := errors.New("backend down")
	r := NewRegistry()
	_ = r.Register(Tool{Name: "says", Run: func(context.Context, Call) (string, error) { return "token " + secret, nil }})
	_ = r.Register(Tool{Name: "fails", Run: func(context.Context, Call) (string, error) {
		return "", fmt.Errorf("%w: with %s", errBackend, secret)
	}})
	r.SetScrub(func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") })
	for _, name := range []string{"says", "fails"} {
		res := r.Call(context.Background(), Call{Name: name, Arguments: json.RawMessage(`{}`)})
		text := res.Content
		if res.Err != nil {
			text += res.Err.Error()
		}
		if strings.Contains(text, secret) || !strings.Contains(res.Content, "[redacted]") {
			t.Errorf("%s: %+v", name, res)
		}
	}
	if res := r.Call(context.Background(), Call{Name: "fails", Arguments: json.RawMessage(`{}`)}); !errors.Is(res.Err, errBackend) {
		t.Errorf("the scrubbed error lost its cause: %v", res.Err)
	}
}
