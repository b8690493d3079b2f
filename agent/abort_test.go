package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/tools"
)

// cancelOn calls cancel from inside the stream, right after the delta that
// matches, so the abort lands at an exact point.
type cancelOn struct {
	llm.Model
	match  func(llm.Delta) bool
	cancel func()
}

func (c *cancelOn) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	return c.Model.Stream(ctx, req, func(d llm.Delta) {
		if onDelta != nil {
			onDelta(d)
		}
		if c.match(d) {
			c.cancel()
		}
	})
}

func TestAbort(t *testing.T) {
	tests := []struct {
		name  string
		resp  llm.Response
		match func(llm.Delta) bool
		want  []string // the log after the abort
		reply string
	}{
		{
			name:  "mid text",
			resp:  llm.Response{Text: "partial answer here", ToolCalls: []llm.ToolCall{call("c1", "ping", `{}`)}},
			match: func(d llm.Delta) bool { return d.Text != "" },
			want:  []string{"user:go", "assistant:partial "},
			reply: "partial ",
		},
		{
			name:  "after a tool call arrived",
			resp:  llm.Response{Text: "thinking", ToolCalls: []llm.ToolCall{call("c1", "ping", `{}`), call("c2", "ping", `{}`)}},
			match: func(d llm.Delta) bool { return d.ToolCallStarted != nil && d.ToolCallStarted.ID == "c1" },
			want:  []string{"user:go", "assistant:thinking call(c1 ping)", "tool[c1]:aborted"},
			reply: "thinking",
		},
		{
			name:  "while a tool runs",
			resp:  llm.Response{ToolCalls: []llm.ToolCall{call("c1", "hang", `{}`), call("c2", "ping", `{}`)}},
			match: func(llm.Delta) bool { return false },
			want:  []string{"user:go", "assistant: call(c1 hang) call(c2 ping)", "tool[c1]:aborted", "tool[c2]:pong"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := echo.New(echo.WithDelay(time.Millisecond)).Then(tc.resp)
			ctrl := &cancelOn{Model: model, match: tc.match}
			e := newEnv(t, ctrl)
			pinged := make(chan struct{}, 2)
			e.register(
				tools.Tool{Name: "ping", Run: func(context.Context, tools.Call) (string, error) { pinged <- struct{}{}; return "pong", nil }},
				tools.Tool{Name: "hang", Run: func(ctx context.Context, c tools.Call) (string, error) {
					select { // let ping finish first, so its real result is kept
					case <-pinged:
					case <-time.After(5 * time.Second):
						return "", errors.New("ping never ran")
					}
					if !e.runner.Abort(c.SessionID) {
						return "", errors.New("no run to abort")
					}
					<-ctx.Done()
					return "", ctx.Err()
				}},
			)
			sess := e.cliSession()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctrl.cancel = cancel
			res, err := e.runner.Run(ctx, Request{Session: sess, Agent: AgentConfig{Tools: []string{"ping", "hang"}}, Inputs: []Input{{Text: "go"}}})
			if !errors.Is(err, context.Canceled) || !res.Aborted {
				t.Fatalf("Run = %+v, %v; want aborted with context.Canceled", res, err)
			}
			if got := roles(e.messages(sess.ID)); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if res.Reply != tc.reply || len(res.Messages) != len(tc.want) {
				t.Errorf("Reply = %q with %d messages, want %q and %d", res.Reply, len(res.Messages), tc.reply, len(tc.want))
			}
			if n := len(model.Requests()); n != 1 {
				t.Errorf("model calls = %d, want 1", n)
			}
			if tc.name != "while a tool runs" && len(pinged) > 0 {
				t.Error("a tool ran after the abort")
			}
			if st := e.runner.Status(sess.ID); st.State != StateIdle {
				t.Errorf("status = %+v, want idle", st)
			}
		})
	}
}

func TestAbortWithoutRun(t *testing.T) {
	e := newEnv(t, echo.New())
	if e.runner.Abort(e.cliSession().ID) {
		t.Error("Abort reported a run that does not exist")
	}
}
