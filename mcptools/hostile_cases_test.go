package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/internal/syncbuf"
	"github.com/parleyd/parley/mcptools/hostiletest"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/tools"
)

// leakValue is the hostile server's secret: every character JSON and
// HTML escape.
const leakValue = `s3<cr>&t"v\al-0123456789`

func hostileServer(t *testing.T, id string) config.MCPServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.MCPServer{ID: id, Command: exe, Env: []string{envServe + "=hostile", hostiletest.EnvLeak + "=" + leakValue},
		Timeout: config.Duration(10 * time.Second)}
}

func hostileManager(t *testing.T, cfgs ...config.MCPServer) (*Manager, *tools.Registry, *syncbuf.Buffer) {
	t.Helper()
	reg := tools.NewRegistry()
	logs := &syncbuf.Buffer{}
	m := New(cfgs, reg, slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(m.Close)
	for _, c := range cfgs {
		m.Expand(context.Background(), []string{Prefix + c.ID})
	}
	return m, reg, logs
}

// leaked reports the forms of v (raw, JSON- and URL-escaped) found in text.
func leaked(text, v string) []string {
	var out []string
	for _, f := range secret.Forms(v) {
		if strings.Contains(text, f) {
			out = append(out, f)
		}
	}
	// Any long piece of it, too: a secret cut in two still leaks.
	if strings.Contains(text, "0123456789") {
		out = append(out, "0123456789")
	}
	return out
}

// A stdio server's environment is its env and PATH, HOME and LANG of
// parley's (or what inherit_env names), nothing else: not
// PARLEY_SECRET_KEY, not parley's tokens.
func TestStdioServerGetsOnlyItsOwnEnvironment(t *testing.T) {
	t.Setenv("PARLEY_SECRET_KEY", "parent-key-abcdefghijklmnopqrstuvwxyz")
	t.Setenv("PARLEY_API_TOKEN", "parent-token-abcdefghijklmnopqrstuvwxyz")
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("HOME", "/home/parley-test")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "Europe/Berlin")
	byDefault := hostileServer(t, "dflt")
	none := hostileServer(t, "none")
	none.InheritEnv = []string{}
	tz := hostileServer(t, "tz")
	tz.InheritEnv = []string{"TZ"}
	_, reg, _ := hostileManager(t, byDefault, none, tz)
	env := func(id string) []string {
		res := call(t, reg, id+"__env", `{}`)
		if res.IsError {
			t.Fatalf("%s env: %+v", id, res)
		}
		lines := strings.Split(res.Content, "\n")
		slices.Sort(lines)
		return lines
	}
	want := func(extra ...string) []string {
		out := append([]string{envServe + "=hostile", hostiletest.EnvLeak + "=" + config.Redacted}, extra...)
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"dflt", want("PATH=/usr/bin:/bin", "HOME=/home/parley-test", "LANG=C.UTF-8")},
		{"none", want()},
		{"tz", want("TZ=Europe/Berlin")},
	} {
		if got := env(tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("%s's environment:\n%q\nwant\n%q", tc.id, got, tc.want)
		}
	}
}

// run_as starts a stdio server as another user (when parley may switch
// users: as root).
func TestStdioServerRunsAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root; run the test as root to cover run_as")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy the other user can run.
	dir, err := os.MkdirTemp("", "parley-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	copyExe := filepath.Join(dir, "server")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyExe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := hostileServer(t, "other")
	c.Command, c.RunAs = copyExe, "65534:65534"
	_, reg, _ := hostileManager(t, c)
	if res := call(t, reg, "other__uid", `{}`); res.IsError || res.Content != "65534:65534" {
		t.Fatalf("the server ran as %+v", res)
	}
}

