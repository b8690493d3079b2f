package mcptools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/tools"
)

// userTokenServer is an MCP server that says whose token it was given (in
// upper case: the token itself would be scrubbed) and one that leaks it.
func userTokenServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "parley-user-test", Version: "1"}, nil)
	token := func(req *mcp.CallToolRequest) string {
		if req.Extra != nil && req.Extra.Header != nil {
			return strings.TrimPrefix(req.Extra.Header.Get("X-User-Token"), "token ")
		}
		return os.Getenv("USER_TOKEN")
	}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "says whose token this is"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(token(req))}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "leak", Description: "says the token back"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad token " + token(req)}}}, nil, nil
		})
	return s
}

type tokenBook struct {
	mu sync.Mutex
	m  map[string]string
}

func (b *tokenBook) set(user, tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[user] = tok
}

func (b *tokenBook) token(_ context.Context, user, provider string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if provider != "github" {
		return "", fmt.Errorf("provider %q", provider)
	}
	tok, ok := b.m[user]
	if !ok {
		return "", fmt.Errorf("%s: %w", user, ErrNotConnected)
	}
	return tok, nil
}

func callAs(reg *tools.Registry, user, name string) tools.Result {
	return reg.Call(context.Background(), tools.Call{Name: name, Arguments: json.RawMessage(`{}`), Origin: permissions.Origin{User: user}})
}

// Each person's calls carry their own token, to a connection of their
// own; a person without one is told to connect, and the token never comes
// back in a result.
func TestUserTokens(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("USER_TOKEN", "operators-own") // parley's environment must not reach a person's server
	var headers sync.Map
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) config.MCPServer
	}{
		{"stdio", func(t *testing.T) config.MCPServer {
			return config.MCPServer{ID: "gh", Command: exe, Env: []string{envServe + "=user", "USER_TOKEN=from-config"}, Timeout: config.DefaultMCPTimeout,
				UserToken: config.UserToken{Provider: "github", Env: "USER_TOKEN", Format: "%s"}}
		}},
		{"http", func(t *testing.T) config.MCPServer {
			s := userTokenServer()
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				headers.Store(r.Header.Get("X-User-Token"), true)
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			return config.MCPServer{ID: "gh", URL: srv.URL, Timeout: config.DefaultMCPTimeout,
				UserToken: config.UserToken{Provider: "github", Header: "X-User-Token", Format: "token %s"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := tools.NewRegistry()
			m := New([]config.MCPServer{tc.cfg(t)}, reg, nil)
			defer m.Close()
			book := &tokenBook{m: map[string]string{}}
			m.SetTokens(book.token)
			ctx := context.Background()

			// Nobody has connected: only the tool that says how.
			if got := m.ExpandFor(ctx, []string{"mcp:gh"}, "telegram:1"); !slices.Equal(got, []string{"gh__connect_account"}) {
				t.Fatalf("before any connection: %q", got)
			}
			res := callAs(reg, "telegram:1", "gh__connect_account")
			if !res.IsError || !strings.Contains(res.Content, "connect with /connect github in a direct chat") {
				t.Fatalf("connect_account: %+v", res)
			}

			book.set("telegram:1", "tok-ann")
			got := m.ExpandFor(ctx, []string{"mcp:gh"}, "telegram:1")
			slices.Sort(got)
			if !slices.Equal(got, []string{"gh__leak", "gh__whoami"}) {
				t.Fatalf("after ann connected: %q", got)
			}
			if _, ok := reg.Tool("gh__connect_account"); ok {
				t.Error("connect_account stays once the tools are known")
			}
			if res := callAs(reg, "telegram:1", "gh__whoami"); res.IsError || res.Content != "TOK-ANN" {
				t.Fatalf("ann's call: %+v", res)
			}
			// Bob has not connected: the same tool tells him to.
			if got := m.ExpandFor(ctx, []string{"mcp:gh/whoami"}, "discord:2"); !slices.Equal(got, []string{"gh__whoami"}) {
				t.Fatalf("bob sees %q", got)
			}
			if res := callAs(reg, "discord:2", "gh__whoami"); !res.IsError || !strings.Contains(res.Content, "connect with /connect github in a direct chat") {
				t.Fatalf("bob's call: %+v", res)
			}
			if res := callAs(reg, "", "gh__whoami"); !res.IsError || !strings.Contains(res.Content, "no person is behind this run") {
				t.Fatalf("a call with nobody behind it: %+v", res)
			}
			book.set("discord:2", "tok-bob")
			if res := callAs(reg, "discord:2", "gh__whoami"); res.IsError || res.Content != "TOK-BOB" {
				t.Fatalf("bob's call once connected: %+v", res)
			}
			if res := callAs(reg, "telegram:1", "gh__whoami"); res.Content != "TOK-ANN" {
				t.Fatalf("ann's call after bob's: %+v", res)
			}
			// A new token starts a new connection with it.
			book.set("telegram:1", "tok-ann-2")
			if res := callAs(reg, "telegram:1", "gh__whoami"); res.Content != "TOK-ANN-2" {
				t.Fatalf("ann's call after reconnecting: %+v", res)
			}
			// A server that sends the token back never shows it.
			res = callAs(reg, "telegram:1", "gh__leak")
			if !res.IsError || strings.Contains(res.Content, "tok-ann-2") || !strings.Contains(res.Content, "[redacted]") {
				t.Fatalf("leak: %+v", res)
			}
			if st := m.Statuses(); len(st) != 1 || !strings.Contains(st[0].State, "per person") || len(st[0].Tools) != 2 {
				t.Fatalf("status: %+v", st)
			}
			if errs := m.Start(ctx); len(errs) != 0 {
				t.Fatalf("Start: %v", errs)
			}
		})
	}
	if _, ok := headers.Load("token tok-ann"); !ok {
		t.Error("the HTTP server never saw ann's header")
	}
}
