package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/mcptools/hostiletest"
	"github.com/parleyd/parley/tools"
)

// envServe makes the test binary an MCP server over stdio: the real SDK,
// in a process of its own, as a configured command would be.
const envServe = "PARLEY_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "hostile" {
		hostiletest.Run()
		os.Exit(0)
	}
	if v := os.Getenv(envServe); v == "1" || v == "user" {
		srv := testServer()
		if v == "user" {
			srv = userTokenServer()
		}
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to say back"`
}

type echoOut struct {
	Said string `json:"said"`
}

// testServer is an MCP server with tools that echo, fail, sleep, exit the
// process, and add a tool (which announces a changed list).
func testServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "parley-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "says the text back"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, echoOut{Said: in.Text}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "always fails"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is full"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "sleeps a second"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "ends the server's process"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "adds the tool extra"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "came later"},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra here"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
	return s
}

func stdioServer(t *testing.T, id string) config.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.MCPServer{ID: id, Command: exe, Env: []string{envServe + "=1"}, Timeout: config.Duration(300 * time.Millisecond)}
}

func httpServer(t *testing.T, id string, wantAuth string) config.MCPServer {
	s := testServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != wantAuth {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return config.MCPServer{ID: id, URL: srv.URL, Headers: []string{"Authorization: " + wantAuth}, Timeout: config.Duration(300 * time.Millisecond)}
}

func call(t *testing.T, reg *tools.Registry, name, args string) tools.Result {
	t.Helper()
	return reg.Call(context.Background(), tools.Call{Name: name, Arguments: json.RawMessage(args)})
}

// Over stdio and over HTTP: the tools reach the registry namespaced, run,
// say a tool's failure as a failed result, check arguments against the
// server's schema, and cut a slow call off at the timeout.
func TestToolsOfAServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) config.MCPServer
	}{
		{"stdio", func(t *testing.T) config.MCPServer { return stdioServer(t, "local") }},
		{"http", func(t *testing.T) config.MCPServer { return httpServer(t, "remote", "Bearer s3cret") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := tools.NewRegistry()
			cfg := tc.cfg(t)
			m := New([]config.MCPServer{cfg}, reg, nil)
			defer m.Close()
			if st := m.Statuses(); len(st) != 1 || st[0].State != StateIdle {
				t.Fatalf("before any turn: %+v", st)
			}
			names := m.Expand(context.Background(), []string{"memory_write", "mcp:" + cfg.ID})
			sort.Strings(names)
			want := []string{cfg.ID + "__echo", cfg.ID + "__exit", cfg.ID + "__fail", cfg.ID + "__grow", cfg.ID + "__sleep", "memory_write"}
			sort.Strings(want)
			if !slices.Equal(names, want) {
				t.Fatalf("expanded to %q, want %q", names, want)
			}
			if got := m.Expand(context.Background(), []string{"mcp:" + cfg.ID + "/echo"}); !slices.Equal(got, []string{cfg.ID + "__echo"}) {
				t.Fatalf("one tool: %q", got)
			}
			if res := call(t, reg, cfg.ID+"__echo", `{"text":"hi"}`); res.IsError || res.Content != "echo: hi" {
				t.Fatalf("echo: %+v", res)
			}
			if res := call(t, reg, cfg.ID+"__echo", `{"text":5}`); !res.IsError || !errors.Is(res.Err, tools.ErrInvalidArguments) {
				t.Fatalf("bad arguments: %+v", res)
			}
			if res := call(t, reg, cfg.ID+"__fail", `{}`); !res.IsError || !strings.Contains(res.Content, "the disk is full") {
				t.Fatalf("a failing tool: %+v", res)
			}
			if res := call(t, reg, cfg.ID+"__sleep", `{}`); !res.IsError || !strings.Contains(res.Content, "took longer than 300ms") {
				t.Fatalf("a slow tool: %+v", res)
			}
			// The server is still there after the timeout.
			if res := call(t, reg, cfg.ID+"__echo", `{"text":"still"}`); res.IsError || res.Content != "echo: still" {
				t.Fatalf("after a timeout: %+v", res)
			}
			if st := m.Statuses(); st[0].State != StateReady || len(st[0].Tools) != 5 {
				t.Fatalf("status: %+v", st)
			}
		})
	}
}

