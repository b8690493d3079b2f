package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/internal/browsertest"
	"github.com/parleyd/parley/sessions"
)

// openChat runs a daemon with the API and opens the web chat with the
// token in the link, once the page has checked it.
func openChat(t *testing.T, ctx context.Context, extra string, phone bool) (*Daemon, *browsertest.Page, func()) {
	t.Helper()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+extra, apiOnly)
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken)
	if phone {
		p.Phone()
	}
	p.WaitTrue(`document.getElementById("conn").dataset.state === "ok"`, 60*time.Second)
	return d, p, stop
}

// sayIn types text in the message box and presses Send.
func sayIn(t *testing.T, p *browsertest.Page, text string) {
	t.Helper()
	p.Eval(`document.getElementById("text").value = `+browsertest.JSString(text)+`; document.querySelector("#send button").click()`, nil)
}

// listed is the conversation list as it shows: each one's title.
func listed(t *testing.T, p *browsertest.Page) []string {
	t.Helper()
	var titles []string
	p.Eval(`[...document.querySelectorAll("#convs li[data-id] .open span")].map(s => s.textContent)`, &titles)
	return titles
}

// The sidebar lists the person's conversations, latest first, titled by
// their first messages; opening an earlier one shows its history, and
// coming back shows the other's; the open one survives a reload; rename,
// search, archive and restore act on the server's sessions.
func TestWebChatConversations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	d, p, stop := openChat(t, ctx, "", false)
	defer stop()
	const apples, pears = "apples: how many kinds are there?", "pears, and the best way to ripen them"
	const oneReply = `document.querySelectorAll(".msg.assistant[data-id]").length === 1`
	sayIn(t, p, apples)
	p.WaitTrue(oneReply, 60*time.Second)
	var first, second string
	p.Eval(`sessionID`, &first)
	p.Eval(`document.getElementById("new").click()`, nil)
	p.WaitTrue(`document.querySelectorAll(".msg.user").length === 0 && sessionID === ""`, 10*time.Second)
	sayIn(t, p, pears)
	p.WaitTrue(oneReply+` && sessionID !== "" && sessionID !== `+browsertest.JSString(first), 60*time.Second)
	p.Eval(`sessionID`, &second)
	p.WaitTrue(`document.querySelectorAll("#convs li[data-id]").length === 2`, 30*time.Second)
	if got := listed(t, p); strings.Join(got, "|") != pears+"|"+apples {
		t.Fatalf("the list shows %q; want the two conversations, latest first, titled by their first messages", got)
	}
	// Both are the web chat person's, and New chat archived nothing.
	for _, id := range []string{first, second} {
		s, err := d.sessions.Session(ctx, sessions.ID(id))
		if err != nil || s.Key.UserID != "webchat" || s.Key.Surface != sessions.SurfaceAPI || s.Status != sessions.StatusActive {
			t.Fatalf("session %s: %+v, %v", id, s, err)
		}
	}

	shows := func(id, text string) {
		t.Helper()
		p.WaitTrue(`sessionID === `+browsertest.JSString(id)+` && [...document.querySelectorAll(".msg.user[data-id]")].map(b => b.textContent).join("|") === `+browsertest.JSString(text)+
			` && [...document.querySelectorAll(".msg.assistant[data-id]")].map(b => b.textContent).join("|") === `+browsertest.JSString(text)+
			` && document.querySelector("#convs li[aria-current]").dataset.id === `+browsertest.JSString(id)+
			` && document.getElementById("title").textContent === `+browsertest.JSString(text), 30*time.Second)
	}
	open := func(id string) {
		t.Helper()
		p.Eval(`document.querySelector('#convs li[data-id=`+browsertest.JSString(id)+`] .open').click()`, nil)
	}
	open(first)
	shows(first, apples)
	// Each message shows its time; a reply's model and tokens are in its
	// title, shown on hover.
	var meta struct {
		Times []string `json:"times"`
		Title string   `json:"title"`
		After string   `json:"after"`
	}
	p.Eval(`({times: [...document.querySelectorAll(".msg[data-id]")].map(b => b.dataset.time),
		title: document.querySelector(".msg.assistant[data-id]").title,
		after: getComputedStyle(document.querySelector(".msg.assistant[data-id]"), "::after").content})`, &meta)
	if len(meta.Times) != 2 || meta.Times[0] == "" || !strings.Contains(meta.After, meta.Times[1]) ||
		!strings.HasPrefix(meta.Title, "echo · ") || !strings.Contains(meta.Title, " tokens in, ") || !strings.Contains(meta.Title, " out") {
		t.Fatalf("times %q (shown as %s), the reply's title %q; want a time on each, the model and tokens on the reply", meta.Times, meta.After, meta.Title)
	}
	open(second)
	shows(second, pears)
	open(first)
	shows(first, apples)

	// A reload opens the same conversation, and the list.
	p.Eval(`window.__old = true; location.reload()`, nil)
	p.WaitTrue(`!window.__old && document.querySelectorAll("#convs li[data-id]").length === 2`, 60*time.Second)
	shows(first, apples)

	// Rename from the list: the box takes the new title, Enter keeps it.
	p.Eval(`document.querySelector('#convs li[data-id=`+browsertest.JSString(first)+`] .ren').click()`, nil)
	p.WaitTrue(`document.activeElement.matches("#convs li input")`, 10*time.Second)
	p.Eval(`document.activeElement.select()`, nil)
	p.Type("Apple varieties")
	p.Press("Enter", 0)
	p.WaitTrue(`[...document.querySelectorAll("#convs .open span")].some(s => s.textContent === "Apple varieties") && document.getElementById("title").textContent === "Apple varieties"`, 30*time.Second)
	if s, err := d.sessions.Session(ctx, sessions.ID(first)); err != nil || s.Title != "Apple varieties" {
		t.Fatalf("after the rename the session is titled %q (%v)", s.Title, err)
	}

	// Search keeps the conversations whose title has the words.
	p.Eval(`document.getElementById("search").focus()`, nil)
	p.Type("RIPEN")
	p.WaitTrue(`document.querySelectorAll("#convs li[data-id]").length === 1`, 10*time.Second)
	if got := listed(t, p); len(got) != 1 || got[0] != pears {
		t.Fatalf("searching for ripen lists %q", got)
	}
	p.Eval(`const s = document.getElementById("search"); s.value = ""; s.dispatchEvent(new Event("input"))`, nil)
	p.WaitTrue(`document.querySelectorAll("#convs li[data-id]").length === 2`, 10*time.Second)
	p.Screenshot("/tmp/h42c-conversations.png")

	// Archive the open one: it leaves the list, the page starts anew, and
	// the session is archived, kept.
	p.Eval(`document.querySelector('#convs li[data-id=`+browsertest.JSString(first)+`] .arc').click()`, nil)
	p.WaitTrue(`document.querySelectorAll("#convs li[data-id]").length === 1 && sessionID === "" && document.querySelectorAll(".msg.user").length === 0`, 30*time.Second)
	if s, err := d.sessions.Session(ctx, sessions.ID(first)); err != nil || s.Status != sessions.StatusArchived {
		t.Fatalf("after Archive the session is %+v (%v)", s, err)
	}
	// The archived ones are a click away, and read, not written.
	p.Eval(`document.getElementById("archived").click()`, nil)
	p.WaitTrue(`document.getElementById("archived").getAttribute("aria-pressed") === "true" && document.querySelectorAll("#convs li[data-id]").length === 1 && document.querySelector('#convs li[data-id=`+browsertest.JSString(first)+`]')`, 30*time.Second)
	open(first)
	p.WaitTrue(`sessionID === `+browsertest.JSString(first)+` && document.querySelectorAll(".msg.user[data-id]").length === 1 && document.getElementById("text").disabled`, 30*time.Second)
	// Restore brings it back: off the archived list, active on the
	// server, and, open, taking messages again.
	p.Eval(`document.querySelector('#convs li[data-id=`+browsertest.JSString(first)+`] .arc').click()`, nil)
	p.WaitTrue(`document.querySelectorAll("#convs li[data-id]").length === 0 && !document.getElementById("text").disabled`, 30*time.Second)
	if s, err := d.sessions.Session(ctx, sessions.ID(first)); err != nil || s.Status != sessions.StatusActive {
		t.Fatalf("after Restore the session is %+v (%v)", s, err)
	}
	p.Eval(`document.getElementById("archived").click()`, nil)
	p.WaitTrue(`document.getElementById("archived").getAttribute("aria-pressed") === "false" && document.querySelectorAll("#convs li[data-id]").length === 2 && document.querySelector('#convs li[data-id=`+browsertest.JSString(first)+`] .arc').textContent === "Archive"`, 30*time.Second)
}

