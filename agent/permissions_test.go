package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// askerFunc is an Asker from a function.
type askerFunc func(ctx context.Context, q permissions.Question) (permissions.Answer, error)

func (f askerFunc) Ask(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
	return f(ctx, q)
}

// A tool call that must be asked about pauses the turn: the status shows
// waiting_for_permission, the question and its outcome are published, and
// the turn goes on with the answer. With nobody to ask, the call is
// denied and the model reads why; the turn still answers.
func TestTurnAsksForPermission(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "gh__list", `{"repo":"parley"}`)}}).
		Then(llm.Response{Text: "listed"}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c2", "gh__list", `{}`)}}).
		Then(llm.Response{Text: "could not list"})
	e := newEnv(t, model)
	e.register(textTool("gh__list", "3 issues"))
	e.tools.SetPermissions(permissions.NewChecker(permissions.Options{}))
	sub := e.bus.Subscribe(EventPermissionRequested, EventPermissionResolved)
	defer sub.Close()
	sess := e.cliSession()
	agentCfg := AgentConfig{ID: "a1", Tools: []string{"gh__list"}}

	asked := make(chan permissions.Question, 1)
	answer := make(chan permissions.Answer)
	asker := askerFunc(func(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
		asked <- q
		return <-answer, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := e.run(Request{Session: sess, Agent: agentCfg, Inputs: []Input{{Text: "list issues"}}, Asker: asker})
		done <- err
	}()
	q := <-asked
	if q.Tool != "gh__list" || q.User != "cli:u1" || q.SessionID != string(sess.ID) || len(q.Choices) != 4 {
		t.Fatalf("question %+v", q)
	}
	if st := e.runner.Status(sess.ID); st.State != StateWaitingForPermission || !strings.Contains(st.Message, "gh__list") {
		t.Fatalf("status while asking: %+v", st)
	}
	answer <- permissions.AllowOnce
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs := e.messages(sess.ID)
	if got := roles(msgs); got[2] != "tool[c1]:3 issues" || got[3] != "assistant:listed" {
		t.Fatalf("messages %q", got)
	}
	ctx := context.Background()
	for _, want := range []events.Type{EventPermissionRequested, EventPermissionResolved} {
		ev, err := sub.Next(ctx)
		if err != nil || ev.Type != want || ev.SessionID != string(sess.ID) {
			t.Fatalf("event %+v, %v; want %s", ev, err, want)
		}
		if r, ok := ev.Data.(PermissionRequested); ok && (r.RequestID != q.ID || r.Arguments != `{"repo":"parley"}`) {
			t.Fatalf("requested %+v", r)
		}
		if r, ok := ev.Data.(PermissionResolved); ok && (r.RequestID != q.ID || r.Answer != "once") {
			t.Fatalf("resolved %+v", r)
		}
	}

	// Nobody to ask: denied, and the turn answers anyway.
	if _, err := e.run(Request{Session: sess, Agent: agentCfg, Inputs: []Input{{Text: "again"}}}); err != nil {
		t.Fatal(err)
	}
	msgs = e.messages(sess.ID)[len(msgs):]
	if got := roles(msgs); len(got) != 4 || !strings.HasPrefix(got[2], "tool[c2]:error: permission denied: gh__list") || got[3] != "assistant:could not list" {
		t.Fatalf("messages %q", got)
	}
	if st := e.runner.Status(sess.ID); st.State != StateIdle {
		t.Fatalf("status after: %+v", st)
	}
}

// A subagent's tool calls ask the person the parent turn answers.
func TestSubagentAsksTheParentsPerson(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("p1", "sessions_spawn", `{"task":"list"}`)}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("k1", "gh__list", `{}`)}}).
		Then(llm.Response{Text: "child done"}).
		Then(llm.Response{Text: "parent done"})
	e := newEnv(t, model)
	e.register(textTool("gh__list", "3 issues"))
	cfg := AgentConfig{ID: "a1", Tools: []string{"gh__list", "sessions_spawn"}}
	e.register(e.runner.SpawnTool(SpawnOptions{
		Resolve: func(ctx context.Context, key sessions.Key) (sessions.Session, error) {
			s, _, err := e.store.Resolve(ctx, key, sessions.Policy{})
			return s, err
		},
		Config: func(string, sessions.Key) (AgentConfig, bool) { return cfg, true },
	}))
	e.tools.SetPermissions(permissions.NewChecker(permissions.Options{}))
	var who []string
	asker := askerFunc(func(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
		who = append(who, q.User+" "+q.Tool)
		return permissions.AllowOnce, nil
	})
	sess := e.cliSession()
	res, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "go"}}, Asker: asker, User: "telegram:7"})
	if err != nil || res.Reply != "parent done" {
		t.Fatalf("run: %q %v", res.Reply, err)
	}
	if len(who) != 1 || who[0] != "telegram:7 gh__list" {
		t.Fatalf("asked %q", who)
	}
}
