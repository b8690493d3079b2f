package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
)

// Sessions on a harness, through the API on both engines: created from a
// harness with a capability of their own, they show the features both
// give; a turn runs with the harness's prompt and its capabilities' tools;
// a capability added and an agent switched are recorded in the history;
// an unknown harness or capability is a 400 naming it and creates nothing;
// and when the harness changes in the config, a session that began on it
// keeps its version while a new one gets the new.
func TestSessionsOnAHarness(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		model := llmtest.NewOpenAIEcho(t, 0)
		yaml := "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\"" + apiToken + "\"]\n" + model.ConfigYAML() +
			"agents:\n  - id: default\n    model: openai/gpt-test\n    tools: [memory_search]\n  - id: other\n    model: openai/gpt-test\n" +
			"harnesses:\n  - id: notebook\n    prompt: HARNESS-V1\n    capabilities: [sql]\n"
		path := writeConfigAt(t, dbURL, yaml)
		d, url, stop := testDaemonAt(t, path, apiOnly)
		defer stop()
		c := &client.Client{Base: url, Token: apiToken}

		type view struct {
			ID       string          `json:"id"`
			Activity string          `json:"activity"`
			Features []string        `json:"features"`
			Metadata json.RawMessage `json:"metadata"`
		}
		var s view
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"harness": "notebook", "capabilities": []string{"files"}}, &s); err != nil {
			t.Fatal(err)
		}
		if want := []string{"files", "harness:notebook", "memory", "sql"}; !slices.Equal(s.Features, want) || s.Activity != "started" {
			t.Fatalf("new session: features %q, activity %q; want %q, started", s.Features, s.Activity, want)
		}
		turn := func(id, text string) llmtest.OpenAIRequest {
			t.Helper()
			before := len(model.Requests())
			if err := c.Do(ctx, "POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": text}, &struct{}{}); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 20*time.Second, "the turn's model call", func() bool {
				msgs, _ := d.sessions.Messages(ctx, sessions.ID(id), sessions.MessagesOptions{})
				return len(model.Requests()) > before && len(msgs) > 0 && msgs[len(msgs)-1].Role == sessions.RoleAssistant
			})
			return model.Requests()[len(model.Requests())-1]
		}
		req := turn(s.ID, "hello")
		if !strings.HasPrefix(req.System, "HARNESS-V1") {
			t.Fatalf("the turn's system prompt does not start with the harness's:\n%s", req.System)
		}
		for _, tool := range []string{"sql_exec", "sql_query", "file_read", "send_file", "memory_search"} {
			if !slices.Contains(req.Tools, tool) {
				t.Fatalf("the turn offered %q, without %s", req.Tools, tool)
			}
		}

		// Bad input: a 400 naming it, and nothing made or changed.
		before, _ := d.sessions.List(ctx, sessions.ListOptions{Limit: 100})
		for _, tc := range []struct {
			method, path string
			body         map[string]any
			says         string
		}{
			{"POST", "/v1/sessions", map[string]any{"harness": "nope"}, `harness "nope"`},
			{"POST", "/v1/sessions", map[string]any{"capabilities": []string{"sql", "teleport"}}, `"teleport" is not a capability`},
			{"POST", "/v1/sessions", map[string]any{"capabilities": []string{"mcp:ghost"}}, `"mcp:ghost" names no MCP server`},
			{"PATCH", "/v1/sessions/" + s.ID, map[string]any{"add_capabilities": []string{"teleport"}}, `"teleport" is not a capability`},
			{"PATCH", "/v1/sessions/" + s.ID, map[string]any{"metadata": map[string]any{"harness": map[string]string{"id": "notebook", "version": "x"}}}, "harness is fixed"},
		} {
			err := c.Do(ctx, tc.method, tc.path, tc.body, &struct{}{})
			if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%s %s %v: %v; want a 400 saying %s", tc.method, tc.path, tc.body, err, tc.says)
			}
		}
		after, _ := d.sessions.List(ctx, sessions.ListOptions{Limit: 100})
		if len(after.Sessions) != len(before.Sessions) {
			t.Fatalf("a refused create made a session: %d, then %d", len(before.Sessions), len(after.Sessions))
		}

		// A capability added and the agent switched: in the history.
		if err := c.Do(ctx, "PATCH", "/v1/sessions/"+s.ID, map[string]any{"add_capabilities": []string{"kv"}, "agent": "other"}, &s); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(s.Features, "kv") || s.Activity != "idle" {
			t.Fatalf("after adding kv: features %q, activity %q", s.Features, s.Activity)
		}
		msgs, err := d.sessions.Messages(ctx, sessions.ID(s.ID), sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, m := range msgs {
			if m.Synthetic && m.Role == sessions.RoleSystem {
				notes = append(notes, m.Content)
			}
		}
		if got := strings.Join(notes, " | "); got != "Agent switched from default to other. | Capabilities added: kv." {
			t.Fatalf("history notes: %q", got)
		}
		if req := turn(s.ID, "again"); !slices.Contains(req.Tools, "kv_get") || !strings.HasPrefix(req.System, "HARNESS-V1") {
			t.Fatalf("after adding kv the turn offered %q with prompt %q", req.Tools, req.System)
		}

		// The harness changes: the session keeps its version; a new one
		// gets the new.
		next, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		next.Harnesses[0].Prompt = "HARNESS-V2"
		if err := d.Reload(ctx, next, nil); err != nil {
			t.Fatal(err)
		}
		if req := turn(s.ID, "still v1?"); !strings.HasPrefix(req.System, "HARNESS-V1") {
			t.Fatalf("a running session moved to the changed harness:\n%s", req.System)
		}
		var fresh view
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"harness": "notebook"}, &fresh); err != nil {
			t.Fatal(err)
		}
		if req := turn(fresh.ID, "v2?"); !strings.HasPrefix(req.System, "HARNESS-V2") {
			t.Fatalf("a new session did not get the changed harness:\n%s", req.System)
		}
		if string(fresh.Metadata) == string(s.Metadata) {
			t.Fatalf("both sessions name the same harness version: %s", fresh.Metadata)
		}
	})
}

// A binding's harness is pinned for the sessions it routes at their first
// turn, and kept.
func TestBindingHarnessIsPinned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	model := llmtest.NewOpenAIEcho(t, 0)
	d, _, stop := testDaemon(t, "gateway:\n  debounce: 0s\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n"+
		"harnesses:\n  - id: desk\n    prompt: DESK-HARNESS\n    capabilities: [sql]\n"+
		"bindings:\n  - agent: default\n    adapter: api\n    harness: desk\n", apiOnly)
	defer stop()
	in := adapters.Inbound{Adapter: "api", Surface: "api", ChatID: "bound", UserID: "u", MessageID: "1", Text: "hi", Time: time.Now()}
	if err := d.gw.Deliver(ctx, in); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the turn", func() bool { return len(model.Requests()) > 0 })
	if req := model.Requests()[0]; !strings.HasPrefix(req.System, "DESK-HARNESS") || !slices.Contains(req.Tools, "sql_exec") {
		t.Fatalf("the bound session's turn: prompt %q, tools %q", req.System, req.Tools)
	}
	list, err := d.sessions.List(ctx, sessions.ListOptions{Limit: 10})
	if err != nil || len(list.Sessions) != 1 || !strings.Contains(string(list.Sessions[0].Metadata), `"harness":{"id":"desk"`) {
		t.Fatalf("the bound session's metadata: %+v %v", list.Sessions, err)
	}
}