// Replies render Markdown as elements: headings (a reply's top heading an
// h2, under the page's h1), nested and numbered
// lists, a table with its alignment, a block quote, and code with a copy
// button that puts the code on the clipboard. The dark theme follows the
// system's.
func TestWebChatMarkdownAndDarkTheme(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	_, p, stop := openChat(t, ctx, "", false)
	defer stop()
	// What the page's policy blocks (a style attribute, say) is an error.
	p.Eval(`window.__blocked = []; document.addEventListener("securitypolicyviolation", e => __blocked.push(e.violatedDirective + " " + e.blockedURI))`, nil)
	md := "## Shopping\n\n- apples\n- pears\n  - green\n  - *red*\n\n3. wash\n4. eat\n\n| fruit | count |\n|:--|--:|\n| apples | 3 |\n| **pears** | 5 |\n\n> keep them cool\n\n```go\nx := 1 // <b>\n```\ndone"
	sayIn(t, p, md)
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-id]").length === 1`, 60*time.Second)
	var got struct {
		H2      string     `json:"h2"`
		Items   []string   `json:"items"`
		Nested  []string   `json:"nested"`
		Ordered []string   `json:"ordered"`
		Start   int        `json:"start"`
		Head    []string   `json:"head"`
		Rows    [][]string `json:"rows"`
		Align   string     `json:"align"`
		Quote   string     `json:"quote"`
		Code    string     `json:"code"`
		Copy    int        `json:"copy"`
		Tail    string     `json:"tail"`
		Bold    int        `json:"bold"`
	}
	p.Eval(`(() => { const b = document.querySelector(".msg.assistant[data-id]"); const all = (s) => [...b.querySelectorAll(s)].map(e => e.textContent); return {
		h2: b.querySelector("h2").textContent,
		items: [...b.querySelectorAll(":scope > ul > li")].map(li => li.firstChild.textContent),
		nested: all("ul ul > li"), ordered: all("ol > li"), start: b.querySelector("ol").start,
		head: all("thead th"), rows: [...b.querySelectorAll("tbody tr")].map(tr => [...tr.cells].map(c => c.textContent)),
		align: b.querySelector("tbody td:nth-child(2)").style.textAlign,
		quote: b.querySelector("blockquote").textContent, code: b.querySelector(".code pre code").textContent,
		copy: b.querySelectorAll(".code button.copy").length, tail: b.lastChild.textContent, bold: b.querySelectorAll("b").length} })()`, &got)
	if got.H2 != "Shopping" || strings.Join(got.Items, "|") != "apples|pears" || strings.Join(got.Nested, "|") != "green|red" ||
		strings.Join(got.Ordered, "|") != "wash|eat" || got.Start != 3 {
		t.Fatalf("heading and lists rendered as %+v", got)
	}
	if strings.Join(got.Head, "|") != "fruit|count" || len(got.Rows) != 2 || strings.Join(got.Rows[0], "|") != "apples|3" ||
		strings.Join(got.Rows[1], "|") != "pears|5" || got.Align != "right" {
		t.Fatalf("the table rendered as %+v", got)
	}
	if got.Quote != "keep them cool" || got.Code != "x := 1 // <b>" || got.Copy != 1 || got.Tail != "done" || got.Bold != 0 {
		t.Fatalf("quote, code and text rendered as %+v", got)
	}
	// Copy puts the code on the clipboard.
	p.CallBrowser("Browser.grantPermissions", map[string]any{"permissions": []string{"clipboardReadWrite", "clipboardSanitizedWrite"}}, nil)
	p.Call("Emulation.setFocusEmulationEnabled", map[string]any{"enabled": true}, nil)
	p.Eval(`document.querySelector(".code button.copy").click()`, nil)
	p.WaitTrue(`document.querySelector(".code button.copy").textContent === "Copied"`, 10*time.Second)
	var clip string
	p.Eval(`navigator.clipboard.readText()`, &clip)
	if clip != "x := 1 // <b>" {
		t.Fatalf("the clipboard holds %q after Copy", clip)
	}
	p.Screenshot("/tmp/h42c-markdown-light.png")

	// The system's dark theme: dark page and bubbles, light text.
	colours := func() (page, text, bubble float64) {
		t.Helper()
		var l []float64
		p.Eval(`(() => { const lum = (c) => { const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map(Number).map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4 });
			return 0.2126 * r + 0.7152 * g + 0.0722 * b };
			const body = getComputedStyle(document.body), reply = getComputedStyle(document.querySelector(".msg.assistant"));
			return [lum(body.backgroundColor), lum(body.color), lum(reply.backgroundColor)] })()`, &l)
		return l[0], l[1], l[2]
	}
	if bg, fg, bubble := colours(); bg < 0.9 || fg > 0.1 || bubble < 0.8 {
		t.Fatalf("the light theme's luminance: page %.2f, text %.2f, reply %.2f", bg, fg, bubble)
	}
	p.ColorScheme("dark")
	p.WaitTrue(`matchMedia("(prefers-color-scheme: dark)").matches`, 10*time.Second)
	if bg, fg, bubble := colours(); bg > 0.05 || fg < 0.6 || bubble > 0.05 {
		t.Fatalf("the dark theme's luminance: page %.2f, text %.2f, reply %.2f", bg, fg, bubble)
	}
	p.Screenshot("/tmp/h42c-markdown-dark.png")
	var blocked []string
	p.Eval(`__blocked`, &blocked)
	if len(blocked) > 0 {
		t.Fatalf("the page's Content-Security-Policy blocked %q", blocked)
	}
}

