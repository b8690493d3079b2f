package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/skills"
	"github.com/parleyd/parley/tools"
)

// TestBuiltinToolsDecodeAlike calls the built-in tools of every domain with
// bad arguments, as a model could write them (a tool's Run is called here
// directly, past the schema check the registry makes first), and wants the
// same refusal, in the same words, from each: they all read their arguments
// through tools.Decode. Their stores are nil: arguments are read before
// anything else, so a tool that accepts bad arguments panics, and the call
// reports that it accepted them.
func TestBuiltinToolsDecodeAlike(t *testing.T) {
	byName := map[string]tools.Tool{}
	all := (*cron.Scheduler)(nil).Tools(cron.ToolOptions{})
	all = append(all, memory.Tools(nil)...)
	all = append(all, (*agent.Runner)(nil).SpawnTool(agent.SpawnOptions{}))
	all = append(all, kv.Tools(nil)...)
	all = append(all, skills.Tool(nil))
	for _, tool := range all {
		byName[tool.Name] = tool
	}
	// Each tool's valid arguments, and its string, list and number fields.
	type shape struct {
		valid   map[string]any
		strings []string
		lists   []string
		numbers []string
	}
	shapes := map[string]shape{
		cron.CreateToolName:   {valid: map[string]any{"schedule": "@daily", "prompt": "p"}, strings: []string{"schedule", "prompt", "timezone"}, lists: []string{"notify"}},
		cron.ListToolName:     {},
		cron.DeleteToolName:   {valid: map[string]any{"id": "j1"}, strings: []string{"id"}},
		memory.WriteToolName:  {valid: map[string]any{"content": "c"}, strings: []string{"content"}, lists: []string{"tags"}},
		memory.SearchToolName: {valid: map[string]any{"query": "q"}, strings: []string{"query"}, numbers: []string{"limit"}},
		"sessions_spawn":      {valid: map[string]any{"task": "t"}, strings: []string{"task", "agent"}},
		kv.GetToolName:        {valid: map[string]any{"key": "k"}, strings: []string{"key"}},
		kv.SetToolName:        {valid: map[string]any{"key": "k", "value": "v"}, strings: []string{"key", "value"}},
		kv.ListToolName:       {strings: []string{"prefix", "cursor"}},
		kv.DeleteToolName:     {valid: map[string]any{"key": "k"}, strings: []string{"key"}},
		skills.ToolName:       {valid: map[string]any{"name": "s"}, strings: []string{"name", "file"}},
	}
	if len(shapes) != len(byName) {
		t.Fatalf("tools %v; the test knows %d of them", toolNames(byName), len(shapes))
	}
	type check struct{ name, args, want string }
	for name, sh := range shapes {
		// with is the valid arguments with field set to v.
		with := func(field string, v any) string {
			m := map[string]any{}
			for k, x := range sh.valid {
				m[k] = x
			}
			if field != "" {
				m[field] = v
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		checks := []check{
			{"unknown field", with("zzz", 1), `unknown field "zzz"`},
			{"not an object", `["x"]`, "arguments must be a JSON object, not a JSON array"},
			{"extra data", with("", nil) + ` {}`, "arguments are not a valid object: extra data after the JSON value"},
		}
		for _, f := range sh.strings {
			checks = append(checks, check{f + " a number", with(f, 5), f + " must be a string, not a JSON number"})
		}
		for _, f := range sh.lists {
			checks = append(checks,
				check{f + " a string", with(f, "x"), f + " must be a list of strings, not a JSON string"},
				check{f + " item a number", with(f, []any{7}), f + " must be a list of strings; an item is a JSON number"})
		}
		for _, f := range sh.numbers {
			checks = append(checks, check{f + " a string", with(f, "5"), f + " must be a whole number, not a JSON string"})
		}
		for _, c := range checks {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				out, err := run(byName[name], c.args)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s(%s) = %q, %v; want an error saying %q", name, c.args, out, err, c.want)
				}
			})
		}
	}
}

// run calls tool as the registry would after its schema check, and turns a
// panic (the tool went past its arguments to its nil store) into an answer.
func run(tool tools.Tool, args string) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = fmt.Sprintf("accepted the arguments (then panicked on its nil store: %v)", p), nil
		}
	}()
	key := sessions.ChatKey("telegram", "1001", "alice", "main")
	return tool.Run(context.Background(), tools.Call{Name: tool.Name, SessionID: "s", Key: key, ID: "c1", Arguments: json.RawMessage(args)})
}

func toolNames(m map[string]tools.Tool) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	return names
}
