package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler is h adding trace_id and span_id to each record logged with
// a context that holds a span, so a log line leads to its trace. With
// tracing off it is h.
func (t *Tracer) LogHandler(h slog.Handler) slog.Handler {
	if t == nil {
		return h
	}
	return logHandler{h: h}
}

type logHandler struct{ h slog.Handler }

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.h.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h: l.h.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{h: l.h.WithGroup(name)} }
