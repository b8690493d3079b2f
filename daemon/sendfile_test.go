package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

const fileAgent = "agents:\n  - id: default\n    tools: [file_write, send_file]\n"

// The agent writes a CSV and sends it with its reply: Telegram gets the
// reply's text, then one sendDocument carrying the file's bytes and its
// caption; the stored reply carries the file as a part.
func TestSendFileReachesTelegramAsADocument(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, fileAgent)
	defer stop()
	csv := "month,revenue\njan,10\nfeb,12\n"
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "file_write",
		Arguments: json.RawMessage(`{"name":"report.csv","content":` + mustQuote(csv) + `}`)}}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "s1", Name: "send_file", Arguments: json.RawMessage(`{"name":"report.csv","caption":"This month's report"}`)}}}).
		Then(llm.Response{Text: "Here is the report."})
	tg.InjectText(42, 42, "send me the report")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	files, err := tg.WaitFiles(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := files[0]
	if f.Method != "sendDocument" || f.ChatID != "42" || f.FileName != "report.csv" || string(f.Data) != csv || f.Caption != "This month's report" {
		t.Fatalf("sent %+v (%q), want report.csv's bytes as a document with its caption", f, f.Data)
	}
	sent := tg.Sent()
	if len(sent) != 1 || !strings.Contains(sent[0].Text, "Here is the report.") || sent[0].MessageID > f.MessageID {
		t.Fatalf("text sent %+v, want the reply once, before the file (message %d)", sent, f.MessageID)
	}
	ss, err := d.sessions.ActiveInChat(ctx, "telegram", "42")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %v %v", ss, err)
	}
	msgs, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reply := msgs[len(msgs)-1]
	var carried bool
	for _, p := range reply.Parts {
		if fd, ok := p.File(); ok && p.Name == "report.csv" && fd.Caption == "This month's report" {
			carried = true
		}
	}
	if reply.Role != sessions.RoleAssistant || !carried {
		t.Fatalf("the stored reply %+v doesn't carry report.csv", reply)
	}
	// Nothing more goes out on later passes.
	if _, err := d.sender.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(tg.Files()); n != 1 {
		t.Fatalf("%d files sent, want 1", n)
	}
}

// An image goes as a photo.
func TestSendFileSendsAnImageAsAPhoto(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, fileAgent)
	defer stop()
	png := tinyPNG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The chat's session, with the chart in its files, as an upload puts it.
	tg.InjectText(43, 43, "hello")
	if _, err := tg.WaitSent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ss, err := d.sessions.ActiveInChat(ctx, "telegram", "43")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %v %v", ss, err)
	}
	if _, err := d.files.Put(ctx, ss[0].ID, "chart.png", "image/png", png); err != nil {
		t.Fatal(err)
	}
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "s1", Name: "send_file", Arguments: json.RawMessage(`{"name":"chart.png"}`)}}}).
		Then(llm.Response{Text: "The chart."})
	tg.InjectText(43, 43, "show me the chart")
	files, err := tg.WaitFiles(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f := files[0]; f.Method != "sendPhoto" || !bytes.Equal(f.Data, png) || f.Caption != "" {
		t.Fatalf("sent %+v, want the chart as a photo", f)
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return pic.Bytes()
}

// A file whose send fails waits in the outbox: after a restart it goes
// out once, read from the file store (the outbox row names it, nothing
// held in memory), in order after the reply's text.
func TestSendFileSurvivesARestart(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	path, _ := writeConfigTB(t, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+
		indentYAML(tg.ConfigYAML(), "    ")+fileAgent)
	for range 50 {
		tg.Fail("sendDocument", telegramtest.Failure{Code: 500, Description: "Internal Server Error"})
	}
	d, _, stop := testDaemonAt(t, path, configuredChannels(t))
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "file_write", Arguments: json.RawMessage(`{"name":"notes.md","content":"# Notes\n"}`)}}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "s1", Name: "send_file", Arguments: json.RawMessage(`{"name":"notes.md"}`)}}}).
		Then(llm.Response{Text: "Your notes."})
	tg.InjectText(44, 44, "my notes please")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tg.WaitFor(ctx, func() bool { return tg.Calls("sendDocument") >= 1 }); err != nil {
		t.Fatal(err)
	}
	stop()
	if n := len(tg.Files()); n != 0 {
		t.Fatalf("%d files sent while the Bot API failed", n)
	}
	tg.ClearFailures()
	d, _, stop = testDaemonAt(t, path, configuredChannels(t))
	defer stop()
	files, err := tg.WaitFiles(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f := files[0]; f.FileName != "notes.md" || string(f.Data) != "# Notes\n" {
		t.Fatalf("sent %+v, want notes.md", f)
	}
	if _, err := d.sender.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	if sent := tg.Sent(); len(sent) != 1 || len(tg.Files()) != 1 || sent[0].MessageID > files[0].MessageID {
		t.Fatalf("sent %+v and %d files, want the reply's text once, then the file once", sent, len(tg.Files()))
	}
}
