// Package telemetry is parley's tracing: OpenTelemetry spans of each turn
// and of what it waits on (the queue, the history, the model, tools,
// compaction, the send), exported over OTLP, and the trace id in the log.
//
// A *Tracer is made once, from the config, and starts the spans that begin
// a trace (a message taken, an HTTP request, a cron fire). Everything under
// them starts its span with the package's Start, which finds the tracer in
// the context: with tracing off (a nil *Tracer) there is none, and Start
// returns the context as it came and a Span that does nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP protocols Options.Protocol names, as OTEL_EXPORTER_OTLP_PROTOCOL
// names them.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultTracesPath is where an OTLP/HTTP collector takes traces, added to
// an endpoint given without a path.
const DefaultTracesPath = "/v1/traces"

// Options say where spans go and which are kept.
type Options struct {
	// Endpoint is the OTLP collector's URL: http(s)://host:4318 for
	// OTLP/HTTP, grpc://host:4317 (grpcs:// for TLS) for OTLP/gRPC.
	Endpoint string
	// Protocol, when set, overrides what the scheme says: ProtocolHTTP or
	// ProtocolGRPC.
	Protocol string
	// SampleRatio is the share of traces kept, 0 to 1; a trace begun
	// elsewhere (an API request's traceparent) keeps its caller's choice.
	SampleRatio float64
	// Resource are attributes of every span's resource, beside
	// service.name=parley and service.version.
	Resource map[string]string
	// RecordContent puts message text on spans; off, spans carry sizes,
	// ids and timings only.
	RecordContent bool
	// Version is the build's, as service.version.
	Version string
	// Scrub, if set, hides secrets in the error texts and content spans
	// carry.
	Scrub func(string) string
	// Exporter, if set, takes every span as it ends, in place of the OTLP
	// exporter (tests, and a benchmark that discards them).
	Exporter sdktrace.SpanExporter
	// Log hears of export failures.
	Log *slog.Logger
}

// Tracer starts spans of one daemon. A nil *Tracer is tracing off: its
// methods do nothing and cost nothing.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	content  bool
	scrub    func(string) string
}

// Target is where an endpoint sends: the protocol, the host:port, the
// path (OTLP/HTTP) and whether it is plain text.
type Target struct {
	Protocol string
	Host     string
	Path     string
	Insecure bool
}

// ParseEndpoint reads an OTLP endpoint and an optional protocol, and says
// what is wrong with them in words for the config's problems.
func ParseEndpoint(endpoint, protocol string) (Target, error) {
	shown := redactUser(endpoint)
	if strings.Contains(endpoint, "@") {
		// Sent nowhere: the exporters take credentials as headers only.
		return Target{}, fmt.Errorf("%q holds a user or password, which parley does not send; give the collector's key as a header in OTEL_EXPORTER_OTLP_HEADERS instead", shown)
	}
	if !strings.Contains(endpoint, "://") {
		return Target{}, fmt.Errorf("%q has no scheme; write http://%s for OTLP/HTTP or grpc://%s for OTLP/gRPC", shown, shown, shown)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return Target{}, fmt.Errorf("%q is not a URL; use the collector's address, such as \"http://localhost:4318\" (OTLP/HTTP) or \"grpc://localhost:4317\" (OTLP/gRPC)", shown)
	}
	var t Target
	switch u.Scheme {
	case "http", "https":
		t.Protocol, t.Insecure = ProtocolHTTP, u.Scheme == "http"
	case "grpc", "grpcs":
		t.Protocol, t.Insecure = ProtocolGRPC, u.Scheme == "grpc"
	default:
		return Target{}, fmt.Errorf("%q has the scheme %q; use http:// or https:// for OTLP/HTTP, grpc:// or grpcs:// (TLS) for OTLP/gRPC", shown, u.Scheme)
	}
	switch protocol {
	case "":
	case ProtocolHTTP, "http":
		t.Protocol = ProtocolHTTP
	case ProtocolGRPC:
		t.Protocol = ProtocolGRPC
	default:
		return Target{}, fmt.Errorf("protocol %q is not one parley speaks; use %q or %q, or leave it empty to go by the endpoint's scheme", protocol, ProtocolHTTP, ProtocolGRPC)
	}
	t.Host = u.Host
	if t.Protocol == ProtocolHTTP {
		t.Path = u.Path
		if t.Path == "" || t.Path == "/" {
			t.Path = DefaultTracesPath
		}
	}
	return t, nil
}

