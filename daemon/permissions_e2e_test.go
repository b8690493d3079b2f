package daemon

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/llm"
)

// The whole path with a real MCP server: an agent in a Telegram chat calls
// a tool of a stdio MCP server, which asks by default; the question shows
// as buttons, "Always in this chat" runs it and the chat's next call runs
// unasked, while another chat is still asked; a cron job calling the same
// tool is denied, and its receipt says why.
func TestPermissionsEndToEndWithMCP(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, "mcp:\n  servers:\n    - id: lookup\n      command: "+exe+"\n      env: [\""+envMCPServer+"=1\"]\n"+
		"agents:\n  - id: default\n    tools: [\"mcp:lookup\"]\n"+
		"cron:\n  jobs:\n    - id: nightly\n      schedule: \"0 3 * * *\"\n      prompt: \"define gizmo\"\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	define := func(id, text string) {
		d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: id, Name: "lookup__define", Arguments: json.RawMessage(`{"word":"gizmo"}`)}}}).
			Then(llm.Response{Text: text})
	}
	const defined = "gizmo: a small test word"

	define("e1", "Looked it up.")
	tg.InjectText(42, 42, "what is a gizmo?")
	q := questionIn(t, ctx, tg, "42", 0)
	if m := tg.Sent()[0]; !strings.Contains(m.Text, "lookup__define") || !strings.Contains(m.Text, "gizmo") {
		t.Fatalf("the question reads %q", m.Text)
	}
	tg.Press(42, 42, q, dataOf(t, tg.Buttons("42", q), "Always in this chat"))
	replyIn(t, ctx, tg, "42", "Looked it up.")
	if got := toolResults(d, "e1"); len(got) != 1 || got[0] != defined {
		t.Fatalf("the MCP tool's result: %q", got)
	}

	n := tg.SentCount()
	define("e2", "Looked it up again.")
	tg.InjectText(42, 42, "and again?")
	replyIn(t, ctx, tg, "42", "Looked it up again.")
	for _, m := range tg.SentSince(n) {
		if len(tg.Buttons(m.ChatID, m.MessageID)) > 0 {
			t.Fatalf("asked again in the allowed chat: %+v", m)
		}
	}
	if got := toolResults(d, "e2"); len(got) != 1 || got[0] != defined {
		t.Fatalf("the second call's result: %q", got)
	}

	n = tg.SentCount()
	define("e3", "Asked elsewhere.")
	tg.InjectText(43, 43, "what is a gizmo?")
	q43 := questionIn(t, ctx, tg, "43", n)
	tg.Press(43, 43, q43, dataOf(t, tg.Buttons("43", q43), "Allow once"))
	replyIn(t, ctx, tg, "43", "Asked elsewhere.")
	if got := toolResults(d, "e3"); len(got) != 1 || got[0] != defined {
		t.Fatalf("the other chat's result: %q", got)
	}

	n = tg.SentCount()
	define("e4", "Could not look it up.")
	got := waitRun(t, ctx, d, runCronNow(t, ctx, d, "nightly"))
	if results := toolResults(d, "e4"); len(results) != 1 || !strings.HasPrefix(results[0], "error: permission denied: lookup__define") {
		t.Fatalf("the cron run's tool result: %q", results)
	}
	want := `Not run: lookup__define: it needs a person's approval (tools of MCP servers ask by default), ` +
		`and nobody is there to ask in cron job "nightly"; the operator can allow it with cron.jobs[0].allow_tools`
	if got.Status != "ok" || !strings.HasPrefix(got.Result, want) {
		t.Fatalf("the cron receipt: %s %q", got.Status, got.Result)
	}
	if extra := tg.SentSince(n); len(extra) != 0 {
		t.Fatalf("the cron run asked in a chat: %+v", extra)
	}
}
