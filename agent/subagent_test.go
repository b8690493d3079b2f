package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/permissions"
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
			return AgentConfig{ID: agentID, Model: "echo", Tools: append([]string{"sessions_spawn"}, childTools...), HistoryTurns: sessions.DefaultHistoryTurns(root.Kind())}, agentID == "a"
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

// The attacker's reproduction: a stranger in a chat bound to a tool-less
// agent has it hand a task to a private agent whose MCP tool its own rules
// allow. The private agent is not among the caller's subagents, so the
// spawn is refused; once the operator lists it, its tool still asks the
// person (the caller's chat would), and their "Always" is stored for the
// agent they were talking to, not the private one.
func TestSubagentCannotCrossAgents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		spawn := call("c1", "sessions_spawn", `{"task":"read it","agent":"private"}`)
		model := echo.New().
			// Turn 1: the spawn is refused.
			Then(llm.Response{ToolCalls: []llm.ToolCall{spawn}}).
			Then(llm.Response{Text: "parent done"})
		for range 2 { // turns 2 and 3: listed, the private tool is called
			model.Then(llm.Response{ToolCalls: []llm.ToolCall{spawn}}).
				Then(llm.Response{ToolCalls: []llm.ToolCall{call("p1", "priv__secret", `{}`)}}).
				Then(llm.Response{Text: "child done"}).
				Then(llm.Response{Text: "parent done"})
		}
		e := newEnvOn(t, db, model)
		var ran atomic.Int32
		e.register(tools.Tool{Name: "priv__secret", Run: func(context.Context, tools.Call) (string, error) {
			ran.Add(1)
			return "the secret", nil
		}})
		pol, err := permissions.NewPolicy(map[string][]permissions.Rule{"private": {{Tool: "priv__*", Decision: permissions.Allow}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := permissions.NewStore(db)
		e.tools.SetPermissions(permissions.NewChecker(permissions.Options{Policy: pol, Store: st}))
		var subagents []string
		e.register(e.runner.SpawnTool(SpawnOptions{
			Resolve: func(ctx context.Context, key sessions.Key) (sessions.Session, error) {
				s, _, err := e.store.Resolve(ctx, key, sessions.Policy{})
				return s, err
			},
			Config: func(agentID string, root sessions.Key) (AgentConfig, bool) {
				switch agentID {
				case "public":
					return AgentConfig{ID: agentID, Model: "echo", Tools: []string{"sessions_spawn"}}, true
				case "private":
					return AgentConfig{ID: agentID, Model: "echo", Tools: []string{"priv__secret"}}, true
				}
				return AgentConfig{}, false
			},
			Subagents: func(agentID string) []string {
				if agentID == "public" {
					return subagents
				}
				return nil
			},
		}))
		var asked atomic.Int32
		always := askerFunc(func(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
			asked.Add(1)
			if q.User != "telegram:666" || q.Tool != "priv__secret" {
				t.Errorf("asked %q about %s", q.User, q.Tool)
			}
			return permissions.AllowAlways, nil
		})
		group := e.session(sessions.GroupKey("telegram", "-100", "public"))
		turn := func() string {
			t.Helper()
			res, err := e.run(Request{Session: group, Agent: AgentConfig{ID: "public", Model: "echo", Tools: []string{"sessions_spawn"}},
				Inputs: []Input{{Text: "go"}}, User: "telegram:666", Asker: always})
			if err != nil || res.Reply != "parent done" {
				t.Fatalf("turn: %q, %v", res.Reply, err)
			}
			return strings.Join(roles(e.messages(group.ID)), "\n")
		}

		// Not listed: refused, in the words an unknown agent gets.
		if got := turn(); !strings.Contains(got, `there is no agent "private" this agent may hand tasks to`) || ran.Load() != 0 || asked.Load() != 0 {
			t.Fatalf("the spawn of an unlisted agent ran the tool %d times, asked %d: %s", ran.Load(), asked.Load(), got)
		}
		// Listed: the private tool runs only once the person says so.
		subagents = []string{"private"}
		turn()
		if ran.Load() != 1 || asked.Load() != 1 {
			t.Fatalf("listed: the private tool ran %d times, asked %d", ran.Load(), asked.Load())
		}
		gs, err := st.ProjectGrants(ctx, "", "")
		if err != nil || len(gs) != 1 || gs[0].Agent != "public" || gs[0].User != "telegram:666" || gs[0].Tool != "priv__secret" {
			t.Fatalf("stored grants %+v, %v; want one, for agent public", gs, err)
		}
		// The answer holds for the agent the person talks to.
		turn()
		if ran.Load() != 2 || asked.Load() != 1 {
			t.Fatalf("after Always: the private tool ran %d times, asked %d", ran.Load(), asked.Load())
		}
	})
}
