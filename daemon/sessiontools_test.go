package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// An API session's turn through the whole daemon uses session storage with
// the configured limit, a skill from the agent's workspace and one from
// skills.dirs, and a tool its client declared, whose result the client
// posts while the run waits.
func TestSessionToolsThroughTheDaemon(t *testing.T) {
	workspace, shared := t.TempDir(), t.TempDir()
	for dir, md := range map[string]string{
		filepath.Join(workspace, "skills", "greet"): "---\nname: greet\ndescription: Greet a visitor.\n---\nSay hello in their language.",
		filepath.Join(shared, "farewell"):           "---\nname: farewell\ndescription: Say goodbye.\n---\nWave.",
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+
		"sessions:\n  kv:\n    max_value_bytes: 100\n"+
		"skills:\n  dirs: [\""+shared+"\"]\n"+
		"agents:\n  - id: default\n    workspace: \""+workspace+"\"\n    tools: [kv_set, kv_get]\n", apiOnly)
	defer stop()
	call := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	// A client tool can't take the name of one of parley's.
	if status, body := call("POST", "/v1/sessions", `{"tools": [{"name": "kv_get", "description": "mine"}]}`); status != 400 ||
		!strings.Contains(string(body), "is the name of one of parley's tools") {
		t.Fatalf("a client tool named kv_get: %d %s", status, body)
	}
	status, body := call("POST", "/v1/sessions", `{"tools": [{"name": "get_location", "description": "Where the user is."}]}`)
	var sess sessions.Session
	if status != 201 || json.Unmarshal(body, &sess) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	id := string(sess.ID)
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{
		{ID: "k1", Name: "kv_set", Arguments: json.RawMessage(`{"key": "city", "value": "Berlin"}`)},
		{ID: "k2", Name: "kv_set", Arguments: json.RawMessage(`{"key": "big", "value": "` + strings.Repeat("x", 101) + `"}`)},
		{ID: "s1", Name: "skill", Arguments: json.RawMessage(`{"name": "greet"}`)},
	}}).Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_location", Arguments: json.RawMessage(`{}`)}}}).
		Then(llm.Response{Text: "Hello from Berlin."})
	stream := d.events.Subscribe(id, api.SubscribeOptions{})
	defer stream.Close()
	// waitFor reads the session's events up to one of type typ.
	waitFor := func(typ string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			batch, err := stream.Next(ctx)
			if err != nil {
				t.Fatalf("no %s event: %v", typ, err)
			}
			for _, e := range batch {
				if e.Type == typ {
					return
				}
			}
		}
	}
	if status, body := call("POST", "/v1/sessions/"+id+"/messages", `{"content": "hi"}`); status != 202 {
		t.Fatalf("send: %d %s", status, body)
	}
	// The run waits for the client's result.
	waitFor(api.TypeToolRequested)
	if status, body := call("POST", "/v1/sessions/"+id+"/messages", `{"content": "still there?"}`); status != 409 ||
		!strings.Contains(string(body), "waiting_for_tool_results") {
		t.Fatalf("a message while waiting: %d %s", status, body)
	}
	if status, body := call("POST", "/v1/sessions/"+id+"/tool_results", `{"results": [{"call_id": "c1", "output": "Berlin"}]}`); status != 200 {
		t.Fatalf("results: %d %s", status, body)
	}
	waitFor(api.TypeTurnFinished)

	msgs, err := d.sessions.Messages(context.Background(), sess.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == sessions.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	if !strings.HasPrefix(results["k1"], `Stored "city"`) || !strings.Contains(results["k2"], "the limit per value is 100 bytes (sessions.kv.max_value_bytes)") ||
		!strings.Contains(results["s1"], "Say hello in their language.") || results["c1"] != "Berlin" {
		t.Fatalf("tool results: %q", results)
	}
	if last := msgs[len(msgs)-1]; last.Content != "Hello from Berlin." {
		t.Fatalf("reply: %+v", last)
	}
	var first llm.Request
	for _, r := range d.offline.Requests() {
		if len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Content == "hi" {
			first = r
		}
	}
	var offered []string
	for _, tool := range first.Tools {
		offered = append(offered, tool.Name)
	}
	if strings.Join(offered, " ") != "kv_set kv_get skill get_location" ||
		!strings.Contains(first.System, "- farewell: Say goodbye.\n- greet: Greet a visitor.") {
		t.Fatalf("the model was offered %v with the prompt:\n%s", offered, first.System)
	}
	status, body = call("GET", "/v1/sessions/"+id+"/kv/city", "")
	if status != 200 || !strings.Contains(string(body), `"value":"Berlin"`) {
		t.Fatalf("GET kv/city: %d %s", status, body)
	}
	status, body = call("GET", "/v1/sessions/"+id+"/kv", "")
	if status != 200 || !strings.Contains(string(body), `"max_value_bytes":100`) || strings.Contains(string(body), `"big"`) {
		t.Fatalf("GET kv: %d %s", status, body)
	}
}
