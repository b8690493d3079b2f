package telemetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/parleyd/parley/internal/syncbuf"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, protocol string
		want                     Target
		err                      string
	}{
		{"http without a path", "http://collector:4318", "", Target{Protocol: ProtocolHTTP, Host: "collector:4318", Path: DefaultTracesPath, Insecure: true}, ""},
		{"https with a path", "https://otlp.example.com/otlp/v1/traces", "", Target{Protocol: ProtocolHTTP, Host: "otlp.example.com", Path: "/otlp/v1/traces"}, ""},
		{"grpc", "grpc://tempo:4317", "", Target{Protocol: ProtocolGRPC, Host: "tempo:4317", Insecure: true}, ""},
		{"grpcs", "grpcs://tempo:4317", "", Target{Protocol: ProtocolGRPC, Host: "tempo:4317"}, ""},
		{"http told grpc", "http://jaeger:4317", "grpc", Target{Protocol: ProtocolGRPC, Host: "jaeger:4317", Insecure: true}, ""},
		{"grpc told http", "grpc://jaeger:4318", "http/protobuf", Target{Protocol: ProtocolHTTP, Host: "jaeger:4318", Path: DefaultTracesPath, Insecure: true}, ""},
		{"no scheme", "localhost:4318", "", Target{}, "has no scheme; write http://localhost:4318"},
		{"no host", "http://", "", Target{}, "is not a URL"},
		{"another scheme", "udp://jaeger:6831", "", Target{}, `has the scheme "udp"`},
		{"unknown protocol", "http://jaeger:4318", "thrift", Target{}, `protocol "thrift" is not one parley speaks`},
		{"a password", "https://user:s3cret-key@otlp.example.com", "", Target{}, `"https://[redacted]@otlp.example.com" holds a user or password, which parley does not send`},
		{"a password without a scheme", "key:s3cret-key@otlp.example.com:4318", "", Target{}, `"[redacted]@otlp.example.com:4318" holds a user or password`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEndpoint(tc.endpoint, tc.protocol)
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseEndpoint(%q, %q) = %+v, %v; want an error saying %q", tc.endpoint, tc.protocol, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseEndpoint(%q, %q) = %+v, %v; want %+v", tc.endpoint, tc.protocol, got, err, tc.want)
			}
		})
	}
}

// received is what a fake collector decoded: span names and resource
// attributes.
type received struct {
	mu       sync.Mutex
	spans    []string
	resource map[string]string
}

func (r *received) add(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		r.resource = map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			r.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
}

func (r *received) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spans) != 2 || r.spans[0] != "child" || r.spans[1] != "root" {
		t.Errorf("the collector got spans %q, want [child root]", r.spans)
	}
	if r.resource["service.name"] != "parley" || r.resource["service.version"] != "v-test" || r.resource["deployment.environment"] != "ci" {
		t.Errorf("the collector got resource %v, want service.name parley, service.version v-test, deployment.environment ci", r.resource)
	}
}

