package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

func spawnEnv(t *testing.T, model llm.Model, roots *[]sessions.Key, childTools ...string) *env {
	e := newEnv(t, model)
	var mu sync.Mutex
	e.register(e.runner.SpawnTool(SpawnOptions{
		Resolve: func(ctx context.Context, key sessions.Key) (sessions.Session, error) {
			s, _, err := e.store.Resolve(ctx, key, sessions.Policy{})
			return s, err
		},
		Config: func(agentID string, root sessions.Key) (AgentConfig, bool) {
			mu.Lock()
			*roots = append(*roots, root)
			mu.Unlock()
			return AgentConfig{ID: agentID, Model: "echo", Tools: append([]string{"sessions_spawn"}, childTools...), HistoryTurns: historyTurns(root.Kind())}, agentID == "a"
		},
	}))
	return e
}

// A subagent works in a child session and its answer is the tool result;
// a child of a child still inherits the root's history limit.
func TestSubagentAnswersAndInheritsTheRoot(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "sessions_spawn", `{"task":"find the date"}`)}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c2", "sessions_spawn", `{"task":"look deeper"}`)}}).
		Then(llm.Response{Text: "deep answer"}).
		Then(llm.Response{Text: "child answer"}).
		Then(llm.Response{Text: "parent answer"})
	var roots []sessions.Key
	e := spawnEnv(t, model, &roots)
	parent := e.session(sessions.ChatKey("telegram", "42", "7", "a"))
	res, err := e.run(Request{Session: parent, Agent: AgentConfig{ID: "a", Model: "echo", Tools: []string{"sessions_spawn"}},
		Inputs: []Input{{Text: "go"}}})
	if err != nil || res.Reply != "parent answer" {
		all, _ := e.store.List(context.Background(), sessions.ListOptions{Limit: 10})
		for _, s := range all.Sessions {
			t.Logf("%s: %q", s.Key, roles(e.messages(s.ID)))
		}
		t.Fatalf("parent: %q %v", res.Reply, err)
	}
	got := roles(e.messages(parent.ID))
	if !strings.Contains(strings.Join(got, "\n"), "tool[c1]:child answer") {
		t.Fatalf("the child's answer is not the tool result: %q", got)
	}
	if len(roots) != 2 || roots[0].Surface != "telegram" || roots[1].Surface != "telegram" || roots[1].Kind() != "channel" {
		t.Fatalf("roots seen: %+v", roots)
	}
}

func TestSubagentDepthLimit(t *testing.T) {
	var roots []sessions.Key
	e := spawnEnv(t, echo.New(), &roots)
	tool, _ := e.tools.Tool("sessions_spawn")
	key := sessions.ChatKey("telegram", "42", "7", "a")
	for range MaxSubagentDepth {
		key = sessions.SubagentKey(key, time.Now(), "x", "a")
	}
	if d := SubagentDepth(key); d != MaxSubagentDepth {
		t.Fatalf("depth %d", d)
	}
	_, err := tool.Run(context.Background(), tools.Call{Key: key, Arguments: []byte(`{"task":"more"}`)})
	if err == nil || !strings.Contains(err.Error(), "at most 3 deep") {
		t.Fatalf("at depth 3: %v", err)
	}
	if _, err := tool.Run(context.Background(), tools.Call{Key: sessions.ChatKey("telegram", "42", "7", "a"), Arguments: []byte(`{"task":"x","agent":"nobody"}`)}); err == nil || !strings.Contains(err.Error(), `no agent "nobody"`) {
		t.Fatalf("unknown agent: %v", err)
	}
}

// Aborting the parent aborts the child: the child's tool call in flight
// records "aborted by parent".
func TestAbortingTheParentAbortsTheChild(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "sessions_spawn", `{"task":"wait"}`)}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("s1", "slow", `{}`)}})
	var roots []sessions.Key
	e := spawnEnv(t, model, &roots, "slow")
	started := make(chan struct{})
	e.register(tools.Tool{Name: "slow", Run: func(ctx context.Context, c tools.Call) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}})
	parent := e.session(sessions.ChatKey("telegram", "42", "7", "a"))
	done := make(chan error, 1)
	go func() {
		_, err := e.run(Request{Session: parent, Agent: AgentConfig{ID: "a", Model: "echo", Tools: []string{"sessions_spawn"}},
			Inputs: []Input{{Text: "go"}}})
		done <- err
	}()
	wait(t, started, "the child's tool")
	if !e.runner.Abort(parent.ID) {
		t.Fatal("nothing to abort")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("parent ended with %v", err)
	}
	children, err := e.store.List(context.Background(), sessions.ListOptions{Limit: 10, Surface: sessions.SurfaceSubagent})
	if err != nil || len(children.Sessions) != 1 {
		t.Fatalf("children: %+v %v", children, err)
	}
	var result string
	for _, m := range e.messages(children.Sessions[0].ID) {
		if m.Role == sessions.RoleTool && m.ToolCallID == "s1" {
			result = m.Content
		}
	}
	if result != "aborted by parent" {
		t.Fatalf("the child's tool call recorded %q", result)
	}
}
