package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/internal/browsertest"
	"github.com/parleyd/parley/sessions"
)

// The web chat with the keyboard alone: Shift+Enter starts a new line and
// Enter sends; Up in the empty box puts the last message back, Esc leaves
// it, and sent again it takes the last exchange's place; Esc stops a
// running turn.
func TestWebChatKeyboard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	d, p, stop := openChat(t, ctx, askingAgent, false)
	defer stop()
	live := func() string {
		t.Helper()
		var sid string
		p.Eval(`sessionID`, &sid)
		msgs, err := d.sessions.Messages(ctx, sessions.ID(sid), sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, string(m.Role)+":"+m.Content)
		}
		return strings.Join(out, " | ")
	}
	p.Eval(`document.getElementById("text").focus()`, nil)
	p.Type("line one")
	p.Press("Enter", browsertest.Shift)
	p.Type("line two")
	var box string
	p.Eval(`document.getElementById("text").value`, &box)
	if box != "line one\nline two" {
		t.Fatalf("after Shift+Enter the box holds %q", box)
	}
	p.Press("Enter", 0)
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-id]").length === 1 && !running && document.getElementById("text").value === ""`, 60*time.Second)
	if got := live(); got != "user:line one\nline two | assistant:line one\nline two" {
		t.Fatalf("after Enter the conversation is %q", got)
	}

	// Up recalls the last message; Esc leaves it.
	p.Press("ArrowUp", 0)
	p.WaitTrue(`document.getElementById("text").value === "line one\nline two" && document.getElementById("hint").textContent.startsWith("Editing")`, 10*time.Second)
	p.Press("Escape", 0)
	p.WaitTrue(`document.getElementById("text").value === "" && document.getElementById("hint").textContent === ""`, 10*time.Second)
	// Edited and sent, it replaces the last exchange (kept in the history).
	p.Press("ArrowUp", 0)
	p.WaitTrue(`document.getElementById("text").value === "line one\nline two"`, 10*time.Second)
	p.Eval(`document.getElementById("text").select()`, nil)
	p.Type("line one, edited")
	p.Press("Enter", 0)
	p.WaitTrue(`[...document.querySelectorAll(".msg.assistant[data-id]")].map(b => b.textContent).join("|") === "line one, edited" && !running`, 60*time.Second)
	if got := live(); got != "user:line one, edited | assistant:line one, edited" {
		t.Fatalf("after editing the last message the conversation is %q", got)
	}

	// Esc stops a turn that waits (here on a tool's permission question).
	searchTurn(d, "k1", "never said")
	p.Type("what are my plans?")
	p.Press("Enter", 0)
	p.WaitTrue(`document.querySelector(".msg.ask:not([data-done])") && running`, 60*time.Second)
	p.Press("Escape", 0)
	p.WaitTrue(`[...document.querySelectorAll(".msg.note[data-done]")].some(b => b.textContent === "Stopped.") && !running`, 30*time.Second)
	p.WaitTrue(`(q => !q || q.dataset.done)(document.querySelector(".msg.ask"))`, 30*time.Second)
	if st := d.bridge.APIRunner().Status(sessions.ID(sessionOf(t, p))).State; st != "idle" && st != "error" {
		t.Fatalf("after Esc the session is %q", st)
	}
	if got := live(); strings.Contains(got, "never said") {
		t.Fatalf("the stopped turn went on: %s", got)
	}
}

func sessionOf(t *testing.T, p *browsertest.Page) string {
	t.Helper()
	var sid string
	p.Eval(`sessionID`, &sid)
	return sid
}

// The token is asked once: a refused one says so and how to get one, a
// good one is kept and the box goes away, also after a reload; the
// connection line says "server unreachable" when parley stops answering.
// The page's first paint is logged.
func TestWebChatConnectionState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/")
	var paint []struct {
		Name  string  `json:"name"`
		Start float64 `json:"start"`
	}
	p.WaitTrue(`performance.getEntriesByType("paint").length >= 2`, 30*time.Second)
	p.Eval(`performance.getEntriesByType("paint").map(e => ({name: e.name, start: e.startTime}))`, &paint)
	var nav struct{ Response, Loaded, Size float64 }
	p.Eval(`(() => { const n = performance.getEntriesByType("navigation")[0]; return {Response: n.responseEnd, Loaded: n.domContentLoadedEventEnd, Size: n.encodedBodySize} })()`, &nav)
	var figures []string
	for _, e := range paint {
		figures = append(figures, fmt.Sprintf("%s %.0f ms", e.Name, e.Start))
	}
	t.Logf("the web chat in headless Chromium: %s; response end %.0f ms, DOM content loaded %.0f ms, %.0f bytes on the wire",
		strings.Join(figures, ", "), nav.Response, nav.Loaded, nav.Size)

	connIs := func(state, text string) {
		t.Helper()
		p.WaitTrue(`document.getElementById("conn").dataset.state === `+browsertest.JSString(state)+` && document.getElementById("conn").textContent === `+browsertest.JSString(text), 30*time.Second)
	}
	connIs("none", "no token yet")
	p.WaitTrue(`!document.getElementById("auth").hidden && document.activeElement.id === "token"`, 10*time.Second)
	p.Type("not-the-token")
	p.Press("Enter", 0)
	connIs("refused", "token refused")
	var msg string
	p.Eval(`document.getElementById("auth").hidden ? "" : document.getElementById("auth-msg").textContent`, &msg)
	if !strings.Contains(msg, "http.tokens") || !strings.Contains(msg, "parley init") {
		t.Fatalf("a refused token says %q; want where a token comes from", msg)
	}
	p.Screenshot("/tmp/h42c-token-refused.png")
	p.Eval(`document.getElementById("token").select()`, nil)
	p.Type(apiToken)
	p.Press("Enter", 0)
	connIs("ok", "connected")
	var kept struct {
		Hidden bool   `json:"hidden"`
		Stored string `json:"stored"`
	}
	p.Eval(`({hidden: document.getElementById("auth").hidden, stored: localStorage.getItem("parley.token")})`, &kept)
	if !kept.Hidden || kept.Stored != apiToken {
		t.Fatalf("after a good token: box hidden %v, kept %v", kept.Hidden, kept.Stored == apiToken)
	}
	p.Eval(`window.__old = true; location.reload()`, nil)
	p.WaitTrue(`!window.__old && document.readyState === "complete"`, 30*time.Second)
	connIs("ok", "connected")
	p.Eval(`document.getElementById("auth").hidden`, &kept.Hidden)
	if !kept.Hidden {
		t.Fatal("after a reload the token is asked again")
	}

	stop()
	p.Eval(`window.dispatchEvent(new Event("online"))`, nil)
	connIs("unreachable", "server unreachable")
}