// sendTwo makes a tracer for endpoint, ends a root span and a child, and
// shuts the tracer down, which sends them.
func sendTwo(t *testing.T, endpoint string) {
	t.Helper()
	ctx := context.Background()
	tr, err := New(ctx, Options{Endpoint: endpoint, SampleRatio: 1, Version: "v-test", Resource: map[string]string{"deployment.environment": "ci"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tr.Root(ctx, Parent{}, "root", KindServer, time.Time{})
	_, child := Start(ctx, "child", KindInternal)
	child.End()
	root.End()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

// The real OTLP/HTTP exporter, configured from an endpoint without a path,
// posts protobuf to the collector's /v1/traces, with the headers
// OTEL_EXPORTER_OTLP_HEADERS gives (a hosted collector's key).
func TestExportOTLPHTTP(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=collector-key-1")
	var got received
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Api-Key") != "collector-key-1" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != DefaultTracesPath || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "wrong path or type: "+r.URL.Path+" "+r.Header.Get("Content-Type"), http.StatusNotFound)
			return
		}
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.add(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	sendTwo(t, collector.URL)
	got.check(t)
}

type grpcCollector struct {
	coltrace.UnimplementedTraceServiceServer
	got *received
}

func (g grpcCollector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// grpc:// picks the OTLP/gRPC exporter.
func TestExportOTLPGRPC(t *testing.T) {
	var got received
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcCollector{got: &got})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	sendTwo(t, "grpc://"+ln.Addr().String())
	got.check(t)
}

// memTracer is a tracer whose spans go to the returned exporter.
func memTracer(t *testing.T, o Options) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	o.Exporter = exp
	tr, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

// Off, nothing is made: no tracer, the context as it came, no
// allocation for a span and its attributes.
func TestOffCostsNothing(t *testing.T) {
	tr, err := New(context.Background(), Options{SampleRatio: 1})
	if err != nil || tr != nil || tr.Enabled() {
		t.Fatalf("New without an endpoint = %v, %v; want nil (off)", tr, err)
	}
	ctx := context.Background()
	failure := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		if _, op := StartOp(ctx, "execute_tool", "files__read", KindInternal); op.On() {
			t.Fatal("StartOp made a span with tracing off")
		}
		c, span := Start(ctx, "turn", KindInternal)
		span.Str("k", "v")
		span.Int("n", 1)
		span.Content(AttrInput, "text")
		span.Fail(failure)
		span.End()
		if c != ctx || span.On() {
			t.Fatal("Start made a span with tracing off")
		}
		c, span = tr.Root(ctx, Parent{}, "root", KindServer, time.Time{})
		if c != ctx || span.On() {
			t.Fatal("a nil Tracer's Root made a span")
		}
		_ = Recall(ctx, "some-id")
	})
	if allocs != 0 {
		t.Errorf("a span with tracing off allocates %v times; want 0", allocs)
	}
	h := slog.NewTextHandler(io.Discard, nil)
	if tr.LogHandler(h) != h {
		t.Error("a nil Tracer's LogHandler wraps the handler")
	}
	inner := http.NotFoundHandler()
	if got := tr.Serve(inner, "/v1/"); got == nil {
		t.Error("a nil Tracer's Serve returned no handler")
	}
}

// Message text reaches a span only when record_content is on, and with
// secrets hidden then.
func TestRecordContent(t *testing.T) {
	for _, on := range []bool{false, true} {
		tr, exp := memTracer(t, Options{SampleRatio: 1, RecordContent: on, Scrub: func(s string) string {
			return strings.ReplaceAll(s, "sk-secret", "[redacted]")
		}})
		_, span := tr.Root(context.Background(), Parent{}, "turn", KindInternal, time.Time{})
		span.Content(AttrInput, "my key is sk-secret")
		span.Fail(errors.New("the provider said sk-secret is wrong"))
		span.End()
		s := exp.GetSpans()[0]
		var text string
		for _, a := range s.Attributes {
			if string(a.Key) == AttrInput {
				text = a.Value.AsString()
			}
		}
		want := ""
		if on {
			want = "my key is [redacted]"
		}
		if text != want {
			t.Errorf("record_content %v: %s = %q, want %q", on, AttrInput, text, want)
		}
		if s.Status.Description != "the provider said [redacted] is wrong" {
			t.Errorf("the error status is %q; want the error with its secret hidden", s.Status.Description)
		}
	}
}

// sample_ratio 0 keeps no trace parley begins, but a caller's sampled
// traceparent is followed.
func TestSampleRatio(t *testing.T) {
	tr, exp := memTracer(t, Options{SampleRatio: 0})
	ctx, span := tr.Root(context.Background(), Parent{}, "turn", KindInternal, time.Time{})
	if span.On() {
		t.Error("a root span is recorded at sample_ratio 0")
	}
	_, child := Start(ctx, "history read", KindInternal)
	child.End()
	span.End()
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported at sample_ratio 0, want 0", n)
	}
	rec := httptest.NewRecorder()
	tr.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, s := Start(r.Context(), "turn", KindInternal)
		s.End()
	}), "/v1/").ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "POST", "/v1/x", nil).
		WithContext(context.Background()))
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported for a request without traceparent at sample_ratio 0, want 0", n)
	}
	req := httptest.NewRequest("POST", "/v1/sessions", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	tr.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, s := Start(r.Context(), "turn", KindInternal)
		s.End()
	}), "/v1/").ServeHTTP(httptest.NewRecorder(), req)
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans for a sampled caller's request, want 2 (the request's and the turn's)", len(spans))
	}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span %s is in trace %s, not the caller's", s.Name, s.SpanContext.TraceID())
		}
	}
}

// Transport sends the request's span as traceparent, and nothing for a
// request with none.
func TestTransportInjectsTraceparent(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer srv.Close()
	client := &http.Client{Transport: Transport(nil)}
	tr, _ := memTracer(t, Options{SampleRatio: 1})
	ctx, span := tr.Root(context.Background(), Parent{}, "execute_tool files__read", KindInternal, time.Time{})
	defer span.End()
	for _, c := range []context.Context{ctx, context.Background()} {
		req, _ := http.NewRequestWithContext(c, "POST", srv.URL, bytes.NewReader(nil))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get("traceparent") != "" {
			t.Error("Transport changed the caller's request")
		}
	}
	sc := trace.SpanContextFromContext(ctx)
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if len(seen) != 2 || seen[0] != want || seen[1] != "" {
		t.Fatalf("the server saw traceparent %q, want [%q \"\"]", seen, want)
	}
}

