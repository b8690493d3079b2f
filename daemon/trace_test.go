package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/internal/syncbuf"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/telemetry"
)

// tracedYAML turns tracing on: every trace kept, one resource attribute;
// the endpoint is never called, as the test's exporter takes the spans.
const tracedYAML = "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n  sample_ratio: 1\n" +
	"  resource_attributes:\n    deployment.environment: trace-test\n"

// startTraced starts the daemon as `parley run` starts it, on the config
// extra adds to, with its spans going to the returned exporter. It stops
// at the end of the test.
func startTraced(t *testing.T, extra string, log *slog.Logger) (*Daemon, *tracetest.InMemoryExporter) {
	t.Helper()
	// extra may go on with the http section (indented keys), then others.
	path, _ := writeConfigTB(t, "http:\n  listen: 127.0.0.1:0\n"+extra)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	exp := tracetest.NewInMemoryExporter()
	ctx := context.Background()
	d, err := New(ctx, cfg, log, WithSpanExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(ctx); err != nil {
			t.Error(err)
		}
		d.Close()
	})
	return d, exp
}

// waitSpans waits until the exporter holds spans that ok accepts, and
// returns them.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, what string, ok func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		spans := exp.GetSpans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s; the spans: %s", what, describeSpans(spans))
		}
		<-tick.C
	}
}

func describeSpans(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString("\n  " + s.Name + " trace " + s.SpanContext.TraceID().String() + " parent " + s.Parent.SpanID().String())
	}
	return b.String()
}

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// named are the spans called name, or whose name begins with it and a
// space ("chat " for the model calls).
func named(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name || strings.HasPrefix(s.Name, name+" ") {
			out = append(out, s)
		}
	}
	return out
}

