package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/doctor"
)

// envMCPServer makes the test binary an MCP server over stdio.
const envMCPServer = "PARLEY_TEST_CMD_MCP_SERVER"

func serveMCP() {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "search", Description: "finds notes"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "none"}}}, nil, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// parley mcp ls and parley doctor start each MCP server and say what it
// has, or what is wrong.
func TestMCPListAndDoctor(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeConfig(t, "mcp:\n  servers:\n    - id: notes\n      command: "+exe+"\n      env: [\""+envMCPServer+"=1\"]\n"+
		"    - id: broken\n      command: /nonexistent/mcp\n")
	code, out, errOut := parley(t, context.Background(), "mcp", "ls", "--config", path)
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			lines[f[0]] = l
		}
	}
	if code != 0 || !strings.Contains(lines["notes"], "ready") || !strings.Contains(lines["notes"], "search") ||
		!strings.Contains(lines["broken"], "down") {
		t.Fatalf("mcp ls: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = parley(t, context.Background(), "doctor", "--config", path, "--json")
	var findings []doctor.Finding
	if code != 1 || json.Unmarshal([]byte(out), &findings) != nil {
		t.Fatalf("doctor: exit %d\n%s", code, out)
	}
	got := map[string]doctor.Finding{}
	for _, f := range findings {
		got[f.Check] = f
	}
	if f := got["mcp notes"]; f.Status != "ok" || !strings.Contains(f.Detail, "search") {
		t.Errorf("a working server: %+v", f)
	}
	if f := got["mcp broken"]; f.Status != "fail" || !strings.Contains(f.Fix, "mcp.servers broken") {
		t.Errorf("a broken server: %+v", f)
	}
	// An agent naming a server that isn't configured is a config problem.
	path, _ = writeConfig(t, "agents:\n  - id: default\n    tools: [\"mcp:nowhere\"]\n")
	if code, out, _ := parley(t, context.Background(), "config", "check", "--config", path); code != 1 || !strings.Contains(out, `no MCP server is called "nowhere"`) {
		t.Fatalf("config check: exit %d %q", code, out)
	}
}