// On a phone's screen nothing scrolls sideways (a wide table scrolls in
// its own box); the list of conversations opens from the menu button,
// over the chat, and closes when one is chosen.
func TestWebChatOnAPhone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	_, p, stop := openChat(t, ctx, "", true)
	defer stop()
	sayIn(t, p, "a wide one\n\n| "+strings.Repeat("column | ", 14)+"\n|"+strings.Repeat("---|", 14)+"\n| "+strings.Repeat("value | ", 14))
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-id] table").length === 1`, 60*time.Second)
	var first string
	p.Eval(`sessionID`, &first)
	p.Eval(`document.getElementById("menu").click()`, nil)
	p.WaitTrue(`getComputedStyle(document.getElementById("side")).display !== "none" && document.activeElement.id === "search"`, 10*time.Second)
	p.Eval(`document.getElementById("new").click()`, nil)
	p.WaitTrue(`getComputedStyle(document.getElementById("side")).display === "none" && document.getElementById("menu").getAttribute("aria-expanded") === "false"`, 10*time.Second)
	sayIn(t, p, "a second conversation "+strings.Repeat("without-breaks-", 30))
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-id]").length === 1 && sessionID !== `+browsertest.JSString(first), 60*time.Second)
	noSideways := func(when string) {
		t.Helper()
		var w struct{ Scroll, Client int }
		p.Eval(`({Scroll: document.documentElement.scrollWidth, Client: document.documentElement.clientWidth})`, &w)
		if w.Client > 400 || w.Scroll > w.Client {
			t.Fatalf("%s: the page is %d px wide in a %d px screen", when, w.Scroll, w.Client)
		}
	}
	noSideways("the chat")
	p.Screenshot("/tmp/h42c-phone.png")
	p.Eval(`document.getElementById("menu").click()`, nil)
	p.WaitTrue(`document.getElementById("menu").getAttribute("aria-expanded") === "true" && document.querySelectorAll("#convs li[data-id]").length === 2`, 30*time.Second)
	noSideways("the list")
	p.Screenshot("/tmp/h42c-phone-list.png")
	p.Eval(`document.querySelector('#convs li[data-id=`+browsertest.JSString(first)+`] .open').click()`, nil)
	p.WaitTrue(`getComputedStyle(document.getElementById("side")).display === "none" && sessionID === `+browsertest.JSString(first)+
		` && document.querySelectorAll(".msg.assistant[data-id] table").length === 1`, 30*time.Second)
	noSideways("the first conversation again")
}