func inTrace(spans tracetest.SpanStubs, id trace.TraceID) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.SpanContext.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// Each Telegram message is one trace: the turn, under it the wait in the
// queue, the history read, each model call with the GenAI conventions'
// attributes, the tool call, and the reply's send from the outbox, all
// through the fake Bot API and the OpenAI-compatible provider at the wire.
func TestTraceTelegramTurn(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	model := llmtest.NewOpenAIEcho(t, 20*time.Millisecond)
	model.CallTool("look it up", "kv_get", `{"key":"colour"}`)
	_, exp := startTraced(t, "gateway:\n  debounce: 0s\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n    tools: [kv_get]\n"+tracedYAML+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "), nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tg.InjectText(42, 42, "hello traces")
	if _, err := tg.WaitSent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tg.InjectText(42, 42, "look it up")
	if _, err := tg.WaitSent(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// The sends and the turns end apart (a send may end first).
	spans := waitSpans(t, exp, "two turns and their replies' sends", func(s tracetest.SpanStubs) bool {
		return len(named(s, telemetry.SpanOutboxSend)) >= 2 && len(named(s, telemetry.SpanTurn)) >= 2
	})

	turns := named(spans, telemetry.SpanTurn)
	if len(turns) != 2 {
		t.Fatalf("%d turn spans, want 2 (one a message): %s", len(turns), describeSpans(spans))
	}
	if turns[0].SpanContext.TraceID() == turns[1].SpanContext.TraceID() {
		t.Fatalf("both turns are in trace %s; each message should begin its own", turns[0].SpanContext.TraceID())
	}
	for i, turn := range turns {
		if turn.Parent.IsValid() {
			t.Errorf("turn %d has a parent (%s); a Telegram message begins its trace", i, turn.Parent.SpanID())
		}
		if v, _ := attr(turn, telemetry.AttrChannel); v.AsString() != "tg-main" {
			t.Errorf("turn %d: %s = %q, want tg-main", i, telemetry.AttrChannel, v.AsString())
		}
		if v, _ := attr(turn, telemetry.AttrSession); v.AsString() == "" {
			t.Errorf("turn %d has no %s", i, telemetry.AttrSession)
		}
		if res := turn.Resource; res == nil {
			t.Errorf("turn %d has no resource", i)
		} else {
			got := map[string]string{}
			for _, kv := range res.Attributes() {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			if got["service.name"] != "parley" || got["deployment.environment"] != "trace-test" {
				t.Errorf("turn %d's resource = %v, want service.name=parley and deployment.environment=trace-test", i, got)
			}
		}
		own := inTrace(spans, turn.SpanContext.TraceID())
		children := map[string]int{}
		for _, s := range own {
			if s.SpanContext.SpanID() == turn.SpanContext.SpanID() {
				continue
			}
			name, _, _ := strings.Cut(s.Name, " gpt-test")
			children[name]++
			if s.Name == telemetry.SpanPermission {
				continue // under its tool call
			}
			if s.Parent.SpanID() != turn.SpanContext.SpanID() {
				t.Errorf("turn %d: span %q hangs under %s, not the turn (%s)", i, s.Name, s.Parent.SpanID(), turn.SpanContext.SpanID())
			}
			if _, ok := attr(s, telemetry.AttrInput); ok {
				t.Errorf("span %q records the message text with record_content off", s.Name)
			}
		}
		for _, want := range []string{telemetry.SpanQueueWait, telemetry.SpanHistory, "chat", telemetry.SpanOutboxSend} {
			if children[want] == 0 {
				t.Errorf("turn %d has no %q span under it; it has %v", i, want, children)
			}
		}
		if start := named(own, telemetry.SpanQueueWait); len(start) == 1 && !start[0].StartTime.Equal(turn.StartTime) {
			t.Errorf("turn %d begins at %s, its queue wait at %s: the turn begins when its message is queued", i, turn.StartTime, start[0].StartTime)
		}
	}

	// The model calls, by the GenAI semantic conventions.
	chats := named(spans, "chat")
	if len(chats) != 3 {
		t.Fatalf("%d model call spans, want 3 (one for the first message, two around the tool call): %s", len(chats), describeSpans(spans))
	}
	for _, c := range chats {
		for key, want := range map[string]string{
			telemetry.GenAIOperation: "chat", telemetry.GenAIRequestModel: "gpt-test", telemetry.GenAIResponseMod: "gpt-test",
			telemetry.GenAIProvider: "openai", telemetry.GenAISystem: "openai",
		} {
			if v, _ := attr(c, key); v.Emit() != want {
				t.Errorf("%s: %s = %q, want %q", c.Name, key, v.Emit(), want)
			}
		}
		for key, want := range map[string]int64{telemetry.GenAIInputTokens: 10, telemetry.GenAIOutputTokens: 3} {
			if v, _ := attr(c, key); v.AsInt64() != want {
				t.Errorf("%s: %s = %d, want %d", c.Name, key, v.AsInt64(), want)
			}
		}
		ttft, ok := attr(c, telemetry.GenAITimeToFirst)
		if !ok || ttft.AsFloat64() < 0.015 || ttft.AsFloat64() > c.EndTime.Sub(c.StartTime).Seconds() {
			t.Errorf("%s: %s = %v, want the fake's 20ms delay or more, within the call's %s", c.Name, telemetry.GenAITimeToFirst, ttft.AsFloat64(), c.EndTime.Sub(c.StartTime))
		}
		if len(c.Events) != 1 || c.Events[0].Name != telemetry.GenAIFirstToken {
			t.Errorf("%s: events %v, want one %s", c.Name, c.Events, telemetry.GenAIFirstToken)
		}
	}

	// The tool call, and the permission check it passed.
	tools := named(spans, "execute_tool")
	if len(tools) != 1 {
		t.Fatalf("%d tool spans, want 1: %s", len(tools), describeSpans(spans))
	}
	if v, _ := attr(tools[0], telemetry.GenAIToolName); v.AsString() != "kv_get" {
		t.Errorf("tool span: %s = %q, want kv_get", telemetry.GenAIToolName, v.AsString())
	}
	if v, _ := attr(tools[0], telemetry.GenAIToolCallID); v.AsString() != "call_1" {
		t.Errorf("tool span: %s = %q, want the model's call_1", telemetry.GenAIToolCallID, v.AsString())
	}
	if tools[0].SpanContext.TraceID() != turns[1].SpanContext.TraceID() {
		t.Errorf("the tool call is in trace %s, not its turn's %s", tools[0].SpanContext.TraceID(), turns[1].SpanContext.TraceID())
	}
	for _, p := range named(spans, telemetry.SpanPermission) {
		if p.Parent.SpanID() != tools[0].SpanContext.SpanID() {
			t.Errorf("a permission span hangs under %s, not the tool call %s", p.Parent.SpanID(), tools[0].SpanContext.SpanID())
		}
	}
}

// A line logged during a traced turn carries the turn's trace_id: the
// model refuses the call, and the gateway's "turn failed" line leads to
// the trace.
func TestTraceIDInTurnLog(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	model := llmtest.NewOpenAIEcho(t, 0)
	model.FailNext(1, http.StatusBadRequest)
	var out syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, exp := startTraced(t, "gateway:\n  debounce: 0s\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n"+tracedYAML+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "), log)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tg.InjectText(7, 7, "this one fails")
	if _, err := tg.WaitSent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	spans := waitSpans(t, exp, "the failed turn's span", func(s tracetest.SpanStubs) bool { return len(named(s, telemetry.SpanTurn)) == 1 })
	turn := named(spans, telemetry.SpanTurn)[0]
	if turn.Status.Description == "" {
		t.Errorf("the failed turn's span has no error status: %+v", turn.Status)
	}
	var found bool
	for _, line := range strings.Split(out.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "turn failed" {
			continue
		}
		found = true
		if rec["trace_id"] != turn.SpanContext.TraceID().String() {
			t.Errorf("the turn failed line has trace_id %v, want the turn's %s: %s", rec["trace_id"], turn.SpanContext.TraceID(), line)
		}
		if id, _ := rec["span_id"].(string); len(id) != 16 {
			t.Errorf("the turn failed line has span_id %v, want a span id: %s", rec["span_id"], line)
		}
	}
	if !found {
		t.Fatalf("no \"turn failed\" line in the log:\n%s", out.String())
	}
}

// callbackRecorder is a session's webhook_url that keeps each POST's
// traceparent header.
type callbackRecorder struct {
	mu      sync.Mutex
	parents []string
	got     chan struct{}
}

func (c *callbackRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.parents = append(c.parents, r.Header.Get("traceparent"))
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusOK)
}

// An API request's traceparent begins the trace its turn runs in: the
// request's span hangs under the caller's, the turn under the request's,
// and the reply callback's POST carries the trace on.
func TestTraceFromAPITraceparent(t *testing.T) {
	rec := &callbackRecorder{got: make(chan struct{}, 1)}
	hook := httptest.NewServer(rec)
	defer hook.Close()
	var out syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, exp := startTraced(t, "  tokens: [\""+apiToken+"\"]\n  callback_secret: \"0123456789abcdef0123456789abcdef-callbacks\"\n"+
		"  callback_allow: [\"127.0.0.1\"]\ngateway:\n  debounce: 0s\n"+tracedYAML, log)
	call := func(path string, body any, header map[string]string) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, err := http.NewRequest("POST", "http://"+d.listen+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiToken)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	sess := call("/v1/sessions", map[string]any{"title": "traced", "webhook_url": hook.URL}, nil)
	id, _ := sess["id"].(string)
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	call("/v1/sessions/"+id+"/messages", map[string]any{"content": "hello from a traced caller"},
		map[string]string{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"})
	select {
	case <-rec.got:
	case <-time.After(20 * time.Second):
		t.Fatal("no reply callback within 20s")
	}
	traceID, _ := trace.TraceIDFromHex(callerTrace)
	spans := waitSpans(t, exp, "the turn and the callback in the caller's trace", func(s tracetest.SpanStubs) bool {
		own := inTrace(s, traceID)
		return len(named(own, telemetry.SpanTurn)) == 1 && len(named(own, telemetry.SpanCallback)) == 1
	})
	own := inTrace(spans, traceID)
	var request tracetest.SpanStub
	for _, s := range own {
		if s.SpanKind == trace.SpanKindServer {
			request = s
		}
	}
	if !request.SpanContext.IsValid() {
		t.Fatalf("no request span in the caller's trace: %s", describeSpans(own))
	}
	if request.Parent.SpanID().String() != callerSpan || !request.Parent.IsRemote() {
		t.Errorf("the request span's parent is %s (remote %v), want the caller's %s", request.Parent.SpanID(), request.Parent.IsRemote(), callerSpan)
	}
	if v, _ := attr(request, "http.route"); !strings.HasSuffix(v.AsString(), "/messages") {
		t.Errorf("the request span's http.route = %q, want the messages route", v.AsString())
	}
	turn := named(own, telemetry.SpanTurn)[0]
	if turn.Parent.SpanID() != request.SpanContext.SpanID() {
		t.Errorf("the turn hangs under %s, not the request's span %s", turn.Parent.SpanID(), request.SpanContext.SpanID())
	}
	if len(named(own, "chat")) != 1 {
		t.Errorf("the caller's trace has %d model call spans, want 1: %s", len(named(own, "chat")), describeSpans(own))
	}
	cb := named(own, telemetry.SpanCallback)[0]
	if cb.Parent.SpanID() != turn.SpanContext.SpanID() {
		t.Errorf("the reply callback hangs under %s, not the turn %s", cb.Parent.SpanID(), turn.SpanContext.SpanID())
	}
	rec.mu.Lock()
	got := append([]string(nil), rec.parents...)
	rec.mu.Unlock()
	want := "00-" + callerTrace + "-" + cb.SpanContext.SpanID().String() + "-01"
	if len(got) != 1 || got[0] != want {
		t.Errorf("the reply callback's traceparent headers = %q, want [%q]", got, want)
	}
	// The request's access log line leads to the trace too.
	var logged bool
	for _, line := range strings.Split(out.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "http request" || rec["path"] != "/v1/sessions/"+id+"/messages" {
			continue
		}
		logged = true
		if rec["trace_id"] != callerTrace || rec["span_id"] != request.SpanContext.SpanID().String() {
			t.Errorf("the request's access log line has trace_id %v span_id %v, want %s and the request span's %s",
				rec["trace_id"], rec["span_id"], callerTrace, request.SpanContext.SpanID())
		}
	}
	if !logged {
		t.Errorf("no access log line of the message's request:\n%s", out.String())
	}
}

// A webhook's request span is the parent of the turn it starts.
func TestTraceWebhook(t *testing.T) {
	hooks := "hooks:\n  - id: ci\n    auth: hmac\n    secret: " + hookSecret + "\n    mode: sync\n    timeout: 20s\n" +
		"    prompt: \"CI failed on {{.repo}}\"\n"
	d, exp := startTraced(t, "gateway:\n  debounce: 0s\n"+tracedYAML+hooks, nil)
	status, out := postHook(t, http.DefaultClient, "http://"+d.listen+"/hooks/ci", []byte(`{"repo":"parley"}`))
	if status != http.StatusOK {
		t.Fatalf("the hook answered %d %v", status, out)
	}
	spans := waitSpans(t, exp, "the webhook's turn", func(s tracetest.SpanStubs) bool { return len(named(s, telemetry.SpanTurn)) == 1 })
	turn := named(spans, telemetry.SpanTurn)[0]
	var request tracetest.SpanStub
	for _, s := range inTrace(spans, turn.SpanContext.TraceID()) {
		if s.SpanKind == trace.SpanKindServer {
			request = s
		}
	}
	if v, _ := attr(request, "http.route"); v.AsString() != "/hooks/{id}" {
		t.Fatalf("no request span with the route /hooks/{id} in the turn's trace: %s", describeSpans(spans))
	}
	if request.Parent.IsValid() || turn.Parent.SpanID() != request.SpanContext.SpanID() {
		t.Errorf("the request span's parent is %s and the turn's %s; want none, and the request's %s",
			request.Parent.SpanID(), turn.Parent.SpanID(), request.SpanContext.SpanID())
	}
}

// Without an endpoint there is no tracer, so no span is ever made; an
// endpoint alone turns tracing on.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		on         bool
	}{
		{"default", "", false},
		{"ratio and content but no endpoint", "telemetry:\n  sample_ratio: 1\n  record_content: true\n", false},
		{"an endpoint", "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := writeConfigTB(t, tc.yaml)
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.tracer.Enabled() != tc.on {
				t.Fatalf("tracing on = %v, want %v", d.tracer.Enabled(), tc.on)
			}
		})
	}
}

// With record_content on, the turn's span carries the message and the
// reply, and the model call's span the model's answer.
func TestTraceRecordsContent(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	_, exp := startTraced(t, "gateway:\n  debounce: 0s\n"+tracedYAML+"  record_content: true\n"+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "), nil)
	tg.InjectText(9, 9, "what is on the span")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent, err := tg.WaitSent(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	spans := waitSpans(t, exp, "the turn", func(s tracetest.SpanStubs) bool { return len(named(s, telemetry.SpanTurn)) == 1 })
	turn := named(spans, telemetry.SpanTurn)[0]
	if v, _ := attr(turn, telemetry.AttrInput); v.AsString() != "what is on the span" {
		t.Errorf("the turn's %s = %q, want the message", telemetry.AttrInput, v.AsString())
	}
	if v, _ := attr(turn, telemetry.AttrOutput); v.AsString() == "" || v.AsString() != sent[0].Text {
		t.Errorf("the turn's %s = %q, want the reply sent, %q", telemetry.AttrOutput, v.AsString(), sent[0].Text)
	}
	chats := named(spans, "chat")
	if len(chats) != 1 {
		t.Fatalf("%d model call spans, want 1", len(chats))
	}
	if v, _ := attr(chats[0], telemetry.AttrOutput); v.AsString() != sent[0].Text {
		t.Errorf("the model call's %s = %q, want the model's answer %q", telemetry.AttrOutput, v.AsString(), sent[0].Text)
	}
}