// redactUser is endpoint with anything before an "@" in its authority
// (a user, a password) shown as [redacted].
func redactUser(endpoint string) string {
	at := strings.LastIndex(endpoint, "@")
	if at < 0 {
		return endpoint
	}
	start := 0
	if i := strings.Index(endpoint, "://"); i >= 0 && i < at {
		start = i + 3
	}
	return endpoint[:start] + "[redacted]" + endpoint[at:]
}

// New makes the tracer o describes. With no endpoint and no exporter it
// returns nil: tracing off.
func New(ctx context.Context, o Options) (*Tracer, error) {
	if o.Endpoint == "" && o.Exporter == nil {
		return nil, nil
	}
	exp := o.Exporter
	if exp == nil {
		t, err := ParseEndpoint(o.Endpoint, o.Protocol)
		if err != nil {
			return nil, fmt.Errorf("telemetry.otlp.endpoint: %w", err)
		}
		if exp, err = exporter(ctx, t); err != nil {
			return nil, fmt.Errorf("start the OTLP exporter for %s: %w", t.Host, err)
		}
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "parley")}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	for k, v := range o.Resource {
		attrs = append(attrs, attribute.String(k, v))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry.resource_attributes: %w", err)
	}
	process := sdktrace.WithBatcher(exp)
	if o.Exporter != nil {
		process = sdktrace.WithSyncer(exp)
	}
	tp := sdktrace.NewTracerProvider(process, sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))))
	if o.Log != nil {
		log := o.Log
		// The SDK reports failed exports through one handler for the
		// process; the last daemon made names its logger.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("trace export failed; spans are dropped until the collector answers", "error", err)
		}))
	}
	scrub := o.Scrub
	if scrub == nil {
		scrub = func(s string) string { return s }
	}
	return &Tracer{provider: tp, tracer: tp.Tracer("github.com/parleyd/parley"), content: o.RecordContent, scrub: scrub}, nil
}

func exporter(ctx context.Context, t Target) (sdktrace.SpanExporter, error) {
	if t.Protocol == ProtocolGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(t.Host)}
		if t.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(t.Host), otlptracehttp.WithURLPath(t.Path)}
	if t.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}

// Enabled says whether tracing is on.
func (t *Tracer) Enabled() bool { return t != nil }

// Shutdown sends the spans still buffered and stops the exporter; ctx
// bounds the wait.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

type tracerKey struct{}

// with is ctx carrying t, for the spans started under it.
func (t *Tracer) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, tracerKey{}, t)
}

func from(ctx context.Context) *Tracer {
	t, _ := ctx.Value(tracerKey{}).(*Tracer)
	return t
}

// Kind says what a span is to the trace's readers.
type Kind = trace.SpanKind

// The kinds of span parley starts.
const (
	KindInternal = trace.SpanKindInternal
	KindServer   = trace.SpanKindServer
	KindClient   = trace.SpanKindClient
	KindConsumer = trace.SpanKindConsumer
	KindProducer = trace.SpanKindProducer
)

// Parent is where a span hangs: a span context taken from one context (an
// HTTP request's, a cron fire's) to start spans under in another (the
// turn, on its lane). The zero Parent is none.
type Parent struct {
	sc trace.SpanContext
	t  *Tracer
}

// ParentOf is ctx's span, as a Parent; none when ctx has no span.
func ParentOf(ctx context.Context) Parent {
	t := from(ctx)
	if t == nil {
		return Parent{}
	}
	return Parent{sc: trace.SpanContextFromContext(ctx), t: t}
}

// Valid says whether p names a span.
func (p Parent) Valid() bool { return p.sc.IsValid() }

// TraceID is p's trace id in hex; "" for none.
func (p Parent) TraceID() string {
	if !p.sc.IsValid() {
		return ""
	}
	return p.sc.TraceID().String()
}

// Into is ctx carrying p as its (remote) span, so Start puts the next
// span under it.
func (p Parent) Into(ctx context.Context) context.Context {
	if p.t == nil || !p.sc.IsValid() {
		return ctx
	}
	return p.t.with(trace.ContextWithRemoteSpanContext(ctx, p.sc))
}

