package daemon

import (
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

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/mcpserve"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/turns"
)

// mcpChannels are the channels of a daemon driven through /mcp.
func mcpChannels(*Daemon) map[adapters.ID]adapters.Adapter {
	return map[adapters.ID]adapters.Adapter{"api": turns.APIChannel{}, mcpserve.AdapterID: mcpserve.Channel{}}
}

// mcpTestServer serves d's routes as parley run does, the admin ones
// (/mcp among them) too.
func mcpTestServer(t *testing.T, d *Daemon) string {
	t.Helper()
	hs := httptest.NewServer(httpserve.AppHandler(d.routes(d.APIHandler())))
	t.Cleanup(hs.Close)
	return hs.URL
}

// bearerTransport adds an Authorization header to each request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP is the real SDK's client on url's /mcp with token.
func connectMCP(t *testing.T, ctx context.Context, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its structured result into out (when
// the call succeeded); it returns the result's text and whether it is an
// error result. A protocol error fails the test.
func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, out any) (string, bool) {
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

// Over streamable HTTP, on both engines: with an admin token, /mcp lists
// the tools; send_message goes through the gateway into the session
// mcp:default, on the channel mcp, and returns the reply (the echo model
// says the text back); list_sessions finds the session and read_session
// returns both messages. Bad input is an error result that says what to
// do. Without a token, or with another, 401; with http.mcp: false, 404.
func TestMCPServerOverHTTP(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		d, _, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+
			"agents:\n  - id: default\n  - id: second\n", mcpChannels)
		defer stop()
		url := mcpTestServer(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cs := connectMCP(t, ctx, url, apiToken)

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
		text, isErr := callTool(t, ctx, cs, "send_message", map[string]any{"text": "hello over MCP"}, &sent)
		if isErr || text != "hello over MCP" || sent.Reply != "hello over MCP" || sent.SessionKey != "mcp:default" ||
			sent.Agent != "default" || sent.SessionID == "" {
			t.Fatalf("send_message: %q (error %v) %+v", text, isErr, sent)
		}
		// Through the gateway: the message is on record as the channel mcp's.
		var adapter string
		if err := d.db.Read().QueryRowContext(ctx, "SELECT adapter FROM inbound WHERE chat_id = 'default'").Scan(&adapter); err != nil || adapter != "mcp" {
			t.Fatalf("inbound record: %q %v", adapter, err)
		}
		s, err := d.sessions.Session(ctx, sessions.ID(sent.SessionID))
		if err != nil || s.Key != sessions.MCPKey("default", "default") {
			t.Fatalf("the session: %+v %v", s.Key, err)
		}

		var list mcpserve.ListOutput
		if text, isErr := callTool(t, ctx, cs, "list_sessions", map[string]any{"surface": "mcp"}, &list); isErr ||
			len(list.Sessions) != 1 || list.Sessions[0].ID != sent.SessionID || list.Sessions[0].Key != "mcp:default" {
			t.Fatalf("list_sessions: %s %+v", text, list)
		}
		var read mcpserve.ReadOutput
		if text, isErr := callTool(t, ctx, cs, "read_session", map[string]any{"session_id": sent.SessionID}, &read); isErr ||
			len(read.Messages) != 2 || read.Messages[0].Role != "user" || read.Messages[0].Content != "hello over MCP" ||
			read.Messages[1].Role != "assistant" || read.Messages[1].Content != "hello over MCP" {
			t.Fatalf("read_session: %s %+v", text, read)
		}

		// Another agent, another session name: another session.
		var other mcpserve.SendOutput
		if text, isErr := callTool(t, ctx, cs, "send_message", map[string]any{"text": "to the second", "agent": "second", "session": "notes"}, &other); isErr ||
			other.SessionKey != "mcp:notes" || other.Agent != "second" || other.SessionID == sent.SessionID {
			t.Fatalf("send_message to another agent: %s %+v", text, other)
		}

		for _, tc := range []struct {
			name, tool string
			args       map[string]any
			want       string
		}{
			{"empty text", "send_message", map[string]any{"text": "  "}, "text is empty"},
			{"no text", "send_message", map[string]any{}, "text"},
			{"a chat command", "send_message", map[string]any{"text": "/reset"}, "name another session"},
			{"unknown agent", "send_message", map[string]any{"text": "hi", "agent": "nobody"}, "the agents are default, second"},
			{"bad session name", "send_message", map[string]any{"text": "hi", "session": "a b"}, "not a session name"},
			{"bad status", "list_sessions", map[string]any{"status": "sleeping"}, "use active or archived"},
			{"bad limit", "list_sessions", map[string]any{"limit": 1000}, "use 1 to 200"},
			{"bad cursor", "list_sessions", map[string]any{"cursor": "nope"}, "pass its next_cursor unchanged"},
			{"not an id", "read_session", map[string]any{"session_id": "mcp:default"}, "list_sessions gives each session's id"},
			{"unknown id", "read_session", map[string]any{"session_id": "01900000-0000-7000-8000-000000000000"}, "no session has the id"},
			{"wrong type", "read_session", map[string]any{"session_id": 5}, "session_id"},
			{"a NUL in the text", "send_message", map[string]any{"text": "a\x00b"}, "text holds a NUL byte"},
			{"a NUL in the session", "send_message", map[string]any{"text": "hi", "session": "\x00"}, "session holds a NUL byte"},
			{"a NUL in a filter", "list_sessions", map[string]any{"agent": "a\x00b"}, "agent holds a NUL byte"},
			{"a NUL in the id", "read_session", map[string]any{"session_id": "\x00"}, "not a session id"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				text, isErr := callTool(t, ctx, cs, tc.tool, tc.args, nil)
				if !isErr || !strings.Contains(text, tc.want) {
					t.Fatalf("%s %v: error %v %q, want an error result saying %q", tc.tool, tc.args, isErr, text, tc.want)
				}
			})
		}

		// Bytes that aren't UTF-8 are read as U+FFFD, as JSON decoding
		// does: an answer, not a server error.
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/mcp", strings.NewReader(
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"send_message\",\"arguments\":{\"text\":\"\xff\xfe\"}}}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\"reply\":\"\ufffd\ufffd\"") {
			t.Fatalf("a text that isn't UTF-8: %d %s", resp.StatusCode, body)
		}

		for _, tc := range []struct {
			name, auth string
		}{{"no token", ""}, {"another token", "Bearer not-" + apiToken}} {
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: %d, want 401", tc.name, resp.StatusCode)
			}
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		if _, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, nil); err == nil {
			t.Fatal("an SDK client without a token connected")
		}

		off := *d.cfg()
		off.HTTP.MCP = false
		d.conf.Store(&off)
		resp, err = http.Post(url+"/mcp", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("with http.mcp: false: %d, want 404", resp.StatusCode)
		}
	})
}

