package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/internal/browsertest"
	"github.com/parleyd/parley/sessions"
)

// In a real browser, the web chat's Undo takes back the last exchange,
// Retry answers the last message again, and Branch starts a new
// conversation from a picked message; /think and /model work there too,
// and bad input changes nothing. Each is checked in the stored history.
func TestWebChatRetryUndoBranch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken)
	p.WaitTrue(`document.readyState === "complete"`, 60*time.Second)
	say := func(text string) {
		t.Helper()
		p.Eval(`document.getElementById("text").value = `+browsertest.JSString(text)+`; document.querySelector("#send button").click()`, nil)
	}
	const replied = `(t) => [...document.querySelectorAll(".msg.assistant[data-id]")].some(b => b.textContent.includes(t))`
	say("first")
	p.WaitTrue(`(`+replied+`)("first")`, 60*time.Second)
	say("second")
	// Undo is disabled while the run goes on (a person sees it greyed out), so
	// the click waits for the run's end, as a person's would.
	p.WaitTrue(`(`+replied+`)("second") && !document.getElementById("actions").hidden && !running && !document.getElementById("undo").disabled`, 60*time.Second)
	var sid string
	p.Eval(`sessionID`, &sid)
	live := func(id string) string {
		t.Helper()
		msgs, err := d.sessions.Messages(ctx, sessions.ID(id), sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, string(m.Role)+":"+m.Content)
		}
		return strings.Join(out, " | ")
	}
	kept := func(id string) int {
		t.Helper()
		msgs, err := d.sessions.Messages(ctx, sessions.ID(id), sessions.MessagesOptions{Hidden: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}

	p.Eval(`document.getElementById("undo").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.dataset.done && b.textContent.startsWith("Undone"))`, 60*time.Second)
	p.WaitTrue(`![...document.querySelectorAll(".msg.user")].some(b => b.textContent === "second")`, 10*time.Second)
	if got := live(sid); !strings.HasPrefix(got, "user:first | assistant:") || strings.Contains(got, "second") {
		t.Fatalf("live after Undo: %s", got)
	}
	if n := kept(sid); n != 4 {
		t.Fatalf("%d messages kept after Undo, want 4", n)
	}

	p.Eval(`document.getElementById("retry").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.textContent === "Answering it again.")`, 60*time.Second)
	p.WaitTrue(`document.querySelectorAll(".msg.user[data-id]").length === 1 && (`+replied+`)("first") && !running`, 60*time.Second)
	if n := kept(sid); n != 6 {
		t.Fatalf("%d messages kept after Retry, want 6", n)
	}
	if got := live(sid); strings.Count(got, "user:first") != 1 || strings.Count(got, "assistant:") != 1 {
		t.Fatalf("live after Retry: %s", got)
	}

	// Settings, and bad input that changes nothing.
	say("/think high")
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.textContent.startsWith("Thinking set to high"))`, 60*time.Second)
	say("/think loud")
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.textContent.includes("is not a thinking level"))`, 60*time.Second)
	say("/model nope/x")
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.textContent.includes("is not a model this agent allows"))`, 60*time.Second)
	s, err := d.sessions.Session(ctx, sessions.ID(sid))
	if err != nil {
		t.Fatal(err)
	}
	if meta := string(s.Metadata); !strings.Contains(meta, `"reasoning_effort":"high"`) || strings.Contains(meta, `"model"`) {
		t.Fatalf("metadata %s", meta)
	}

	// Branch from the picked message: a new conversation holding it.
	p.Eval(`document.querySelector(".msg.user[data-id]").click(); document.getElementById("branch").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.textContent.startsWith("Branched"))`, 60*time.Second)
	var branched string
	p.Eval(`sessionID`, &branched)
	b, err := d.sessions.Session(ctx, sessions.ID(branched))
	if err != nil || branched == sid || b.ParentID != sessions.ID(sid) {
		t.Fatalf("branch %q: %+v, %v", branched, b, err)
	}
	if got := live(branched); got != "user:first" {
		t.Fatalf("the branch holds %s", got)
	}
	if got := live(sid); strings.Count(got, "user:first") != 1 {
		t.Fatalf("the branched-from session changed: %s", got)
	}
}