// A server that dies makes its tools fail (the turn goes on), and it is
// started again, after a backoff, when a tool is called.
func TestServerStartedAgainAfterItDies(t *testing.T) {
	reg := tools.NewRegistry()
	cfg := stdioServer(t, "flaky")
	m := New([]config.MCPServer{cfg}, reg, nil)
	defer m.Close()
	m.Expand(context.Background(), []string{"mcp:flaky"})
	if res := call(t, reg, "flaky__exit", `{}`); !res.IsError {
		t.Fatalf("the call that killed the server: %+v", res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Statuses()[0].State != StateDown && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := m.Statuses()[0]; st.State != StateDown || len(m.Down()) != 1 {
		t.Fatalf("after the server died: %+v", st)
	}
	var res tools.Result
	for time.Now().Before(deadline) {
		if res = call(t, reg, "flaky__echo", `{"text":"back"}`); !res.IsError {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.IsError || res.Content != "echo: back" {
		t.Fatalf("the server never came back: %+v", res)
	}
	if len(m.Down()) != 0 {
		t.Fatalf("still down: %+v", m.Statuses())
	}
}

// A server that can't start leaves its tools out of the turn and says why.
func TestServerThatCantStart(t *testing.T) {
	reg := tools.NewRegistry()
	m := New([]config.MCPServer{{ID: "gone", Command: "/nonexistent/mcp-server", Timeout: config.DefaultMCPTimeout}}, reg, nil)
	defer m.Close()
	if got := m.Expand(context.Background(), []string{"memory_write", "mcp:gone"}); !slices.Equal(got, []string{"memory_write"}) {
		t.Fatalf("expanded to %q", got)
	}
	if st := m.Statuses()[0]; st.State != StateDown || st.Error == "" {
		t.Fatalf("status: %+v", st)
	}
}

// notifications/tools/list_changed brings a new tool into the registry.
func TestToolListChanges(t *testing.T) {
	reg := tools.NewRegistry()
	cfg := httpServer(t, "grower", "Bearer x")
	m := New([]config.MCPServer{cfg}, reg, nil)
	defer m.Close()
	m.Expand(context.Background(), []string{"mcp:grower"})
	if _, ok := reg.Tool("grower__extra"); ok {
		t.Fatal("extra is there before it was added")
	}
	if res := call(t, reg, "grower__grow", `{}`); res.IsError {
		t.Fatalf("grow: %+v", res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := reg.Tool("grower__extra"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new tool never arrived: %+v", m.Statuses())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := call(t, reg, "grower__extra", `{}`); res.IsError || res.Content != "extra here" {
		t.Fatalf("extra: %+v", res)
	}
}

// A zero-work tool call's overhead through stdio and HTTP, p50 and p99.
func BenchmarkToolCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) config.MCPServer
	}{
		{"stdio", func(t *testing.T) config.MCPServer { return stdioServer(t, "local") }},
		{"http", func(t *testing.T) config.MCPServer { return httpServer(t, "remote", "Bearer b") }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			t := &testing.T{}
			cfg := tc.cfg(t)
			cfg.Timeout = config.Duration(10 * time.Second)
			reg := tools.NewRegistry()
			m := New([]config.MCPServer{cfg}, reg, nil)
			defer m.Close()
			m.Expand(context.Background(), []string{"mcp:" + cfg.ID})
			took := make([]time.Duration, 0, b.N)
			args := json.RawMessage(`{"text":"x"}`)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if res := reg.Call(context.Background(), tools.Call{Name: cfg.ID + "__echo", Arguments: args}); res.IsError {
					b.Fatal(res.Content)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// A tool whose MCP server fails twice and then answers succeeds on the
// third try when its retry policy allows three, with the failed tries in
// its result; without a policy the first failure is the answer.
func TestRetryPolicyMendsAFlakyServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry config.Retry
		tool  []config.ToolRetry
		ok    bool
	}{
		{"server policy", config.Retry{Attempts: 3, Backoff: config.Duration(10 * time.Millisecond), On: []string{"unavailable"}}, nil, true},
		{"tool policy", config.Retry{Attempts: 1}, []config.ToolRetry{{Tool: "echo", Attempts: 3, On: []string{"unavailable"}}}, true},
		{"policy for another tool", config.Retry{Attempts: 1}, []config.ToolRetry{{Tool: "sleep", Attempts: 3, On: []string{"unavailable"}}}, false},
		{"no policy", config.Retry{Attempts: 1}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testServer()
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
			var calls, failed atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if strings.Contains(string(body), `"tools/call"`) && calls.Add(1) <= 2 {
					failed.Add(1)
					http.Error(w, "upstream is restarting", http.StatusServiceUnavailable)
					return
				}
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			reg := tools.NewRegistry()
			cfg := config.MCPServer{ID: "flaky", URL: srv.URL, Timeout: config.Duration(2 * time.Second), Retry: tc.retry, ToolRetry: tc.tool}
			m := New([]config.MCPServer{cfg}, reg, nil)
			defer m.Close()
			m.Expand(context.Background(), []string{"mcp:flaky"})
			res := call(t, reg, "flaky__echo", `{"text":"third time"}`)
			if !tc.ok {
				if !res.IsError || len(res.Attempts) != 0 || failed.Load() != 1 {
					t.Fatalf("without a policy for it: %+v after %d failures, want the first failure as the answer", res, failed.Load())
				}
				return
			}
			if res.IsError || res.Content != "echo: third time" {
				t.Fatalf("after %d failures: %+v, want the third try's answer", failed.Load(), res)
			}
			if len(res.Attempts) != 2 || res.Attempts[0].Class != tools.ClassUnavailable || res.Attempts[1].N != 2 ||
				!strings.Contains(res.Attempts[0].Error, `the server answered "Service Unavailable"`) {
				t.Fatalf("failed tries %+v, want two, unavailable", res.Attempts)
			}
		})
	}
}

// The config's failure classes are the ones the registry retries.
func TestRetryClassesAgree(t *testing.T) {
	if !slices.Equal(tools.Classes, config.RetryClasses) {
		t.Fatalf("tools retries %q, the config allows %q", tools.Classes, config.RetryClasses)
	}
}
