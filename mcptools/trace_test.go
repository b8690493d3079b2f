package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/telemetry"
	"github.com/parleyd/parley/tools"
)

// A tool call of an MCP server over HTTP is a span naming the server, and
// the server's tools/call request carries it as traceparent.
func TestToolCallTraceReachesHTTPServer(t *testing.T) {
	s := testServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var mu sync.Mutex
	var callParents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/call"`) {
			mu.Lock()
			callParents = append(callParents, r.Header.Get("traceparent"))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	reg := tools.NewRegistry()
	m := New([]config.MCPServer{{ID: "remote", URL: srv.URL, Timeout: config.Duration(5 * time.Second)}}, reg, nil)
	defer m.Close()
	m.Expand(context.Background(), []string{"mcp:remote"})

	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, turn := tr.Root(context.Background(), telemetry.Parent{}, telemetry.SpanTurn, telemetry.KindInternal, time.Time{})
	res := reg.Call(ctx, tools.Call{Name: "remote__echo", ID: "call_7", Arguments: json.RawMessage(`{"text":"hi"}`)})
	turn.End()
	if res.IsError {
		t.Fatalf("the call failed: %+v", res)
	}
	var call tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		if sp.Name == "execute_tool remote__echo" {
			call = sp
		}
	}
	attrs := map[string]string{}
	for _, a := range call.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs[telemetry.AttrMCPServer] != "remote" || attrs[telemetry.GenAIToolName] != "remote__echo" || attrs[telemetry.GenAIToolCallID] != "call_7" {
		t.Fatalf("the tool call's span has %v; want the server remote, the tool and the call id", attrs)
	}
	want := "00-" + call.SpanContext.TraceID().String() + "-" + call.SpanContext.SpanID().String() + "-01"
	mu.Lock()
	defer mu.Unlock()
	if len(callParents) != 1 || callParents[0] != want {
		t.Fatalf("the server's tools/call requests carried traceparent %q, want [%q]", callParents, want)
	}
}
