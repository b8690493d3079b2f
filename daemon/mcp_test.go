package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/mcptools/hostiletest"
)

// envMCPServer makes the daemon's test binary an MCP server over stdio.
const envMCPServer = "PARLEY_TEST_DAEMON_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envMCPServer) == "hostile" {
		hostiletest.Run()
		os.Exit(0)
	}
	if os.Getenv(envMCPServer) == "1" {
		s := mcp.NewServer(&mcp.Implementation{Name: "lookup", Version: "1"}, nil)
		type in struct {
			Word string `json:"word"`
		}
		mcp.AddTool(s, &mcp.Tool{Name: "define", Description: "defines a word"},
			func(ctx context.Context, _ *mcp.CallToolRequest, i in) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: i.Word + ": a small test word"}}}, nil, nil
			})
		_ = s.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// An agent in a Telegram chat (the fake Bot API) calls a tool of a stdio
// MCP server its rules allow (MCP tools ask by default; the permission
// tests cover the asking): the server starts for the turn, the model gets the tool's
// result, and the chat gets the reply. /readyz says when that server is
// down, and the dashboard's overview lists it.
func TestAgentCallsAnMCPTool(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, "http:\n  tokens: [\""+apiToken+"\"]\n"+
		"mcp:\n  servers:\n    - id: lookup\n      command: "+exe+"\n      env: [\""+envMCPServer+"=1\"]\n"+
		"agents:\n  - id: default\n    tools: [\"mcp:lookup\"]\n    permissions:\n      - tool: \"lookup__*\"\n        action: allow\n")
	defer stop()
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup__define", Arguments: json.RawMessage(`{"word":"gizmo"}`)}}}).
		Then(llm.Response{Text: "Looked it up."})
	tg.InjectText(42, 42, "what is a gizmo?")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, err := tg.WaitSent(ctx, 1)
	if err != nil || !strings.Contains(sent[0].Text, "Looked it up.") {
		t.Fatalf("the chat got %+v (%v)", sent, err)
	}
	reqs := d.offline.Requests()
	var offered, result bool
	for _, r := range reqs {
		for _, tool := range r.Tools {
			offered = offered || tool.Name == "lookup__define"
		}
		for _, m := range r.Messages {
			result = result || (m.Role == llm.RoleTool && m.Content == "gizmo: a small test word")
		}
	}
	if !offered || !result {
		t.Fatalf("the model was offered the tool: %v; got its result: %v", offered, result)
	}
	if st := d.mcp.Statuses(); len(st) != 1 || st[0].State != "ready" {
		t.Fatalf("mcp status: %+v", st)
	}
	// The server going down shows in /readyz as degraded.
	d.mcp.Close()
	hs := httptest.NewServer(httpserve.Handler(d.db, d.adapters, nil, httpserve.ReadyOptions{MCPDown: func() []string { return []string{"lookup"} }}))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || body["status"] != "degraded" || body["mcp"] == nil {
		t.Fatalf("/readyz with an MCP server down: %d %v", resp.StatusCode, body)
	}
}
