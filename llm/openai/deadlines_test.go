package openai_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/openai"
	"github.com/parleyd/parley/llm/stalltest"
)

// A call to a provider that stalls, whichever way, ends by the deadline of
// its phase with a retryable *llm.TimeoutError naming it; a call's own
// timeouts (an agent's) override the provider's.
func TestStalledCallEndsByItsDeadline(t *testing.T) {
	short := llm.Timeouts{Connect: 150 * time.Millisecond, FirstByte: 150 * time.Millisecond,
		Idle: 150 * time.Millisecond, Total: 600 * time.Millisecond}
	cases := []struct {
		way   stalltest.Way
		phase llm.TimeoutPhase
		limit time.Duration
	}{
		{stalltest.NeverAnswers, llm.PhaseFirstByte, short.FirstByte},
		{stalltest.HeadersOnly, llm.PhaseFirstByte, short.FirstByte},
		{stalltest.StopsMidStream, llm.PhaseIdle, short.Idle},
		{stalltest.Drips, llm.PhaseTotal, short.Total},
	}
	for _, tc := range cases {
		t.Run(string(tc.way), func(t *testing.T) {
			s := stalltest.Stall(t, tc.way, 20*time.Millisecond)
			m := openai.New(openai.Options{APIKey: apiKey, BaseURL: s.BaseURL(), Timeouts: stalltest.Timeouts(tc.way, short)})
			checkTimeout(t, m, context.Background(), tc.phase, tc.limit)
		})
	}
	t.Run("connects and never finishes the handshake", func(t *testing.T) {
		m := openai.New(openai.Options{APIKey: apiKey, BaseURL: stalltest.NoHandshake(t), Timeouts: short})
		checkTimeout(t, m, context.Background(), llm.PhaseConnect, short.Connect)
	})
	t.Run("the call's own timeouts override the provider's", func(t *testing.T) {
		s := stalltest.Stall(t, stalltest.HeadersOnly, 0)
		m := openai.New(openai.Options{APIKey: apiKey, BaseURL: s.BaseURL(), Timeouts: llm.Timeouts{FirstByte: time.Hour}})
		ctx := llm.WithCallTimeouts(context.Background(), llm.Timeouts{FirstByte: 100 * time.Millisecond})
		checkTimeout(t, m, ctx, llm.PhaseFirstByte, 100*time.Millisecond)
	})
	t.Run("a stream that keeps coming is not cut", func(t *testing.T) {
		s := stalltest.Reply(t, "all there")
		m := openai.New(openai.Options{APIKey: apiKey, BaseURL: s.BaseURL(), Timeouts: short})
		resp, err := m.Stream(context.Background(), userReq("hi"), nil)
		if err != nil || resp.Text != "all there" {
			t.Fatalf("Stream = %q, %v", resp.Text, err)
		}
	})
}

func checkTimeout(t *testing.T, m llm.Model, ctx context.Context, phase llm.TimeoutPhase, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := m.Stream(ctx, userReq("hi"), nil)
	took := time.Since(start)
	var te *llm.TimeoutError
	if !errors.As(err, &te) || te.Phase != phase || te.After != limit {
		t.Fatalf("Stream error = %v (%T); want a %s timeout after %s", err, err, phase, limit)
	}
	if !llm.Retryable(err) {
		t.Errorf("a timeout is not retryable: %v", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("a timeout reads as a cancelled call: %v", err)
	}
	if took < limit || took > limit+2*time.Second {
		t.Errorf("the call took %s; want just past its %s deadline", took, limit)
	}
}
