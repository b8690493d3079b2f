package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
)

// When the agent's model fails past its retries (a 503 here), the first
// fallback that answers answers the turn, and the stored reply names it; a
// refused request (a 400) goes to no fallback.
func TestFallbackModelAnswers(t *testing.T) {
	down := &llm.StatusError{Provider: "a", StatusCode: 503, Message: "overloaded"}
	primary := echo.New().ThenError(down).ThenError(down).ThenError(down)
	broken := echo.New().ThenError(down).ThenError(down).ThenError(down)
	good := echo.New().Then(llm.Response{Text: "from the fallback"})
	models := map[string]llm.Model{"openai/primary": primary, "anthropic/broken": broken, "openai/good": good}
	e := newEnv(t, nil, func(o *Options) {
		o.Models = func(spec string) (llm.Model, error) {
			if m, ok := models[spec]; ok {
				return m, nil
			}
			return nil, errors.New("no model " + spec)
		}
	})
	s := e.cliSession()
	res, err := e.run(Request{Session: s, Inputs: []Input{{Text: "hello"}},
		Agent: AgentConfig{ID: "a1", Model: "openai/primary", FallbackModels: []string{"anthropic/broken", "openai/good"}}})
	if err != nil || res.Reply != "from the fallback" {
		t.Fatalf("run: %+v %v", res, err)
	}
	msgs := e.messages(s.ID)
	last := msgs[len(msgs)-1]
	if last.Content != "from the fallback" || last.Model != "openai/good" {
		t.Fatalf("stored reply %q by %q, want the fallback's, named", last.Content, last.Model)
	}
	if n := len(good.Requests()); n != 1 {
		t.Fatalf("the good fallback got %d calls", n)
	}

	// A refused request goes to no fallback.
	bad := &llm.StatusError{Provider: "a", StatusCode: 400, Message: "bad request"}
	models["openai/primary"] = echo.New().ThenError(bad)
	spare := echo.New().Then(llm.Response{Text: "should not answer"})
	models["openai/good"] = spare
	if _, err := e.run(Request{Session: s, Inputs: []Input{{Text: "again"}},
		Agent: AgentConfig{ID: "a1", Model: "openai/primary", FallbackModels: []string{"openai/good"}}}); err == nil {
		t.Fatal("a refused request was answered")
	}
	if n := len(spare.Requests()); n != 0 {
		t.Fatalf("a refused request went to the fallback (%d calls)", n)
	}
	_ = context.Background
}

// The agent's reasoning effort goes with every call; a message's own
// overrides it for its run.
func TestReasoningEffortReachesTheModel(t *testing.T) {
	model := echo.New()
	e := newEnv(t, model)
	s := e.cliSession()
	cfg := AgentConfig{ID: "a1", Model: "echo", ReasoningEffort: "low"}
	if _, err := e.run(Request{Session: s, Inputs: []Input{{Text: "one"}}, Agent: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.run(Request{Session: s, Inputs: []Input{{Text: "two", ReasoningEffort: "high"}}, Agent: cfg}); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || reqs[0].ReasoningEffort != "low" || reqs[1].ReasoningEffort != "high" {
		t.Fatalf("efforts sent: %+v", reqs)
	}
}
