package agent

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

var testNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// env is a runner on a real SQLite store, with one model for every spec.
type env struct {
	t      *testing.T
	runner *Runner
	store  *sessions.SQLStore
	bus    *events.Bus
	tools  *tools.Registry

	mu    sync.Mutex
	specs []string // specs the runner opened
}

func newEnv(t *testing.T, model llm.Model, opts ...func(*Options)) *env {
	t.Helper()
	return newEnvOn(t, dbtest.SQLite(t), model, opts...)
}

// newEnvOn is newEnv on db.
func newEnvOn(t *testing.T, db *dbutil.DB, model llm.Model, opts ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, bus: events.New(), tools: tools.NewRegistry()}
	e.store = sessions.NewStore(db)
	o := Options{
		Store: e.store,
		Models: func(spec string) (llm.Model, error) {
			e.mu.Lock()
			e.specs = append(e.specs, spec)
			e.mu.Unlock()
			return model, nil
		},
		DefaultModel: "echo",
		Tools:        e.tools,
		Bus:          e.bus,
		Now:          func() time.Time { return testNow },
		Retry:        llm.RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }},
	}
	for _, fn := range opts {
		fn(&o)
	}
	e.runner = New(o)
	return e
}

func (e *env) session(key sessions.Key) sessions.Session {
	e.t.Helper()
	s, _, err := e.store.Resolve(context.Background(), key, sessions.Policy{})
	if err != nil {
		e.t.Fatalf("resolve %s: %v", key, err)
	}
	return s
}

func (e *env) cliSession() sessions.Session { return e.session(sessions.CLIKey("u1", "a1")) }

func (e *env) register(ts ...tools.Tool) {
	e.t.Helper()
	for _, tool := range ts {
		if err := e.tools.Register(tool); err != nil {
			e.t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
}

func (e *env) messages(id sessions.ID) []sessions.Message {
	e.t.Helper()
	msgs, err := e.store.Messages(context.Background(), id, sessions.MessagesOptions{})
	if err != nil {
		e.t.Fatalf("messages: %v", err)
	}
	return msgs
}

func (e *env) run(req Request) (Result, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.runner.Run(ctx, req)
}

func textTool(name, out string) tools.Tool {
	return tools.Tool{Name: name, Description: "returns " + out,
		Run: func(context.Context, tools.Call) (string, error) { return out, nil }}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// roles renders a log as "role:content" lines for compact comparisons.
func roles(msgs []sessions.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		s := string(m.Role) + ":" + m.Content
		if m.ToolCallID != "" {
			s = string(m.Role) + "[" + m.ToolCallID + "]:" + m.Content
		}
		for _, tc := range m.ToolCalls {
			s += " call(" + tc.ID + " " + tc.Name + ")"
		}
		out[i] = s
	}
	return out
}

func llmRoles(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		s := string(m.Role) + ":" + m.Content
		if m.ToolCallID != "" {
			s = string(m.Role) + "[" + m.ToolCallID + "]:" + m.Content
		}
		for _, tc := range m.ToolCalls {
			s += " call(" + tc.ID + " " + tc.Name + ")"
		}
		out[i] = s
	}
	return out
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
