package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/internal/syncbuf"
	"github.com/parleyd/parley/mcpserve"
)

// mcpToolCall calls a tool and decodes its structured result into out
// (when it succeeded); it returns the result's text and whether it is an
// error result. A protocol error fails the test.
func mcpToolCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, out any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol error: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !res.IsError && out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil || json.Unmarshal(b, out) != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return text.String(), res.IsError
}

// parley mcp serve, run as a process of its own by an MCP client (the
// real SDK's, over the process's standard input and output): in process
// on the configured database, and beside a running daemon, whose /mcp it
// passes the calls to. Either way the client lists the tools, send_message
// answers in the session mcp:default (the echo model says the text back),
// list_sessions finds that session and read_session returns both
// messages; bad input is an error result. Standard output carries nothing
// but MCP (the client would fail on anything else); logs go to standard
// error.
func TestMCPServeOverStdio(t *testing.T) {
	for _, tc := range []struct {
		name   string
		daemon bool
	}{{"in process", false}, {"beside a running daemon", true}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			path, dbPath := writeConfig(t, "gateway:\n  debounce: 0s\nhttp:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if tc.daemon {
				runDaemon(t, ctx, path, dbPath)
			}

			cmd := parleyCommand("mcp", "serve", "--config", path)
			stderr := &syncbuf.Buffer{}
			cmd.Stderr = stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			const leaveWithin = 30 * time.Second
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: leaveWithin}, nil)
			if err != nil {
				t.Fatalf("connect: %v; stderr:\n%s", err, stderr)
			}
			defer cs.Close()
			if info := cs.InitializeResult().ServerInfo; info.Name != "parley" || info.Version != version() {
				t.Errorf("server info %+v, want parley %s", info, version())
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if strings.Join(names, ",") != "list_sessions,read_session,send_message" {
				t.Fatalf("tools: %v", names)
			}

			var sent mcpserve.SendOutput
			text, isErr := mcpToolCall(t, ctx, cs, "send_message", map[string]any{"text": "hello from an MCP client"}, &sent)
			if isErr || text != "hello from an MCP client" || sent.SessionKey != "mcp:default" || sent.SessionID == "" {
				t.Fatalf("send_message: %q (error %v) %+v; stderr:\n%s", text, isErr, sent, stderr)
			}
			var list mcpserve.ListOutput
			if text, isErr := mcpToolCall(t, ctx, cs, "list_sessions", nil, &list); isErr ||
				len(list.Sessions) != 1 || list.Sessions[0].ID != sent.SessionID || list.Sessions[0].Key != "mcp:default" {
				t.Fatalf("list_sessions: %s %+v", text, list)
			}
			var read mcpserve.ReadOutput
			if text, isErr := mcpToolCall(t, ctx, cs, "read_session", map[string]any{"session_id": sent.SessionID}, &read); isErr ||
				len(read.Messages) != 2 || read.Messages[0].Content != "hello from an MCP client" || read.Messages[1].Role != "assistant" {
				t.Fatalf("read_session: %s %+v", text, read)
			}
			// A second message follows on in the same session.
			var again mcpserve.SendOutput
			if text, isErr := mcpToolCall(t, ctx, cs, "send_message", map[string]any{"text": "and again"}, &again); isErr || again.SessionID != sent.SessionID {
				t.Fatalf("second send_message: %s %+v", text, again)
			}
			for _, bad := range []struct {
				tool string
				args map[string]any
				want string
			}{
				{"send_message", map[string]any{"text": ""}, "text is empty"},
				{"send_message", map[string]any{"text": "hi", "agent": "nobody"}, `no agent is called "nobody"`},
				{"read_session", map[string]any{"session_id": "nope"}, "not a session id"},
				{"list_sessions", map[string]any{"status": "gone"}, "use active or archived"},
			} {
				if text, isErr := mcpToolCall(t, ctx, cs, bad.tool, bad.args, nil); !isErr || !strings.Contains(text, bad.want) {
					t.Errorf("%s %v: error %v %q, want an error result saying %q", bad.tool, bad.args, isErr, text, bad.want)
				}
			}
			// The end of its input ends it, cleanly, before the client
			// would signal it.
			start := time.Now()
			if err := cs.Close(); err != nil || !cmd.ProcessState.Success() {
				t.Errorf("parley mcp serve ended with %v (%v); stderr:\n%s", err, cmd.ProcessState, stderr)
			}
			if took := time.Since(start); took >= leaveWithin {
				t.Errorf("parley mcp serve took %s to leave after its input closed", took)
			}
			forwarded := strings.Contains(stderr.String(), "passing MCP calls to http://"+addr+"/mcp")
			if forwarded != tc.daemon {
				t.Errorf("forwarded to the daemon: %v, want %v; stderr:\n%s", forwarded, tc.daemon, stderr)
			}
		})
	}
}
