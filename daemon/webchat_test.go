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
