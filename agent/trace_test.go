package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/telemetry"
)

// Under a turn's span, the agent's spans: the compaction before the turn
// (its trigger and outcome), the history read and the model call, with
// the GenAI attributes the echo model answers with; a failed compaction
// marks its span failed.
func TestTurnSpans(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
	}{
		{"compacted", nil},
		{"compaction failed", errors.New("the summary model is down")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp, SampleRatio: 1})
			if err != nil {
				t.Fatal(err)
			}
			fake := &fakeCompactor{fn: func(ctx context.Context, req CompactionRequest) (CompactionResult, error) {
				if tc.fail != nil {
					return CompactionResult{}, tc.fail
				}
				return CompactionResult{Compacted: true, TokensBefore: 700, TokensAfter: 100}, nil
			}}
			e := newEnv(t, echo.New().Then(llm.Response{Text: "ok", Model: "echo-1", Usage: llm.Usage{Input: 12, Output: 2}}), withCompactor(fake))
			sess := e.cliSession()
			seedUsage(t, e, sess, 699)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx, turn := tr.Root(ctx, telemetry.Parent{}, telemetry.SpanTurn, telemetry.KindInternal, time.Time{})
			_, _ = e.runner.Run(ctx, Request{Session: sess, Agent: AgentConfig{MaxContextTokens: 1000, MaxOutputTokens: 100}, Inputs: []Input{{Text: "abcd"}}})
			turn.End()
			byName := map[string]tracetest.SpanStub{}
			for _, s := range exp.GetSpans() {
				byName[s.Name] = s
			}
			root := byName[telemetry.SpanTurn].SpanContext.SpanID()
			attrs := func(s tracetest.SpanStub) map[string]string {
				out := map[string]string{}
				for _, a := range s.Attributes {
					out[string(a.Key)] = a.Value.Emit()
				}
				return out
			}
			c, ok := byName[telemetry.SpanCompaction]
			if !ok || c.Parent.SpanID() != root {
				t.Fatalf("no compaction span under the turn: %v", byName)
			}
			ca := attrs(c)
			if ca["parley.compaction.trigger"] != string(CompactBeforeTurn) {
				t.Errorf("compaction span: %v", ca)
			}
			if tc.fail != nil {
				if c.Status.Description != tc.fail.Error() {
					t.Errorf("the failed compaction's span status is %+v, want its error", c.Status)
				}
				return
			}
			if ca["parley.compaction.compacted"] != "true" || ca["parley.compaction.tokens_after"] != "100" {
				t.Errorf("compaction span: %v", ca)
			}
			h, ok := byName[telemetry.SpanHistory]
			if !ok || h.Parent.SpanID() != root {
				t.Fatalf("no history read span under the turn: %v", byName)
			}
			m, ok := byName["chat echo"]
			if !ok || m.Parent.SpanID() != root {
				t.Fatalf("no model call span under the turn: %v", byName)
			}
			ma := attrs(m)
			for k, want := range map[string]string{telemetry.GenAIOperation: "chat", telemetry.GenAIProvider: "echo", telemetry.GenAIRequestModel: "echo",
				telemetry.GenAIResponseMod: "echo-1", telemetry.GenAIInputTokens: "12", telemetry.GenAIOutputTokens: "2", telemetry.GenAIMaxTokens: "100"} {
				if ma[k] != want {
					t.Errorf("model call span: %s = %q, want %q (all: %v)", k, ma[k], want, ma)
				}
			}
		})
	}
}