// Root starts a span that begins a trace, or continues parent's when it is
// valid; at, when not zero, is when it began (a turn begins when its
// message was queued). The spans of links (the other messages a turn
// answers, each delivered under its own) are linked to it.
func (t *Tracer) Root(ctx context.Context, parent Parent, name string, kind Kind, at time.Time, links ...Parent) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if parent.sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent.sc)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	for _, l := range links {
		if l.sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: l.sc}))
		}
	}
	if !at.IsZero() {
		opts = append(opts, trace.WithTimestamp(at))
	}
	if !parent.sc.IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, s := t.tracer.Start(t.with(ctx), name, opts...)
	if !s.IsRecording() {
		return ctx, Span{} // not sampled: ctx still carries its context out
	}
	return ctx, Span{s: s, t: t}
}

// Start starts a span under ctx's, when ctx has a sampled one of a
// tracer; otherwise it returns ctx and a Span that does nothing.
func Start(ctx context.Context, name string, kind Kind) (context.Context, Span) {
	return StartAt(ctx, name, kind, time.Time{})
}

// StartOp is Start for a span named "op target" (as the GenAI
// conventions name a model call, "chat gpt-4o"); the name is put together
// only when the span is made.
func StartOp(ctx context.Context, op, target string, kind Kind) (context.Context, Span) {
	t := from(ctx)
	if t == nil || !trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx, Span{}
	}
	return StartAt(ctx, op+" "+target, kind, time.Time{})
}

// StartAt is Start for a span that began at at (zero: now).
func StartAt(ctx context.Context, name string, kind Kind, at time.Time) (context.Context, Span) {
	t := from(ctx)
	if t == nil || !trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx, Span{}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	if !at.IsZero() {
		opts = append(opts, trace.WithTimestamp(at))
	}
	ctx, s := t.tracer.Start(ctx, name, opts...)
	return ctx, Span{s: s, t: t}
}

// Span is one span, or nothing (tracing off, or not sampled): each method
// returns at once then.
type Span struct {
	s trace.Span
	t *Tracer
}

// On says whether s records: worth working out an attribute for.
func (s Span) On() bool { return s.s != nil }

// End ends the span now.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// EndAt ends the span at at.
func (s Span) EndAt(at time.Time) {
	if s.s != nil {
		s.s.End(trace.WithTimestamp(at))
	}
}

// Str sets a string attribute.
func (s Span) Str(key, v string) {
	if s.s != nil {
		s.s.SetAttributes(attribute.String(key, v))
	}
}

// Strs sets a string list attribute.
func (s Span) Strs(key string, v ...string) {
	if s.s != nil {
		s.s.SetAttributes(attribute.StringSlice(key, v))
	}
}

// Int sets an integer attribute.
func (s Span) Int(key string, v int64) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Int64(key, v))
	}
}

// Float sets a number attribute.
func (s Span) Float(key string, v float64) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Float64(key, v))
	}
}

// Bool sets a boolean attribute.
func (s Span) Bool(key string, v bool) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Bool(key, v))
	}
}

// Event marks a moment in the span.
func (s Span) Event(name string, at time.Time) {
	if s.s != nil {
		s.s.AddEvent(name, trace.WithTimestamp(at))
	}
}

// RecordsContent says whether Content records: worth putting text
// together for.
func (s Span) RecordsContent() bool { return s.s != nil && s.t.content }

// Content sets key to text, secrets hidden, only where record_content is
// on: message text never reaches a span otherwise.
func (s Span) Content(key, text string) {
	if s.s != nil && s.t.content {
		s.s.SetAttributes(attribute.String(key, s.t.scrub(text)))
	}
}

// Fail marks the span failed with err, its text with secrets hidden; a
// nil err does nothing.
func (s Span) Fail(err error) {
	if s.s == nil || err == nil {
		return
	}
	msg := s.t.scrub(err.Error())
	s.s.AddEvent("exception", trace.WithAttributes(attribute.String("exception.message", msg)))
	s.s.SetStatus(codes.Error, msg)
}

// TraceID is the span's trace id in hex; "" for none.
func (s Span) TraceID() string {
	if s.s == nil {
		return ""
	}
	return s.s.SpanContext().TraceID().String()
}

// propagator reads and writes W3C traceparent and tracestate headers.
var propagator = propagation.TraceContext{}

// ModelAttrs split a model spec ("openai/gpt-4o-mini") into the GenAI
// provider name and the model.
func ModelAttrs(spec string) (provider, model string) {
	provider, model, ok := strings.Cut(spec, "/")
	if !ok {
		return spec, spec
	}
	return provider, model
}

// Exporter takes spans as they end (the SDK's; tracetest.InMemoryExporter
// in tests).
type Exporter = sdktrace.SpanExporter
