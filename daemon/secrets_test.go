package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/vault"
)

const (
	mcpSecret  = "mcp-secret-7f3a9c1e55"
	userSecret = "user-secret-b81d04aa99"
	// A provider key and a webhook secret kept in the store too: every
	// kind of secret a config names.
	providerSecret   = "sk-provider-secret-c4e1a7d2f9b3"
	storedHookSecret = "hook-secret-0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a"
)

// secretsMCPServer is an HTTP MCP server that checks the headers parley
// sends, says who called, and has a tool that sends both secrets back.
func secretsMCPServer(t *testing.T) (url string, seen func() []string) {
	s := mcp.NewServer(&mcp.Implementation{Name: "gh", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "says who is calling"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are octocat"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "leak", Description: "fails, quoting the credentials"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
				Text: "bad credentials: " + req.Extra.Header.Get("Authorization") + " / " + req.Extra.Header.Get("X-User-Token")}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+mcpSecret {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		calls = append(calls, r.Header.Get("X-User-Token"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
}

// A secret used as an MCP header (${secret:NAME}) and a person's own
// token (/connect) reach the MCP server, and never appear in the logs, the
// API's answers, config print, the model's requests, the chat or an error
// message.
func TestSecretsNeverShow(t *testing.T) {
	ctx := context.Background()
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(vault.EnvKey, key.Encode())
	mcpURL, seen := secretsMCPServer(t)
	tg := telegramtest.NewServer()
	defer tg.Close()
	path, _ := writeConfigTB(t, "log:\n  level: debug\ngateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    ")+
		"mcp:\n  servers:\n    - id: gh\n      url: "+mcpURL+"\n      headers: [\"Authorization: Bearer ${secret:mcp_token}\"]\n"+
		"      user_token: {provider: github, header: X-User-Token, format: \"token %s\"}\n"+
		"providers:\n  openai:\n    api_key: ${secret:openai_key}\n"+
		"hooks:\n  - id: ci\n    auth: token\n    secret: ${secret:hook_secret}\n    prompt: \"{{.text}}\"\n"+
		"agents:\n  - id: default\n    model: echo\n    tools: [\"mcp:gh\"]\n    permissions:\n      - tool: \"gh__*\"\n        action: allow\n")

	// The secret is stored before parley starts, as parley secrets set does.
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{"mcp_token": mcpSecret, "openai_key": providerSecret, "hook_secret": storedHookSecret} {
		if _, err := vault.NewStore(db, key).Set(ctx, name, value); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	// The wrong key stops the start, naming both keys, never a value.
	other, _ := vault.GenerateKey()
	t.Setenv(vault.EnvKey, other.Encode())
	cfg2, _ := config.Load(path)
	if _, err := build(ctx, cfg2, slog.New(slog.DiscardHandler), nil); err == nil || !errors.Is(err, vault.ErrWrongKey) ||
		!strings.Contains(err.Error(), "sealed with key "+key.ID()) || !strings.Contains(err.Error(), "is key "+other.ID()) ||
		strings.Contains(err.Error(), mcpSecret) {
		t.Fatalf("start with another key: %v", err)
	}
	t.Setenv(vault.EnvKey, key.Encode())

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, err = config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := build(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.adapters, err = adapters.Build(d.cfg(), adapters.BuildOptions{Log: log, DB: d.db, Vault: d.vault})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httpserve.AppHandler(d.routes(d.APIHandler())))
	defer hs.Close()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		d.Close()
	}()
	wait := func(n int) []telegramtest.SentMessage {
		t.Helper()
		wctx, c := context.WithTimeout(ctx, 60*time.Second)
		defer c()
		sent, err := tg.WaitSent(wctx, n)
		if err != nil {
			t.Fatalf("waiting for %d replies: %v (%+v)", n, err, sent)
		}
		return sent
	}

	// Before connecting, the tool tells the person how.
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c0", Name: "gh__connect_account", Arguments: json.RawMessage(`{}`)}}}).
		Then(llm.Response{Text: "Please connect first."})
	tg.InjectText(42, 42, "who am i on github?")
	wait(1)
	// /connect in the direct chat; the next message is the token.
	tg.InjectText(42, 42, "/connect github")
	if sent := wait(2); !strings.Contains(sent[1].Text, "Send your github token") {
		t.Fatalf("/connect answered %q", sent[1].Text)
	}
	tg.InjectText(42, 42, userSecret)
	if sent := wait(3); !strings.HasPrefix(sent[2].Text, "connected github") {
		t.Fatalf("the token was answered %q", sent[2].Text)
	}
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "gh__whoami", Arguments: json.RawMessage(`{}`)}}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c2", Name: "gh__leak", Arguments: json.RawMessage(`{}`)}}}).
		Then(llm.Response{Text: "You are octocat."})
	tg.InjectText(42, 42, "who am i on github now?")
	if sent := wait(4); !strings.Contains(sent[3].Text, "You are octocat.") {
		t.Fatalf("the turn answered %q", sent[3].Text)
	}
	// The server got the person's token with their calls.
	var withToken bool
	for _, h := range seen() {
		withToken = withToken || h == "token "+userSecret
	}
	if !withToken {
		t.Fatalf("the MCP server never saw the person's token: %q", seen())
	}

	// An API PUT of a token, and a bad one, echo neither.
	put := func(body string) (int, string) {
		req, _ := http.NewRequest("PUT", hs.URL+"/v1/users/telegram/43/connections/github", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var outputs []string
	if code, body := put(`{"token": "` + userSecret + `"}`); code != http.StatusOK || !strings.Contains(body, `"connected":true`) {
		t.Fatalf("PUT: %d %s", code, body)
	} else {
		outputs = append(outputs, body)
	}
	if code, body := put(`{"token": "` + userSecret + ` x", "extra": 1}`); code != http.StatusBadRequest {
		t.Fatalf("bad PUT: %d %s", code, body)
	} else {
		outputs = append(outputs, body)
	}
	if tok, err := d.vault.Token(ctx, vault.User{Surface: "telegram", ID: "43"}, "github"); err != nil || tok != userSecret {
		t.Fatalf("the PUT token: %v", err)
	}

	// Everything the API shows.
	get := func(p string) string {
		req, _ := http.NewRequest("GET", hs.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	list := get("/v1/sessions?limit=100")
	outputs = append(outputs, list, get("/v1/status"))
	var page struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	_ = json.Unmarshal([]byte(list), &page)
	if len(page.Sessions) == 0 {
		t.Fatalf("no sessions listed: %s", list)
	}
	for _, s := range page.Sessions {
		outputs = append(outputs, get("/v1/sessions/"+s.ID), get("/v1/sessions/"+s.ID+"/messages?limit=200"))
	}
	// config print, and every other way of printing the config.
	printed, err := yaml.Marshal(d.cfg())
	if err != nil {
		t.Fatal(err)
	}
	asJSON, _ := json.Marshal(d.cfg())
	outputs = append(outputs, string(printed), string(asJSON), fmt.Sprintf("%+v %#v", d.cfg(), d.cfg().MCP))
	// What the model was sent, the chat got, and the database holds.
	reqs, _ := json.Marshal(d.offline.Requests())
	outputs = append(outputs, string(reqs))
	for _, m := range tg.Sent() {
		outputs = append(outputs, m.Text)
	}
	// Every column of every table, as text (the SQLite file in plain).
	outputs = append(outputs, dumpDatabase(t, d.db))
	// What parley config check says of the config.
	if err := Check(d.cfg()); err != nil {
		outputs = append(outputs, err.Error())
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	done <- nil
	outputs = append(outputs, logs.String())

	all := strings.Join(outputs, "\n")
	for _, secret := range []string{mcpSecret, userSecret, providerSecret, storedHookSecret} {
		if i := strings.Index(all, secret); i >= 0 {
			t.Errorf("%s shows:\n%s", secret, all[max(0, i-300):min(len(all), i+100)])
		}
	}
	// The model saw the tool's result, and the failure with the
	// credentials hidden.
	if !strings.Contains(string(reqs), "you are octocat") || !strings.Contains(string(reqs), "bad credentials: [redacted]") {
		t.Errorf("the model's requests: %s", reqs)
	}
	if !strings.Contains(string(reqs), "connect with /connect github in a direct chat") {
		t.Errorf("before connecting, the model was not told how: %s", reqs)
	}
	if !strings.Contains(string(printed), "Authorization: [redacted]") {
		t.Errorf("config print: %s", printed)
	}
	if !strings.Contains(logs.String(), "user connected a provider") {
		t.Errorf("the logs don't say a person connected:\n%s", logs.String())
	}
}

// dumpDatabase is every column of every table of a SQLite database, as
// text: what reading the file would show.
func dumpDatabase(t *testing.T, db *dbutil.DB) string {
	t.Helper()
	ctx := context.Background()
	tables, err := dbutil.Query(ctx, db.Read(), `SELECT name FROM sqlite_master WHERE type = 'table'`, func(s dbutil.Scanner) (string, error) {
		var n string
		return n, s.Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Reader().QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				fmt.Fprintf(&b, "%s\t", v)
			}
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}
