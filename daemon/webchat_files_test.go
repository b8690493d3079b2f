package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/internal/browsertest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// In a real browser, the web chat's Attach button opens the file chooser;
// a chosen file is uploaded to the session's file store through the API
// and shown in the conversation, and the next message names it for the
// agent. The reply's files (send_file) show as links that download their
// bytes with the token in a header (never in a URL), an image as a
// thumbnail (the page's CSP allows blob: images), also after a reload;
// Files lists them all.
func TestWebChatUploadsAndShowsFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+fileAgent, apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken)
	p.WaitTrue(`document.readyState === "complete"`, 60*time.Second)

	// The button opens the chooser of the page's file input.
	var chooser bool
	p.Eval(`(() => { const f = document.getElementById("file"); let opened = false; f.click = () => { opened = true };
		document.getElementById("attach").click(); delete f.click; return opened })()`, &chooser)
	if !chooser {
		t.Fatal("the Attach button doesn't open the file chooser")
	}
	dir := t.TempDir()
	notes := "item,qty\napples,3\npears,5\n"
	notesPath := filepath.Join(dir, "notes.csv")
	if err := os.WriteFile(notesPath, []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	p.SetFiles("#file", notesPath)
	p.WaitTrue(`document.querySelector('.msg.upload[data-done] a[data-name="notes.csv"]')`, 60*time.Second)
	var sid string
	p.Eval(`sessionID`, &sid)
	kept, err := d.files.Get(ctx, sessions.ID(sid), "notes.csv")
	if err != nil || string(kept.Data) != notes || kept.MediaType != "text/csv" {
		t.Fatalf("the store has %+v (%q), %v; want notes.csv's bytes", kept, kept.Data, err)
	}

	// The reply sends a summary and a chart back.
	png := tinyPNG(t)
	if _, err := d.files.Put(ctx, sessions.ID(sid), "chart.png", "image/png", png); err != nil {
		t.Fatal(err)
	}
	summary := "8 pieces of fruit\n"
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "file_write",
		Arguments: json.RawMessage(`{"name":"summary.txt","content":` + mustQuote(summary) + `}`)}}}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "s1", Name: "send_file", Arguments: json.RawMessage(`{"name":"summary.txt","caption":"The totals"}`)},
			{ID: "s2", Name: "send_file", Arguments: json.RawMessage(`{"name":"chart.png"}`)}}}).
		Then(llm.Response{Text: "Here you are."})
	p.Eval(`document.getElementById("text").value = "sum these up"; document.querySelector("#send button").click()`, nil)
	// While it runs, the stream's file events show the files; then the
	// stored reply does, with its id.
	const replyFile = `document.querySelector('.msg.assistant[data-id] a[data-name="summary.txt"]')`
	p.WaitTrue(replyFile, 60*time.Second)
	msgs, err := d.sessions.Messages(ctx, sessions.ID(sid), sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var asked string
	for _, m := range msgs {
		if m.Role == sessions.RoleUser {
			asked = m.Content
		}
	}
	if asked != "sum these up\n\n[File uploaded to this conversation's files: notes.csv, text/csv, 26 B]" {
		t.Fatalf("the message the agent got: %q; want it to name the upload", asked)
	}

	check := func(when string) {
		t.Helper()
		var shown struct {
			User     string   `json:"user"`
			UserFile string   `json:"userFile"`
			Files    []string `json:"files"`
			Thumb    int      `json:"thumb"`
			Token    bool     `json:"token"`
		}
		p.WaitTrue(`(() => { const i = document.querySelector('.msg.assistant[data-id] .file img'); return i && i.complete && i.naturalWidth > 0 })()`, 30*time.Second)
		p.Eval(`(() => { const u = [...document.querySelectorAll(".msg.user[data-id]")].pop();
			const a = document.querySelector(".msg.assistant[data-id]");
			return {user: u.firstChild.nodeValue, userFile: u.querySelector(".file").textContent,
				files: [...a.querySelectorAll(".file")].map(f => f.textContent),
				thumb: a.querySelector(".file img").naturalWidth,
				token: [...document.querySelectorAll("[href],[src]")].some(e => (e.href || e.src || "").includes(`+browsertest.JSString(apiToken)+`))} })()`, &shown)
		if shown.User != "sum these up" || shown.UserFile != "notes.csv (text/csv, 26 B)" {
			t.Fatalf("%s: the message shows %q and %q; want its text and the upload's link", when, shown.User, shown.UserFile)
		}
		// The order of files sent by one step's parallel calls is not the point here.
		slices.Sort(shown.Files)
		if strings.Join(shown.Files, "|") != "chart.png (image/png, "+sessions.ByteSize(int64(len(png)))+")|summary.txt (text/plain, 18 B): The totals" ||
			shown.Thumb != 4 {
			t.Fatalf("%s: the reply shows files %q, a %d px thumbnail; want both files, the chart 4 px wide", when, shown.Files, shown.Thumb)
		}
		if shown.Token {
			t.Fatalf("%s: the token is in a link or an image's URL", when)
		}
	}
	check("after the reply")

	// The link downloads the file's bytes.
	downloads := t.TempDir()
	p.CallBrowser("Browser.setDownloadBehavior", map[string]any{"behavior": "allow", "downloadPath": downloads}, nil)
	p.Eval(replyFile+`.click()`, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(downloads, "summary.txt"))
		if err == nil && bytes.Equal(got, []byte(summary)) {
			break
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(downloads)
			t.Fatalf("downloaded %q (%v), files %v; want summary.txt's bytes", got, err, entries)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// After a reload the conversation shows the same files.
	p.Eval(`window.__old = true; location.reload()`, nil)
	p.WaitTrue(`!window.__old && document.readyState === "complete" && `+replyFile, 60*time.Second)
	check("after a reload")

	// Files lists every file of the conversation, the chart with its
	// thumbnail.
	p.Eval(`document.getElementById("files").click()`, nil)
	p.WaitTrue(`(() => { const i = document.querySelector("#filelist .file img"); return i && i.complete && i.naturalWidth === 4 })()`, 30*time.Second)
	var listed []string
	p.Eval(`[...document.querySelectorAll("#filelist .file a")].map(a => a.dataset.name).sort()`, &listed)
	if strings.Join(listed, "|") != "chart.png|notes.csv|summary.txt" {
		t.Fatalf("Files lists %q; want the conversation's three files", listed)
	}
	p.Eval(`document.getElementById("files").click()`, nil)
	p.WaitTrue(`document.getElementById("filelist").hidden && document.getElementById("files").getAttribute("aria-expanded") === "false"`, 10*time.Second)
}
