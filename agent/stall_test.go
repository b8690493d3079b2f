package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/openai"
	"github.com/parleyd/parley/llm/stalltest"
)

// stallTimeouts are short deadlines for a provider that stalls.
var stallTimeouts = llm.Timeouts{Connect: 100 * time.Millisecond, FirstByte: 100 * time.Millisecond,
	Idle: 100 * time.Millisecond, Total: 400 * time.Millisecond}

// stallLimit is the deadline a Way passes under stallTimeouts.
func stallLimit(way stalltest.Way) time.Duration {
	if way == stalltest.Drips {
		return stallTimeouts.Total
	}
	return stallTimeouts.FirstByte
}

// A provider that stalls, each way, holds a turn only for its deadline
// times the attempts: the call is retried (the status says retrying, and
// the bus carries it for the API's stream), then the fallback model
// answers, or, with none, the turn fails; either way the session is free
// for the next message at once.
func TestStalledModelTurnEndsWithinItsDeadlines(t *testing.T) {
	const attempts = 3
	for _, way := range stalltest.Ways {
		t.Run(string(way), func(t *testing.T) {
			stalled := stalltest.Stall(t, way, 20*time.Millisecond)
			good := stalltest.Reply(t, "the fallback answers")
			models := map[string]llm.Model{
				"openai/stalled": openai.New(openai.Options{BaseURL: stalled.BaseURL(), Timeouts: stalltest.Timeouts(way, stallTimeouts)}),
				"openai/good":    openai.New(openai.Options{BaseURL: good.BaseURL(), Timeouts: stallTimeouts}),
			}
			e := newEnv(t, nil, func(o *Options) {
				o.Models = func(spec string) (llm.Model, error) { return models[spec], nil }
				o.Retry = llm.RetryPolicy{MaxAttempts: attempts, Base: time.Millisecond, Max: time.Millisecond}
			})
			sub := e.bus.Subscribe(EventStatusChanged)
			defer sub.Close()
			s := e.cliSession()
			budget := attempts*stallLimit(way) + 2*time.Second

			start := time.Now()
			res, err := e.run(Request{Session: s, Inputs: []Input{{Text: "hello"}},
				Agent: AgentConfig{ID: "a1", Model: "openai/stalled", FallbackModels: []string{"openai/good"}}})
			took := time.Since(start)
			if err != nil || res.Reply != "the fallback answers" {
				t.Fatalf("run = %q, %v; want the fallback's reply", res.Reply, err)
			}
			if took < attempts*stallLimit(way) || took > budget {
				t.Errorf("the turn took %s; want its %d attempts' deadlines (%s each) and little more", took, attempts, stallLimit(way))
			}
			if n := stalled.Requests(); n != attempts {
				t.Errorf("the stalled provider got %d requests, want %d", n, attempts)
			}
			msgs := e.messages(s.ID)
			if last := msgs[len(msgs)-1]; last.Model != "openai/good" || last.Content != "the fallback answers" {
				t.Errorf("stored reply %q by %q, want the fallback's", last.Content, last.Model)
			}
			retrying := 0
			for sub.Pending() > 0 {
				ev, _ := sub.Next(context.Background())
				if st, ok := ev.Data.(Status); ok && st.State == StateRetrying {
					retrying++
					if !strings.Contains(st.Message, "retrying") || strings.Contains(st.Message, "127.0.0.1") {
						t.Errorf("retry status message %q", st.Message)
					}
				}
			}
			if retrying != attempts-1 {
				t.Errorf("%d retrying status events, want %d", retrying, attempts-1)
			}
			if st := e.runner.Status(s.ID); st.State != StateIdle {
				t.Errorf("status after the turn = %+v, want idle", st)
			}

			// Without a fallback the turn fails as promptly, with the
			// timeout, and the session takes the next message.
			start = time.Now()
			_, err = e.run(Request{Session: s, Inputs: []Input{{Text: "again"}}, Agent: AgentConfig{ID: "a1", Model: "openai/stalled"}})
			var te *llm.TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("run without a fallback: %v; want the timeout", err)
			}
			if took := time.Since(start); took > budget {
				t.Errorf("the turn without a fallback took %s", took)
			}
			res, err = e.run(Request{Session: s, Inputs: []Input{{Text: "still there?"}}, Agent: AgentConfig{ID: "a1", Model: "openai/good"}})
			if err != nil || res.Reply != "the fallback answers" {
				t.Fatalf("the next message: %q, %v", res.Reply, err)
			}
		})
	}
}

// An agent's own timeouts override its provider's.
func TestAgentTimeoutsOverrideTheProvider(t *testing.T) {
	stalled := stalltest.Stall(t, stalltest.HeadersOnly, 0)
	m := openai.New(openai.Options{BaseURL: stalled.BaseURL(), Timeouts: llm.Timeouts{FirstByte: time.Hour}})
	e := newEnv(t, m, func(o *Options) { o.Retry = llm.RetryPolicy{MaxAttempts: 1} })
	s := e.cliSession()
	start := time.Now()
	_, err := e.run(Request{Session: s, Inputs: []Input{{Text: "hello"}},
		Agent: AgentConfig{ID: "a1", Model: "openai/x", Timeouts: llm.Timeouts{FirstByte: 100 * time.Millisecond}}})
	var te *llm.TimeoutError
	if !errors.As(err, &te) || te.Phase != llm.PhaseFirstByte || te.After != 100*time.Millisecond {
		t.Fatalf("run: %v; want the agent's 100ms first-byte timeout", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the turn took %s", took)
	}
}
