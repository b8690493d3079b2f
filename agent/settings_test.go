package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
)

// A session's model and reasoning effort overrides (its metadata, as /model
// and /think set them) carry forward to every turn; a message's own come
// first, /think off sends none over the agent's, and each turn's user
// message records what the turn ran with.
func TestSessionSettingsCarryForwardAndAreRecorded(t *testing.T) {
	model := echo.New()
	e := newEnv(t, model)
	s := e.cliSession()
	cfg := AgentConfig{ID: "a1", Model: "echo", ReasoningEffort: "low"}
	setMeta := func(meta string) {
		t.Helper()
		var err error
		if s, err = e.store.Update(context.Background(), s.ID, sessions.Update{Metadata: json.RawMessage(meta)}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		meta       string // "" leaves it
		input      Input
		wantEffort string
		wantModel  string
	}{
		{"", Input{Text: "one"}, "low", "echo"},
		{`{"reasoning_effort":"high","model":"openai/gpt-x"}`, Input{Text: "two"}, "high", "openai/gpt-x"},
		{"", Input{Text: "three"}, "high", "openai/gpt-x"}, // carried forward
		{"", Input{Text: "four", ReasoningEffort: "medium", Model: "echo"}, "medium", "echo"},
		{`{"reasoning_effort":"off","model":null}`, Input{Text: "five"}, "", "echo"},
	}
	for i, st := range steps {
		if st.meta != "" {
			setMeta(st.meta)
		}
		if _, err := e.run(Request{Session: s, Inputs: []Input{st.input}, Agent: cfg}); err != nil {
			t.Fatal(err)
		}
		reqs := model.Requests()
		if got := reqs[len(reqs)-1].ReasoningEffort; got != st.wantEffort {
			t.Errorf("turn %d sent effort %q, want %q", i+1, got, st.wantEffort)
		}
		if got := e.specs[len(e.specs)-1]; got != st.wantModel {
			t.Errorf("turn %d opened model %q, want %q", i+1, got, st.wantModel)
		}
		msgs := e.messages(s.ID)
		var user sessions.Message
		for _, m := range msgs {
			if m.Role == sessions.RoleUser && m.Content == st.input.Text {
				user = m
			}
		}
		ts, ok := TurnOf(user)
		if !ok || ts.Model != st.wantModel || ts.ReasoningEffort != st.wantEffort || user.Model != st.wantModel {
			t.Errorf("turn %d's user message records %+v (%v), model %q; want %q, %q", i+1, ts, ok, user.Model, st.wantModel, st.wantEffort)
		}
	}
}
