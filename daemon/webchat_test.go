package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/internal/browsertest"
)

// A real browser loads the web chat from a link carrying a prompt: the
// prompt fills the message box and nothing is sent. Sent through the page's
// own form, the message gets its streamed echo reply.
func TestWebChatInABrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken+"&say=hello%20from%20a%20link")
	var state struct {
		Text    string `json:"text"`
		Bubbles int    `json:"bubbles"`
		URL     string `json:"url"`
	}
	p.Eval(`({text: document.getElementById("text").value, bubbles: document.getElementById("log").children.length, url: location.href})`, &state)
	// send() adds the user's bubble before its first await, so a sent
	// prompt would show here already.
	if state.Text != "hello from a link" || state.Bubbles != 0 {
		t.Fatalf("a link's prompt: box %q, %d bubbles; want it in the box and nothing sent", state.Text, state.Bubbles)
	}
	if strings.Contains(state.URL, apiToken) {
		t.Fatalf("the token stays in the address bar: %s", state.URL)
	}
	// The person sends it.
	p.Eval(`document.querySelector("#send button").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.assistant")].some(b => b.dataset.done && b.textContent.includes("hello from a link"))`, 60*time.Second)
}

// Text from a message, a reply or an error is shown as text: markup in any
// of them makes no element and runs no script.
func TestWebChatShowsMarkupAsText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken)
	p.WaitTrue(`document.readyState === "complete"`, 60*time.Second)
	payloads := []string{
		`<img src=x onerror="window.__xss='img'">`,
		`<script>window.__xss='script'</script>`,
		`"><svg onload="window.__xss='svg'"><iframe src="javascript:parent.__xss='iframe'">`,
	}
	for i, payload := range payloads {
		p.Eval(`document.getElementById("text").value = `+browsertest.JSString(payload)+`; document.querySelector("#send button").click()`, nil)
		p.WaitTrue(fmt.Sprintf(`document.querySelectorAll(".msg.assistant[data-done]").length === %d`, i+1), 60*time.Second)
	}
	// An error's text: a session id holding markup comes back in the 404.
	p.Eval(`sessionID = `+browsertest.JSString(`<img src=x onerror="window.__xss='error'">`)+`; document.getElementById("text").value = "to a missing session"; document.querySelector("#send button").click()`, nil)
	p.WaitTrue(`document.querySelector(".msg.error")`, 60*time.Second)
	var got struct {
		XSS      any      `json:"xss"`
		Elements int      `json:"elements"`
		Users    []string `json:"users"`
		Replies  []string `json:"replies"`
	}
	p.Eval(`({xss: window.__xss === undefined ? null : window.__xss,
		elements: document.querySelectorAll("#log *:not(.msg)").length,
		users: [...document.querySelectorAll(".msg.user")].map(b => b.textContent),
		replies: [...document.querySelectorAll(".msg.assistant")].map(b => b.textContent)})`, &got)
	if got.XSS != nil || got.Elements != 0 {
		t.Fatalf("markup ran or made elements: __xss=%v, %d elements in the log", got.XSS, got.Elements)
	}
	for i, payload := range payloads {
		if got.Users[i] != payload || !strings.Contains(got.Replies[i], payload) {
			t.Fatalf("payload %d shown as %q / %q, want the text itself", i, got.Users[i], got.Replies[i])
		}
	}
}

// A page on another origin of the same site that frames the chat gets an
// empty frame: the chat refuses to be framed.
func TestWebChatRefusesFraming(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	framer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><iframe id="f" src="%s/#say=framed"></iframe>`, url)
	}))
	defer framer.Close()
	p := browsertest.Open(t, ctx, framer.URL)
	p.WaitTrue(`document.readyState === "complete"`, 60*time.Second)
	var tree struct {
		FrameTree struct {
			ChildFrames []struct {
				Frame struct {
					URL            string `json:"url"`
					UnreachableURL string `json:"unreachableUrl"`
				} `json:"frame"`
			} `json:"childFrames"`
		} `json:"frameTree"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.Call("Page.getFrameTree", map[string]any{}, &tree)
		if len(tree.FrameTree.ChildFrames) == 1 && tree.FrameTree.ChildFrames[0].Frame.URL != "about:blank" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("frames: %+v", tree)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f := tree.FrameTree.ChildFrames[0].Frame; strings.HasPrefix(f.URL, url) {
		t.Fatalf("the chat loaded in a frame: %+v", f)
	}
}

// Every response says nosniff and no framing; the page's policy allows its
// own inline script and style by hash, nothing inline besides.
func TestHTTPSecurityHeaders(t *testing.T) {
	_, url, stop := testDaemon(t, "http:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	for _, path := range []string{"/", "/healthz", "/readyz", "/metrics", "/v1/sessions", "/hooks/nope", "/nowhere"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s (%d): headers %v", path, resp.StatusCode, h)
		}
		if path == "/" {
			csp := h.Get("Content-Security-Policy")
			if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'sha256-") {
				t.Errorf("the page's policy: %s", csp)
			}
		}
	}
}

