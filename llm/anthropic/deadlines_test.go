package anthropic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/anthropic"
	"github.com/parleyd/parley/llm/stalltest"
)

// Anthropic's client shares the wire's deadlines: a server that sends
// headers and then nothing fails the call at its first-byte deadline.
func TestStalledCallEndsByItsDeadline(t *testing.T) {
	s := stalltest.Stall(t, stalltest.HeadersOnly, 0)
	m := anthropic.New(anthropic.Options{APIKey: apiKey, BaseURL: s.URL,
		Timeouts: llm.Timeouts{FirstByte: 100 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := m.Stream(ctx, userReq("hi"), nil)
	var te *llm.TimeoutError
	if !errors.As(err, &te) || te.Phase != llm.PhaseFirstByte || te.Provider != "anthropic" || !llm.Retryable(err) {
		t.Fatalf("Stream error = %v; want a retryable first-byte timeout from anthropic", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the call took %s; its deadline was 100ms", took)
	}
}
