package gateway

import (
	"context"
	"strings"

	"github.com/parleyd/parley/telemetry"
)

// traceTurn starts the span of the turn that answers items: from the
// first one's queueing, under the span that delivered it, with the wait
// in the queue as its first child. The outbox's sends of the reply find
// it by the messages' inbound ids.
func (g *Gateway) traceTurn(ctx context.Context, items []job) (context.Context, telemetry.Span) {
	if !g.opts.Tracer.Enabled() {
		return ctx, telemetry.Span{}
	}
	first := items[0]
	start := first.queued
	var others []telemetry.Parent // the spans the other messages came under
	for _, j := range items[1:] {
		if !j.queued.IsZero() && (start.IsZero() || j.queued.Before(start)) {
			start = j.queued
		}
		if j.parent.Valid() {
			others = append(others, j.parent)
		}
	}
	ctx, span := g.opts.Tracer.Root(ctx, first.parent, telemetry.SpanTurn, telemetry.KindConsumer, start, others...)
	if !span.On() {
		return ctx, span
	}
	span.Str(telemetry.AttrChannel, string(first.in.Adapter))
	span.Str(telemetry.GenAIAgentID, first.agent)
	span.Int(telemetry.AttrMessages, int64(len(items)))
	span.Bool("parley.recovered", first.repair != "" || first.takenOver)
	if span.RecordsContent() {
		texts := make([]string, len(items))
		for i, j := range items {
			texts[i] = j.in.Text
		}
		span.Content(telemetry.AttrInput, strings.Join(texts, "\n"))
	}
	if !start.IsZero() {
		_, wait := telemetry.StartAt(ctx, telemetry.SpanQueueWait, telemetry.KindInternal, start)
		wait.End()
	}
	for _, j := range items {
		telemetry.Remember(ctx, j.inboundID)
	}
	return ctx, span
}
