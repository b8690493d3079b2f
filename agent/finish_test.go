package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/tools"
)

// Finish runs once, in the transaction that stores the turn's reply (not
// a step that calls tools), and sees the result the run returns; what it
// writes commits with the reply.
func TestFinishCommitsWithTheReply(t *testing.T) {
	model := echo.New().
		Then(llm.Response{Text: "checking", ToolCalls: []llm.ToolCall{call("c1", "look", `{}`)}}).
		Then(llm.Response{Text: "done"})
	e := newEnv(t, model)
	e.register(tools.Tool{Name: "look", Run: func(context.Context, tools.Call) (string, error) { return "seen", nil }})
	sess := e.cliSession()
	var calls []Result
	res, err := e.run(Request{Session: sess, Agent: AgentConfig{Tools: []string{"look"}}, Inputs: []Input{{Text: "go"}},
		DeferCompaction: true,
		Finish: func(ctx context.Context, q dbutil.Querier, r Result) error {
			calls = append(calls, r)
			// Inside the reply's transaction: the reply is there to see.
			var n int
			err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE session_id = $1 AND content = 'done'", sess.ID).Scan(&n)
			if err != nil || n != 1 {
				t.Errorf("the reply in Finish's transaction: %d rows, %v", n, err)
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(calls) != 1 || calls[0].Reply != "done" || !calls[0].Finished || len(calls[0].Messages) != 4 {
		t.Fatalf("Finish saw %+v, want one call with the reply and the run's 4 messages", calls)
	}
	if !res.Finished || res.Reply != "done" {
		t.Fatalf("Result = %+v, want Finished with the reply", res)
	}
}

// A Finish that fails undoes the reply's append: nothing is stored that
// the caller couldn't record, and the run fails.
func TestFailedFinishStoresNoReply(t *testing.T) {
	e := newEnv(t, echo.New().Then(llm.Response{Text: "hello back"}))
	sess := e.cliSession()
	boom := errors.New("outcome refused")
	res, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hi"}}, DeferCompaction: true,
		Finish: func(context.Context, dbutil.Querier, Result) error { return boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("Run error = %v, want the Finish error", err)
	}
	if res.Finished || res.Reply != "" {
		t.Fatalf("Result = %+v, want nothing finished", res)
	}
	if got := strings.Join(roles(e.messages(sess.ID)), "|"); got != "user:hi" {
		t.Fatalf("log %q, want the user's message only", got)
	}
}

// Without DeferCompaction the run may still add a notice after the reply
// is stored, so Finish isn't used: the caller records the outcome itself.
func TestFinishNeedsDeferredCompaction(t *testing.T) {
	e := newEnv(t, echo.New().Then(llm.Response{Text: "ok"}))
	sess := e.cliSession()
	res, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hi"}},
		Finish: func(context.Context, dbutil.Querier, Result) error { t.Error("Finish ran"); return nil }})
	if err != nil || res.Finished {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}