// The web chat as people use it: a reply rendered as Markdown (safely), the
// conversation back after a reload, chat commands typed in the box, the
// new-chat button, a failed run and a refused token shown as errors, and a
// phone's width without sideways scrolling.
func TestWebChatUsable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+
		"agents:\n  - id: default\n    model: echo\n  - id: broken\n    model: openai/gpt-none\n", apiOnly)
	defer stop()
	p := browsertest.Open(t, ctx, url+"/#token="+apiToken)
	say := func(text string) {
		p.Eval(`document.getElementById("text").value = `+browsertest.JSString(text)+`; document.querySelector("#send button").click()`, nil)
	}
	count := func(sel string) int {
		var n int
		p.Eval(`document.querySelectorAll(`+browsertest.JSString(sel)+`).length`, &n)
		return n
	}
	// Markdown: the echo model repeats it, and the page renders it.
	say("**bold** and `x<y` then\n```\nif a < b { <b>not bold</b> }\n```")
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-done]").length === 1`, 60*time.Second)
	var md struct {
		Strong, Code, Pre string
		Bold              int
	}
	p.Eval(`(() => { const b = document.querySelector(".msg.assistant"); return {
		Strong: b.querySelector("strong").textContent, Code: b.querySelector(":not(pre) > code").textContent,
		Pre: b.querySelector("pre code").textContent, Bold: b.querySelectorAll("b").length}; })()`, &md)
	if md.Strong != "bold" || md.Code != "x<y" || md.Pre != "if a < b { <b>not bold</b> }" || md.Bold != 0 {
		t.Fatalf("markdown rendered as %+v", md)
	}
	say("second message")
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-done]").length === 2`, 60*time.Second)

	// A reload brings the conversation back.
	// A marker the reloaded page won't have: the wait can't be met by the
	// page before the reload.
	p.Eval(`window.__beforeReload = true; location.reload()`, nil)
	p.WaitTrue(`!window.__beforeReload && document.readyState === "complete" && document.querySelectorAll(".msg.assistant").length === 2`, 60*time.Second)
	var restored []string
	p.Eval(`[...document.querySelectorAll(".msg")].map(b => b.textContent)`, &restored)
	if len(restored) != 4 || restored[2] != "second message" || restored[3] != "second message" {
		t.Fatalf("after a reload the page shows %q", restored)
	}

	// Commands typed in the box go to the API's routes.
	say("/status")
	p.WaitTrue(`[...document.querySelectorAll(".msg.note[data-done]")].some(b => b.textContent.includes("4 messages"))`, 60*time.Second)
	say("/reset")
	p.WaitTrue(`[...document.querySelectorAll(".msg.note[data-done]")].some(b => b.textContent === "New conversation.")`, 60*time.Second)
	if n := count(".msg.user"); n != 0 {
		t.Fatalf("after /reset the page still shows %d messages", n)
	}
	say("after the reset")
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-done]").length === 1`, 60*time.Second)
	p.Eval(`document.getElementById("new").click()`, nil)
	p.WaitTrue(`document.querySelectorAll(".msg.user").length === 0 && [...document.querySelectorAll(".msg.note")].some(b => b.textContent === "New conversation.")`, 60*time.Second)
	say("/nonsense")
	p.WaitTrue(`[...document.querySelectorAll(".msg.error")].some(b => b.textContent.includes("/help lists them"))`, 60*time.Second)

	// A failed run says so, instead of an empty bubble: a session of the
	// agent whose model has no key.
	var broken struct {
		ID string `json:"id"`
	}
	p.Eval(`fetch("/v1/sessions", {method: "POST", headers: {"Authorization": "Bearer `+apiToken+`", "Content-Type": "application/json"},
		body: JSON.stringify({agent: "broken"})}).then(r => r.json())`, &broken)
	if broken.ID == "" {
		t.Fatal("no session for the broken agent")
	}
	p.Eval(`setSession(`+browsertest.JSString(broken.ID)+`)`, nil)
	say("will this fail")
	p.WaitTrue(`[...document.querySelectorAll(".msg.error")].some(b => b.textContent.startsWith("The reply failed"))`, 60*time.Second)

	// A wrong token says what to do.
	p.Eval(`document.getElementById("token").value = "wrong-token"`, nil)
	say("with a bad token")
	p.WaitTrue(`[...document.querySelectorAll(".msg.error")].some(b => b.textContent.includes("token was refused"))`, 60*time.Second)

	// A phone's screen: nothing scrolls sideways.
	p.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 375, "height": 740, "deviceScaleFactor": 2, "mobile": true}, nil)
	p.Eval(`document.getElementById("token").value = "`+apiToken+`"; forget()`, nil)
	say("a long line " + strings.Repeat("without-breaks-", 40))
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-done]").length >= 1`, 60*time.Second)
	var width struct{ Scroll, Client int }
	p.Eval(`({Scroll: document.documentElement.scrollWidth, Client: document.documentElement.clientWidth})`, &width)
	if width.Scroll > width.Client {
		t.Fatalf("on a phone the page is %d px wide in a %d px screen", width.Scroll, width.Client)
	}
}