// A JSON-RPC error is the call's failure, not the server's: the same
// process answers the next call at once.
func TestJSONRPCErrorLeavesTheServerUp(t *testing.T) {
	m, reg, _ := hostileManager(t, hostileServer(t, "h"))
	pid := call(t, reg, "h__pid", `{}`)
	if res := call(t, reg, "h__leak", `{}`); !res.IsError || !strings.Contains(res.Content, "the backend refused") {
		t.Fatalf("leak: %+v", res)
	}
	if st := m.Statuses()[0]; st.State != StateReady {
		t.Fatalf("after a JSON-RPC error the server is %+v", st)
	}
	if again := call(t, reg, "h__pid", `{}`); again.IsError || again.Content != pid.Content {
		t.Fatalf("the next call: %+v (was %+v)", again, pid)
	}
}

// A server in backoff keeps its tools in the turn, and a call says it is
// down and when it is tried again, instead of "unknown tool".
func TestServerInBackoffKeepsItsTools(t *testing.T) {
	c := hostileServer(t, "h")
	c.Env = append(c.Env, hostiletest.EnvDieFile+"="+filepath.Join(t.TempDir(), "die"))
	m, reg, _ := hostileManager(t, c)
	if res := call(t, reg, "h__exit", `{}`); !res.IsError {
		t.Fatalf("exit: %+v", res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Statuses()[0].State != StateDown && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for turn := range 3 { // the first tries to start it and fails; the others find it in backoff
		names := m.Expand(context.Background(), []string{"mcp:h"})
		if !slices.Contains(names, "h__echo") {
			t.Fatalf("turn %d: the down server's tools are gone: %q", turn, names)
		}
		res := call(t, reg, "h__echo", `{"text":"x"}`)
		if !res.IsError || !strings.Contains(res.Content, "MCP server h is down, trying again in ") {
			t.Fatalf("turn %d: a call while down: %+v", turn, res)
		}
	}
}

// A secret in a JSON-RPC error, in structured content or in an embedded
// resource (JSON-escaped there) never reaches the result, the error or
// the log; nor does a secret in an HTTP server's URL reach its status.
func TestSecretsScrubbedInEveryForm(t *testing.T) {
	bad := config.MCPServer{ID: "web", URL: "http://127.0.0.1:1/mcp?key=url-secret-0123456789", Timeout: config.Duration(time.Second)}
	m, reg, logs := hostileManager(t, hostileServer(t, "h"), bad)
	for _, tool := range []string{"h__leak", "h__leak_result", "h__env"} {
		res := call(t, reg, tool, `{}`)
		errText := ""
		if res.Err != nil {
			errText = res.Err.Error()
		}
		if l := leaked(res.Content+errText, leakValue); len(l) > 0 || !strings.Contains(res.Content, config.Redacted) {
			t.Errorf("%s leaked %q: %+v", tool, l, res)
		}
	}
	var st Status
	for _, s := range m.Statuses() {
		if s.ID == "web" {
			st = s
		}
	}
	if st.State != StateDown || strings.Contains(st.Error, "url-secret") || !strings.Contains(st.Error, "127.0.0.1:1") {
		t.Errorf("the URL server's status: %+v", st)
	}
	if l := leaked(logs.String(), leakValue); len(l) > 0 || strings.Contains(logs.String(), "url-secret") {
		t.Errorf("the log leaked %q:\n%s", l, logs)
	}
}

// Tools named "*" (a permission pattern), "a__b" (the separator) and
// "dot.name" (no model's API takes it) are left out, and logged.
func TestHostileToolNamesAreRefused(t *testing.T) {
	m, reg, logs := hostileManager(t, hostileServer(t, "h"))
	names := m.Expand(context.Background(), []string{"mcp:h"})
	for _, bad := range []string{"h__*", "h__a__b", "h__dot.name"} {
		if slices.Contains(names, bad) {
			t.Errorf("%s offered: %q", bad, names)
		}
		if _, ok := reg.Tool(bad); ok {
			t.Errorf("%s registered", bad)
		}
	}
	if !slices.Contains(names, "h__echo") || !strings.Contains(logs.String(), "left out") {
		t.Fatalf("names %q; log:\n%s", names, logs)
	}
}

func TestToolNameRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"read_file", true}, {"Get-Issue2", true}, {"_x", true},
		{"", false}, {"*", false}, {"a?", false}, {"a__b", false}, {"dot.name", false}, {"sp ace", false},
		{"mcp:x", false}, {"a/b", false}, {"é", false}, {strings.Repeat("a", 60), false}, {strings.Repeat("a", 59), true},
	} {
		if got := toolNameProblem("abc", tc.name) == ""; got != tc.ok {
			t.Errorf("%q: ok %v, want %v (%s)", tc.name, got, tc.ok, toolNameProblem("abc", tc.name))
		}
	}
}

