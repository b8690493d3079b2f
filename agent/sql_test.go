package agent

import (
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessionsql"
)

// A turn through a model creates a table with sql_exec and reads it with
// sql_query, on both engines; a limit hit is a tool error the model reads.
func TestTurnUsesTheSessionsSQLDatabase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		model := echo.New().
			Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "sql_exec", `{"sql":"CREATE TABLE todo (item TEXT); INSERT INTO todo VALUES ('call the plumber')"}`)}}).
			Then(llm.Response{ToolCalls: []llm.ToolCall{call("c2", "sql_query", `{"sql":"SELECT item FROM todo"}`)}}).
			Then(llm.Response{ToolCalls: []llm.ToolCall{call("c3", "sql_exec", `{"sql":"PRAGMA max_page_count = 9"}`)}}).
			Then(llm.Response{Text: "noted"})
		db := open(t)
		e := newEnvOn(t, db, model)
		e.register(sessionsql.Tools(sessionsql.NewStore(db, sessionsql.Limits{}))...)
		sess := e.cliSession()
		if _, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"sql_exec", "sql_query"}}, Inputs: []Input{{Text: "remember: call the plumber"}}}); err != nil {
			t.Fatal(err)
		}
		results := map[string]string{}
		for _, m := range e.messages(sess.ID) {
			if m.ToolCallID != "" {
				results[m.ToolCallID] = m.Content
			}
		}
		if !strings.HasPrefix(results["c1"], "OK: 1 row(s) changed") {
			t.Fatalf("sql_exec: %q", results["c1"])
		}
		if results["c2"] != "| item |\n| --- |\n| call the plumber |\n(1 row)" {
			t.Fatalf("sql_query: %q", results["c2"])
		}
		if !strings.HasPrefix(results["c3"], "error: PRAGMA is not allowed here") {
			t.Fatalf("a refused statement: %q", results["c3"])
		}
	})
}
