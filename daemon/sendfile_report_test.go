package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/llm"
)

const reportCSV = "day,orders\nmon,12\ntue,9\n"

// scriptReport makes the model write report.csv, send it, and say so.
func scriptReport(d *Daemon) {
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "file_write",
		Arguments: json.RawMessage(`{"name":"report.csv","content":` + mustQuote(reportCSV) + `}`)}}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "s1", Name: "send_file", Arguments: json.RawMessage(`{"name":"report.csv","caption":"Weekly orders"}`)}}}).
		Then(llm.Response{Text: "The weekly report is attached."})
}

// A cron job that writes a CSV and sends it: its note to a Telegram chat
// carries the file, and the Bot API gets exactly one sendDocument with
// the file's bytes, after the note's text.
func TestCronReportCarriesItsCSV(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := testDaemon(t, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg-main\n    type: telegram\n"+indentYAML(tg.ConfigYAML(), "    ")+
		"cron:\n  jobs:\n    - id: weekly\n      schedule: \"0 9 * * 1\"\n      prompt: \"write the weekly report\"\n"+
		"      notify: [\"tg-main:42\"]\n      allow_tools: [file_write, send_file]\n"+fileAgent,
		func(d *Daemon) map[adapters.ID]adapters.Adapter {
			channels := configuredChannels(t)(d)
			channels["cron"] = d.cron
			return channels
		})
	defer stop()
	scriptReport(d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := d.cron.RunNow(ctx, "weekly"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("RunNow: %v", err)
		}
	}
	files, err := tg.WaitFiles(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f := files[0]; f.Method != "sendDocument" || f.ChatID != "42" || f.FileName != "report.csv" || string(f.Data) != reportCSV || f.Caption != "Weekly orders" {
		t.Fatalf("sent %+v (%q), want report.csv's bytes", f, f.Data)
	}
	if _, err := d.sender.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	sent := tg.Sent()
	if n := tg.Calls("sendDocument"); n != 1 || len(tg.Files()) != 1 {
		t.Fatalf("%d sendDocument calls, want exactly 1", n)
	}
	if len(sent) != 1 || !strings.Contains(sent[0].Text, "The weekly report is attached.") || sent[0].MessageID > files[0].MessageID {
		t.Fatalf("text sent %+v, want the note once, before its file", sent)
	}
}

// The same over the API: the run's stream has a file event naming the
// CSV, its URL downloads the bytes, and the reply callback lists it.
func TestAPIReplyCarriesItsFile(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var mu sync.Mutex
		var callbacks []json.RawMessage
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			callbacks = append(callbacks, body)
			mu.Unlock()
		}))
		defer hook.Close()
		d, url, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+
			"\"]\n  callback_secret: \"0123456789abcdef0123456789abcdef-callbacks\"\n  callback_allow: [\"127.0.0.1\"]\n"+fileAgent, apiOnly)
		defer stop()
		scriptReport(d)
		c := &client.Client{Base: url, Token: apiToken}
		var sess struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "report", "webhook_url": hook.URL}, &sess); err != nil {
			t.Fatal(err)
		}
		var run struct {
			RunID string `json:"run_id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/messages", map[string]any{"content": "the weekly report, please"}, &run); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Request(ctx, "GET", "/v1/sessions/"+sess.ID+"/events?run_id="+run.RunID, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		type fileEvent struct {
			MessageID string `json:"message_id"`
			Name      string `json:"name"`
			MediaType string `json:"media_type"`
			Size      int64  `json:"size"`
			Caption   string `json:"caption"`
			URL       string `json:"url"`
		}
		var got []fileEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "file" {
				var f fileEvent
				if err := json.Unmarshal(ev.Data, &f); err != nil {
					t.Fatal(err)
				}
				got = append(got, f)
			}
			if ev.Type == "turn.finished" {
				break
			}
		}
		want := fileEvent{Name: "report.csv", MediaType: "text/csv", Size: int64(len(reportCSV)), Caption: "Weekly orders",
			URL: "/v1/sessions/" + sess.ID + "/files/report.csv"}
		if len(got) != 1 || got[0].MessageID == "" {
			t.Fatalf("file events %+v, want one for report.csv", got)
		}
		if mid := got[0].MessageID; got[0] != (fileEvent{MessageID: mid, Name: want.Name, MediaType: want.MediaType, Size: want.Size, Caption: want.Caption, URL: want.URL}) {
			t.Fatalf("file event %+v, want %+v", got[0], want)
		}
		dl, err := c.Request(ctx, "GET", got[0].URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(dl.Body)
		dl.Body.Close()
		if string(body) != reportCSV {
			t.Fatalf("download %q, want the CSV", body)
		}
		var payload struct {
			MessageID string      `json:"message_id"`
			Files     []fileEvent `json:"files"`
		}
		waitUntil(t, 20*time.Second, "the reply's callback", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(callbacks) > 0
		})
		mu.Lock()
		defer mu.Unlock()
		if err := json.Unmarshal(callbacks[0], &payload); err != nil {
			t.Fatal(err)
		}
		if len(callbacks) != 1 || len(payload.Files) != 1 || payload.Files[0] != got[0] || payload.MessageID != got[0].MessageID {
			t.Fatalf("callbacks %s, want one listing report.csv as the stream did", callbacks)
		}
	})
}
