package metrics

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
)

// fakeClock advances by step each time it is read.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// scriptedModel streams deltas, then returns err.
type scriptedModel struct {
	deltas []llm.Delta
	err    error
}

func (s scriptedModel) Stream(ctx context.Context, _ llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	var resp llm.Response
	for _, d := range s.deltas {
		resp.Text += d.Text
		if onDelta != nil {
			onDelta(d)
		}
	}
	if s.err != nil {
		return resp, s.err
	}
	return resp, ctx.Err()
}

func TestModel(t *testing.T) {
	m := New()
	m.now = (&fakeClock{t: time.Unix(0, 0), step: time.Second}).now
	tool := llm.Delta{ToolCallStarted: &llm.ToolCall{ID: "c1", Name: "search"}}
	text := llm.Delta{Text: secretText}

	open := m.Models(func(spec string) (llm.Model, error) {
		switch spec {
		case "openai/gpt-4o-mini":
			return scriptedModel{deltas: []llm.Delta{tool, text, text}}, nil
		case "anthropic/claude":
			return scriptedModel{err: errors.New("overloaded: " + secretText)}, nil
		case "echo":
			return scriptedModel{deltas: []llm.Delta{text}}, nil
		}
		return nil, errors.New("unknown provider")
	})

	var got []string
	mod, err := open("openai/gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	if m.Model("openai/gpt-4o-mini", mod) != mod {
		t.Error("Model wrapped an already wrapped model again")
	}
	resp, err := mod.Stream(context.Background(), llm.Request{}, func(d llm.Delta) { got = append(got, d.Text) })
	if err != nil || resp.Text != secretText+secretText || len(got) != 3 {
		t.Fatalf("Stream = %q, %v with deltas %q; want the model's own", resp.Text, err, got)
	}
	// clock reads: start 1, first text 2, end 3 -> first token 1s, call 2s.

	failing, _ := open("anthropic/claude")
	if _, err := failing.Stream(context.Background(), llm.Request{}, nil); err == nil {
		t.Fatal("the model's error was lost")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	echo, _ := open("echo")
	if _, err := echo.Stream(ctx, llm.Request{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := open("nope/x"); err == nil {
		t.Error("the factory's error was lost")
	}

	body := scrape(t, m)
	wantLines(t, body,
		`parley_model_call_duration_seconds_count{model="gpt-4o-mini",outcome="ok",provider="openai"} 1`,
		`parley_model_call_duration_seconds_sum{model="gpt-4o-mini",outcome="ok",provider="openai"} 2`,
		`parley_model_first_token_seconds_sum{model="gpt-4o-mini",provider="openai"} 1`,
		`parley_model_first_token_seconds_count{model="gpt-4o-mini",provider="openai"} 1`,
		`parley_model_call_duration_seconds_count{model="claude",outcome="error",provider="anthropic"} 1`,
		`parley_model_call_duration_seconds_count{model="echo",outcome="aborted",provider="echo"} 1`,
	)
	wantAbsent(t, body, `parley_model_first_token_seconds_count{model="claude"`, "SECRET", "overloaded")
}
