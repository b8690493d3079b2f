package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/mcptools/hostiletest"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/vault"
)

// The hostile server's secrets, kept in the secrets store: one in its
// env (with every character JSON and HTML escape), one in its args, one
// in an HTTP server's URL.
const (
	hostileLeak = `s3<cr>&t"v\al-0a1b2c3d4e`
	hostileArgs = "args-secret-5f6a7b8c9d"
	hostileURL  = "url-secret-0e1f2a3b4c"
)

// The attacker's reproduction, on both engines: a stdio server that
// leaks its env and args in a JSON-RPC error and its env in structured
// content and an embedded resource, beside an HTTP server whose URL
// holds a secret and can't be reached. No form of any secret reaches the
// model, the chat, the database or the log; the server never sees
// parley's secrets key; parley warns of the secret in args.
func TestHostileMCPServerLeaksNothing(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		key, err := vault.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(vault.EnvKey, key.Encode())
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		tg := telegramtest.NewServer()
		defer tg.Close()
		path := writeConfigAt(t, dbURL, "log:\n  level: debug\ngateway:\n  debounce: 0s\n"+
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    ")+
			"mcp:\n  servers:\n    - id: h\n      command: "+exe+"\n      args: [\"--token=${secret:args_key}\"]\n"+
			"      env: [\""+envMCPServer+"=hostile\", \""+hostiletest.EnvLeak+"=${secret:leak_key}\"]\n"+
			"    - id: web\n      url: \"http://127.0.0.1:1/mcp?key=${secret:url_key}\"\n      timeout: 2s\n"+
			"agents:\n  - id: default\n    tools: [\"mcp:h\", \"mcp:web\"]\n    permissions:\n      - tool: \"h__*\"\n        action: allow\n")
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		db, _, err := OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range map[string]string{"leak_key": hostileLeak, "args_key": hostileArgs, "url_key": hostileURL} {
			if _, err := vault.NewStore(db, key).Set(ctx, name, value); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()

		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		d, err := build(ctx, cfg, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.adapters, err = adapters.Build(d.cfg(), adapters.BuildOptions{Log: log, DB: d.db, Vault: d.vault})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(runCtx) }()
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		defer d.Close()
		defer stop()

		d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "h__leak", Arguments: json.RawMessage(`{}`)},
			{ID: "c2", Name: "h__leak_result", Arguments: json.RawMessage(`{}`)},
			{ID: "c3", Name: "h__env", Arguments: json.RawMessage(`{}`)},
		}}).Then(llm.Response{Text: "Checked."})
		tg.InjectText(42, 42, "check the backend")
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		sent, err := tg.WaitSent(wctx, 1)
		if err != nil || !strings.Contains(sent[0].Text, "Checked.") {
			t.Fatalf("the chat got %+v (%v)", sent, err)
		}
		reqs, _ := json.Marshal(d.offline.Requests())
		statuses, _ := json.Marshal(d.mcp.Statuses())
		dump := dumpAnyDatabase(t, d.db)
		stop()
		var chat []string
		for _, m := range tg.Sent() {
			chat = append(chat, m.Text)
		}
		for what, text := range map[string]string{"the model's requests": string(reqs), "the MCP statuses": string(statuses),
			"the database": dump, "the chat": strings.Join(chat, "\n"), "the log": logs.String()} {
			for _, v := range []string{hostileLeak, hostileArgs, hostileURL, key.Encode()} {
				for _, f := range secret.Forms(v) {
					if i := strings.Index(text, f); i >= 0 {
						t.Errorf("%s shows %q:\n%s", what, f, text[max(0, i-200):min(len(text), i+100)])
					}
				}
			}
			if strings.Contains(text, "0a1b2c3d4e") {
				t.Errorf("%s shows part of the env secret", what)
			}
		}
		if strings.Contains(string(reqs), vault.EnvKey) {
			t.Errorf("the stdio server saw %s in its environment", vault.EnvKey)
		}
		if !strings.Contains(string(reqs), "the backend refused [redacted]") || !strings.Contains(dump, config.Redacted) {
			t.Errorf("the model was not given the scrubbed failure: %s", reqs)
		}
		if !strings.Contains(logs.String(), "args hold a secret") || !strings.Contains(logs.String(), "mcp.servers[0].args[0]") {
			t.Errorf("no warning of the secret in args:\n%s", logs.String())
		}
	})
}

// dumpAnyDatabase is every column of every table, as text, on either
// engine.
func dumpAnyDatabase(t *testing.T, db *dbutil.DB) string {
	t.Helper()
	if db.Dialect == dbutil.SQLite {
		return dumpDatabase(t, db)
	}
	ctx := context.Background()
	tables, err := dbutil.Query(ctx, db.Read(), `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`,
		func(s dbutil.Scanner) (string, error) {
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
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%v\t", v)
			}
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

// A daemon stops in bounded time while a stdio server floods it with
// notifications and ignores its input closing and SIGTERM.
func TestDaemonStopsWhileAnMCPServerFloods(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, "mcp:\n  servers:\n    - id: h\n      command: "+exe+"\n      env: [\""+envMCPServer+"=hostile\"]\n"+
		"agents:\n  - id: default\n    tools: [\"mcp:h\"]\n    permissions:\n      - tool: \"h__*\"\n        action: allow\n")
	defer stop()
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "h__flood_forever", Arguments: json.RawMessage(`{}`)}}}).
		Then(llm.Response{Text: "Flooding."})
	tg.InjectText(42, 42, "flood")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if sent, err := tg.WaitSent(ctx, 1); err != nil || !strings.Contains(sent[0].Text, "Flooding.") {
		t.Fatalf("the chat got %+v (%v)", sent, err)
	}
	stopped := make(chan struct{})
	start := time.Now()
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop while the MCP server flooded it")
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("stopping took %s", took)
	}
}