// A flood of notifications/tools/list_changed makes one tools/list at a
// time, not one each, and a call made meanwhile is answered promptly.
func TestToolListFloodIsCoalesced(t *testing.T) {
	_, reg, _ := hostileManager(t, hostileServer(t, "h"))
	if res := call(t, reg, "h__flood", `{"n":10000}`); res.IsError {
		t.Fatalf("flood: %+v", res)
	}
	start := time.Now()
	if res := call(t, reg, "h__echo", `{"text":"hi"}`); res.IsError || time.Since(start) > 5*time.Second {
		t.Fatalf("a call during the flood: %+v after %s", res, time.Since(start))
	}
	// Wait for the reads to settle: the count is the same twice in a row,
	// a refresh spacing apart.
	lists := func() int {
		res := call(t, reg, "h__lists", `{}`)
		var n int
		fmt.Sscan(res.Content, &n)
		return n
	}
	n, deadline := lists(), time.Now().Add(20*time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(3 * refreshSpacing)
		next := lists()
		if next == n {
			break
		}
		n = next
	}
	if n > 5 {
		t.Fatalf("10,000 notifications made %d tools/list requests", n)
	}
}

// A result over max_result_kb is cut, with a note; a message over
// max_message_mb ends the connection, over stdio and over HTTP, instead
// of reaching the model.
func TestHugeResultsAreCapped(t *testing.T) {
	_, reg, _ := hostileManager(t, hostileServer(t, "h"))
	res := call(t, reg, "h__huge", `{"bytes":614400}`)
	if res.IsError || len(res.Content) > 256<<10+200 || !strings.Contains(res.Content, "the tool's result was 614400 bytes; only the first 262144 are shown") {
		t.Fatalf("a 600 KiB result: error %v, %d bytes, ends %q", res.IsError, len(res.Content), res.Content[max(0, len(res.Content)-120):])
	}
	res = call(t, reg, "h__huge", `{"bytes":15728640}`)
	if !res.IsError || len(res.Content) > 4096 {
		t.Fatalf("a 15 MiB result over stdio: error %v, %d bytes", res.IsError, len(res.Content))
	}

	web := hugeHTTPServer(t)
	_, reg, _ = hostileManager(t, config.MCPServer{ID: "web", URL: web, Timeout: config.Duration(20 * time.Second)})
	res = call(t, reg, "web__huge", `{}`)
	if !res.IsError || len(res.Content) > 4096 {
		t.Fatalf("a 20 MiB result over HTTP: error %v, %d bytes", res.IsError, len(res.Content))
	}
}

// hugeHTTPServer is a streamable HTTP MCP server whose one tool answers
// with 20 MiB of JSON.
func hugeHTTPServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		if len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"huge","version":"1"}}}`, req.ID, req.Params.ProtocolVersion)
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"huge","inputSchema":{"type":"object"}}]}}`, req.ID)
		case "tools/call":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for range 20 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			io.WriteString(w, `"}]}}`)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Stopping while a server floods notifications, ignores its input
// closing and ignores SIGTERM takes a bounded time.
func TestCloseWhileAServerFloodsHasADeadline(t *testing.T) {
	m, reg, _ := hostileManager(t, hostileServer(t, "h"))
	if res := call(t, reg, "h__flood_forever", `{}`); res.IsError {
		t.Fatalf("flood_forever: %+v", res)
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		m.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait + 5*time.Second):
		t.Fatal("Close hung while the server flooded")
	}
	if took := time.Since(start); took > 3*stopWait+2*time.Second {
		t.Fatalf("Close took %s", took)
	}
}