// Remember and Recall carry a span from the turn to a loop that reads
// rows: the send hangs under the turn.
func TestHandoff(t *testing.T) {
	tr, exp := memTracer(t, Options{SampleRatio: 1})
	ctx, turn := tr.Root(context.Background(), Parent{}, "turn", KindInternal, time.Time{})
	Remember(ctx, "inbound-1")
	turn.End()
	_, send := Start(Recall(context.Background(), "inbound-1"), "outbox send", KindClient)
	send.End()
	_, lost := Start(Recall(context.Background(), "inbound-unknown"), "outbox send", KindClient)
	if lost.On() {
		t.Error("a send whose turn left nothing has a span")
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[1].Name != "outbox send" || spans[1].Parent.SpanID() != spans[0].SpanContext.SpanID() {
		t.Fatalf("spans %+v; want the send under the turn", spans)
	}
}

// A line logged with a span's context carries its trace and span ids;
// one without carries neither.
func TestLogHandler(t *testing.T) {
	tr, _ := memTracer(t, Options{SampleRatio: 1})
	var buf bytes.Buffer
	log := slog.New(tr.LogHandler(slog.NewTextHandler(&buf, nil))).With("component", "gateway")
	ctx, span := tr.Root(context.Background(), Parent{}, "turn", KindInternal, time.Time{})
	defer span.End()
	log.InfoContext(ctx, "in the turn")
	log.InfoContext(context.Background(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	sc := trace.SpanContextFromContext(ctx)
	if !strings.Contains(lines[0], "trace_id="+sc.TraceID().String()) || !strings.Contains(lines[0], "span_id="+sc.SpanID().String()) ||
		!strings.Contains(lines[0], "component=gateway") {
		t.Errorf("the line in the turn is %q; want its trace_id, span_id and component", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("the line outside any span is %q; want no trace_id", lines[1])
	}
}

// A collector that is down costs the spans, never the daemon: starting
// needs no connection, and the last flush gives up at its deadline.
func TestCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, endpoint := range []string{"http://" + addr, "grpc://" + addr} {
		t.Run(endpoint[:strings.Index(endpoint, ":")], func(t *testing.T) {
			var logged syncbuf.Buffer
			tr, err := New(context.Background(), Options{Endpoint: endpoint, SampleRatio: 1, Log: slog.New(slog.NewTextHandler(&logged, nil))})
			if err != nil {
				t.Fatalf("New with the collector down: %v", err)
			}
			ctx, span := tr.Root(context.Background(), Parent{}, "turn", KindInternal, time.Time{})
			_, child := Start(ctx, "history read", KindInternal)
			child.End()
			span.End()
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			err = tr.Shutdown(sctx)
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("Shutdown took %s with a 1s deadline", took)
			}
			// Said one way or the other: logged as the export fails, or
			// returned by Shutdown (which the daemon's Close logs).
			if err == nil && !strings.Contains(logged.String(), "trace export failed") {
				t.Errorf("nothing said of the spans that could not be sent; the log:\n%s", logged.String())
			}
		})
	}
}

// A turn that answers several messages hangs under the first one's span
// and links the others'.
func TestRootLinks(t *testing.T) {
	tr, exp := memTracer(t, Options{SampleRatio: 1})
	ctxA, a := tr.Root(context.Background(), Parent{}, "request a", KindServer, time.Time{})
	ctxB, b := tr.Root(context.Background(), Parent{}, "request b", KindServer, time.Time{})
	_, turn := tr.Root(context.Background(), ParentOf(ctxA), "turn", KindConsumer, time.Time{}, ParentOf(ctxB), Parent{})
	turn.End()
	a.End()
	b.End()
	s := exp.GetSpans()[0]
	ids := func(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }
	if s.Name != "turn" || s.Parent.SpanID() != ids(ctxA).SpanID() {
		t.Fatalf("the turn hangs under %s, want request a's %s", s.Parent.SpanID(), ids(ctxA).SpanID())
	}
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != ids(ctxB).SpanID() {
		t.Fatalf("the turn's links are %+v, want request b's span alone", s.Links)
	}
}

// The handoff table holds at most two generations: a span remembered
// long enough ago (here, 2×handoffCap spans ago) is forgotten, a recent
// one still recalled, whatever the load.
func TestHandoffBounded(t *testing.T) {
	tr, _ := memTracer(t, Options{SampleRatio: 1})
	ctx, turn := tr.Root(context.Background(), Parent{}, "turn", KindInternal, time.Time{})
	defer turn.End()
	key := func(i int) string { return "bounded-" + strconv.Itoa(i) }
	const n = 2*handoffCap + 10
	for i := range n {
		Remember(ctx, key(i))
	}
	handoffs.mu.Lock()
	held := len(handoffs.cur) + len(handoffs.prev)
	handoffs.mu.Unlock()
	if held > 2*handoffCap {
		t.Fatalf("the table holds %d spans, more than two generations of %d", held, handoffCap)
	}
	if !trace.SpanContextFromContext(Recall(context.Background(), key(n-1))).IsValid() {
		t.Error("the latest span remembered is not recalled")
	}
	if trace.SpanContextFromContext(Recall(context.Background(), key(0))).IsValid() {
		t.Error("the first of 2×handoffCap+10 spans is still held")
	}
}
