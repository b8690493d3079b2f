package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/internal/browsertest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// In a real browser, a tool that must be asked about shows its question in
// the web chat with Allow once / Always in this chat / Always / Deny, and
// the run's state says it waits for the answer, also after a reload.
// "Always in this chat" runs
// the tool and Retry's call of it runs unasked; a branch is another chat,
// asked again, and Deny there keeps the tool from running; Undo takes back
// an exchange; a retried model call shows in the state line. Each step is
// checked in the stored history and in what the model was given.
func TestWebChatAnswersAPermissionAsk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+askingAgent, apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken)
	p.WaitTrue(`document.readyState === "complete"`, 60*time.Second)
	say := func(text string) {
		t.Helper()
		p.Eval(`document.getElementById("text").value = `+browsertest.JSString(text)+`; document.querySelector("#send button").click()`, nil)
	}
	const replied = `(t) => [...document.querySelectorAll(".msg.assistant[data-id]")].some(b => b.textContent.includes(t))`
	const openAsk = `document.querySelector(".msg.ask:not([data-done])")`
	press := func(label string) {
		t.Helper()
		var ok bool
		p.Eval(`(() => { const b = [...`+openAsk+`.querySelectorAll("button")].find(b => b.textContent === `+browsertest.JSString(label)+`);
			if (!b) return false; b.click(); return true })()`, &ok)
		if !ok {
			t.Fatalf("the question has no %q button", label)
		}
	}
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

	searchTurn(d, "w1", "searched once")
	say("what are my plans?")
	p.WaitTrue(openAsk+` !== null`, 60*time.Second)
	var q struct {
		Text    string   `json:"text"`
		Buttons []string `json:"buttons"`
		State   string   `json:"state"`
	}
	p.WaitTrue(`document.getElementById("state").textContent.startsWith("waiting for your answer")`, 30*time.Second)
	p.Eval(`({text: `+openAsk+`.firstChild.textContent, buttons: [...`+openAsk+`.querySelectorAll("button")].map(b => b.textContent),
		state: document.getElementById("state").textContent})`, &q)
	if !strings.Contains(q.Text, "memory_search") || !strings.Contains(q.Text, `{"query":"plans"}`) ||
		strings.Join(q.Buttons, "|") != "Allow once|Always in this chat|Always|Deny" {
		t.Fatalf("the question: %+v", q)
	}
	if got := toolResults(d, "w1"); len(got) != 0 {
		t.Fatalf("the tool ran before the answer: %q", got)
	}
	// Reloaded while the question waits, the page follows the run again
	// and shows the question.
	p.Eval(`window.__old = true; location.reload()`, nil)
	p.WaitTrue(`!window.__old && document.readyState === "complete" && `+openAsk+` !== null`, 60*time.Second)
	press("Always in this chat")
	p.WaitTrue(`(`+replied+`)("searched once")`, 60*time.Second)
	if got := toolResults(d, "w1"); len(got) != 1 || strings.HasPrefix(got[0], "error:") {
		t.Fatalf("the tool's result after Always in this chat: %q", got)
	}
	var sid string
	p.Eval(`sessionID`, &sid)

	// Retry: the same question's call now runs unasked in this chat.
	searchTurn(d, "w2", "searched again")
	p.Eval(`document.getElementById("retry").click()`, nil)
	p.WaitTrue(`(`+replied+`)("searched again") && !running`, 60*time.Second)
	var asks int
	p.Eval(`document.querySelectorAll(".msg.ask").length`, &asks)
	if got := toolResults(d, "w2"); len(got) != 1 || strings.HasPrefix(got[0], "error:") || asks != 0 {
		t.Fatalf("Retry in the allowed chat: result %q, %d questions shown", got, asks)
	}
	if got := live(sid); strings.Count(got, "user:what are my plans?") != 1 || !strings.HasSuffix(got, "assistant:searched again") {
		t.Fatalf("live after Retry: %s", got)
	}

	// Undo takes back a later exchange.
	say("second")
	// Undo waits for the run to end (the page reads the stored
	// conversation after the reply), as its disabled button shows.
	p.WaitTrue(`(`+replied+`)("second") && !running && !document.getElementById("undo").disabled`, 60*time.Second)
	p.Eval(`document.getElementById("undo").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.dataset.done && b.textContent.startsWith("Undone"))`, 60*time.Second)
	if got := live(sid); strings.Contains(got, "second") || !strings.HasSuffix(got, "assistant:searched again") {
		t.Fatalf("live after Undo: %s", got)
	}

	// Branch from the first message: another chat, asked again; Deny.
	p.Eval(`document.querySelector(".msg.user[data-id]").click(); document.getElementById("branch").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.note")].some(b => b.textContent.startsWith("Branched"))`, 60*time.Second)
	var branched string
	p.Eval(`sessionID`, &branched)
	if branched == sid || live(branched) != "user:what are my plans?" {
		t.Fatalf("branch %q holds %s", branched, live(branched))
	}
	searchTurn(d, "w3", "answered without it")
	say("and now?")
	p.WaitTrue(openAsk+` !== null`, 60*time.Second)
	press("Deny")
	p.WaitTrue(`(`+replied+`)("answered without it")`, 60*time.Second)
	if got := toolResults(d, "w3"); len(got) != 1 || !strings.HasPrefix(got[0], "error: permission denied: memory_search") {
		t.Fatalf("the tool's result after Deny: %q", got)
	}
	if got := live(sid); strings.Contains(got, "and now?") {
		t.Fatalf("the branch's message reached the session it came from: %s", got)
	}

	// A provider that asks to wait: the state line says the run retries.
	d.offline.ThenError(&llm.StatusError{Provider: "echo", StatusCode: 503, RetryAfter: 2 * time.Second, Message: "overloaded"})
	say("still there?")
	p.WaitTrue(`document.getElementById("state").textContent.startsWith("retrying (attempt 1)")`, 30*time.Second)
	p.WaitTrue(`(`+replied+`)("still there?")`, 60*time.Second)
}
