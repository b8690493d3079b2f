package agent

import (
	"context"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/telemetry"
)

// callSpan is the span of one model call, named and described as
// OpenTelemetry's GenAI conventions say, so LLM observability tools read
// it.
type callSpan struct {
	telemetry.Span
	start time.Time
}

// traceCall starts the span of the model call the turn makes now.
func (t *turn) traceCall(ctx context.Context, call llm.Request) (context.Context, callSpan) {
	provider, model := telemetry.ModelAttrs(t.spec)
	if call.Model != "" {
		model = call.Model // the provider's own name, after any fallback
	}
	ctx, span := telemetry.StartOp(ctx, "chat", model, telemetry.KindClient)
	if !span.On() {
		return ctx, callSpan{}
	}
	span.Str(telemetry.GenAIOperation, "chat")
	span.Str(telemetry.GenAIProvider, provider)
	span.Str(telemetry.GenAISystem, provider)
	span.Str(telemetry.GenAIRequestModel, model)
	span.Str(telemetry.GenAIConversation, string(t.id))
	if t.req.Agent.ID != "" {
		span.Str(telemetry.GenAIAgentID, t.req.Agent.ID)
	}
	if call.MaxTokens > 0 {
		span.Int(telemetry.GenAIMaxTokens, int64(call.MaxTokens))
	}
	return ctx, callSpan{Span: span, start: time.Now()}
}

// FirstToken marks the moment the first token (text or a tool call)
// streamed in.
func (s callSpan) FirstToken(at time.Time) {
	s.Event(telemetry.GenAIFirstToken, at)
	s.Float(telemetry.GenAITimeToFirst, at.Sub(s.start).Seconds())
}

// end records what the call answered and ends its span.
func (s callSpan) end(resp llm.Response, err error) {
	if !s.On() {
		return
	}
	if resp.Model != "" {
		s.Str(telemetry.GenAIResponseMod, resp.Model)
	}
	s.Int(telemetry.GenAIInputTokens, resp.Usage.Input)
	s.Int(telemetry.GenAIOutputTokens, resp.Usage.Output)
	if resp.StopReason != "" {
		s.Strs(telemetry.GenAIFinish, resp.StopReason)
	}
	s.Content(telemetry.AttrOutput, resp.Text)
	s.Fail(err)
	s.End()
}