// Two send_message calls at once in one session are answered together in
// one turn (the debounce joins them): each call returns that turn's reply.
func TestMCPSendMessagesAnsweredTogether(t *testing.T) {
	d, _, stop := testDaemon(t, "gateway:\n  debounce: 400ms\nhttp:\n  tokens: [\""+apiToken+"\"]\n", mcpChannels)
	defer stop()
	url := mcpTestServer(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := connectMCP(t, ctx, url, apiToken)
	var wg sync.WaitGroup
	outs := make([]mcpserve.SendOutput, 2)
	errs := make([]bool, 2)
	for i, text := range []string{"first of two", "second of two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"text": text}})
			if err != nil || res.IsError {
				errs[i] = true
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &outs[i])
		}()
		// The second goes once the first is on record: in this order,
		// within the debounce.
		for n := 0; n <= i; {
			if err := d.db.Read().QueryRowContext(ctx, "SELECT COUNT(*) FROM inbound WHERE adapter = 'mcp'").Scan(&n); err != nil || ctx.Err() != nil {
				t.Fatalf("waiting for message %d on record: %v %v", i+1, err, ctx.Err())
			}
		}
	}
	wg.Wait()
	if errs[0] || errs[1] || outs[0].SessionID == "" || outs[0].SessionID != outs[1].SessionID ||
		!strings.Contains(outs[0].Reply, "second of two") || outs[0].Reply != outs[1].Reply {
		t.Fatalf("two at once: errors %v, results %+v", errs, outs)
	}
	msgs, err := d.sessions.Messages(ctx, sessions.ID(outs[0].SessionID), sessions.MessagesOptions{})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("the session holds %d messages (%v), want two questions and one reply", len(msgs), err)
	}
}
