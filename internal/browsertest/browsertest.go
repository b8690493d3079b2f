// Package browsertest drives a headless Chromium over the DevTools protocol
// for tests of parley's web pages: load a page, run script in it, read the
// result.
package browsertest

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Page is one page of a headless Chromium driven over the DevTools
// protocol: enough to load a page, run script in it and read the result.
type Page struct {
	t       *testing.T
	conn    *websocket.Conn
	session string
	next    int
}

// Open starts Debian's chromium and opens url in a page.
func Open(t *testing.T, ctx context.Context, url string) *Page {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
		}
		t.Skip("chromium is not installed (apt-get install chromium); the web chat's browser tests need it")
	}
	// Not t.TempDir: chromium's helpers may still write there as it ends.
	dir, err := os.MkdirTemp("", "parley-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(bctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+dir, "--remote-debugging-port=0", "about:blank")
	// Its helper processes go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("chromium: %v", err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	// Chromium writes the port it chose and the browser's path here.
	var ws string
	deadline := time.Now().Add(60 * time.Second)
	for ws == "" {
		b, _ := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) == 2 {
			ws = "ws://127.0.0.1:" + lines[0] + lines[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("chromium never opened its DevTools port")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, ws, nil)
	if err != nil {
		t.Fatalf("dial chromium: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	p := &Page{t: t, conn: conn}
	var target struct {
		TargetID string `json:"targetId"`
	}
	p.Call("Target.createTarget", map[string]any{"url": url}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	p.Call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	p.session = attached.SessionID
	p.WaitTrue(`location.href !== "about:blank" && document.readyState === "complete"`, 60*time.Second)
	return p
}

// Call sends one command and waits for its answer, skipping events.
func (p *Page) Call(method string, params any, out any) {
	p.t.Helper()
	if msg := p.call(method, params, out); msg != "" {
		p.t.Fatalf("%s: %s", method, msg)
	}
}

// navigated is the protocol's answer to an evaluation the page left
// before it returned: the expression navigated (a click on a link, a form
// submitted, location.href set), or a navigation under way committed.
const navigated = "Inspected target navigated or closed"

// call is Call that returns the protocol's error message instead of
// failing the test on it.
func (p *Page) call(method string, params any, out any) string {
	p.t.Helper()
	p.next++
	id := p.next
	msg := map[string]any{"id": id, "method": method, "params": params}
	if p.session != "" {
		msg["sessionId"] = p.session
	}
	_ = p.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := p.conn.WriteJSON(msg); err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
	for {
		_ = p.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var reply struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := p.conn.ReadJSON(&reply); err != nil {
			p.t.Fatalf("%s: %v", method, err)
		}
		if reply.ID != id {
			continue
		}
		if reply.Error != nil {
			return reply.Error.Message
		}
		if out != nil {
			if err := json.Unmarshal(reply.Result, out); err != nil {
				p.t.Fatalf("%s: %v", method, err)
			}
		}
		return ""
	}
}

// Eval runs expr in the page (awaiting a promise) and decodes its value.
func (p *Page) Eval(expr string, out any) {
	p.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}
	for attempt := 1; ; attempt++ {
		msg := p.call("Runtime.evaluate", params, &res)
		if msg == "" {
			break
		}
		if msg != navigated || attempt == 20 {
			p.t.Fatalf("eval %s: %s", expr, msg)
		}
		if out == nil {
			return // the expression navigated, as it was meant to
		}
		// A read that a navigation cut short: read the page it went to.
		time.Sleep(50 * time.Millisecond)
	}
	if res.ExceptionDetails != nil {
		p.t.Fatalf("eval %s: %s %s", expr, res.ExceptionDetails.Text, res.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(res.Result.Value) > 0 {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			p.t.Fatalf("eval %s: %v", expr, err)
		}
	}
}

// WaitTrue evaluates expr until it is true.
func (p *Page) WaitTrue(expr string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var ok bool
		p.Eval("(() => { try { return Boolean("+expr+") } catch (e) { return false } })()", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var dom string
			p.Eval("document.documentElement.outerHTML", &dom)
			p.t.Fatalf("never true: %s\n%s", expr, dom)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// JSString quotes s as a JavaScript string literal.
func JSString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Screenshot writes the page as it looks now to a PNG file.
func (p *Page) Screenshot(path string) {
	p.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	p.Call("Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	b, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// CallBrowser sends a command to the browser itself rather than the page
// (the Browser domain: downloads, permissions).
func (p *Page) CallBrowser(method string, params any, out any) {
	p.t.Helper()
	session := p.session
	p.session = ""
	defer func() { p.session = session }()
	p.Call(method, params, out)
}

// SetFiles chooses files for the page's <input type=file> that selector
// finds, as a person picking them in the file chooser does: the input's
// change event fires.
func (p *Page) SetFiles(selector string, paths ...string) {
	p.t.Helper()
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	p.Call("DOM.getDocument", map[string]any{"depth": 0}, &doc)
	var found struct {
		NodeID int `json:"nodeId"`
	}
	p.Call("DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}, &found)
	if found.NodeID == 0 {
		p.t.Fatalf("no element %s", selector)
	}
	p.Call("DOM.setFileInputFiles", map[string]any{"nodeId": found.NodeID, "files": paths}, nil)
}

// keys are the keys Press knows: the DevTools protocol's key, code,
// Windows key code and the text a key down types.
var keys = map[string]struct {
	code string
	vk   int
	text string
}{
	"Enter": {"Enter", 13, "\r"}, "Escape": {"Escape", 27, ""}, "ArrowUp": {"ArrowUp", 38, ""},
	"ArrowDown": {"ArrowDown", 40, ""}, "Tab": {"Tab", 9, ""},
}

// Modifier bits of Press, as the protocol numbers them.
const (
	Shift = 8
)

// Press presses and releases a key in the page as a person's keyboard
// does (key, then its default action: Enter types a new line, Tab moves
// the focus), with modifiers (Shift).
func (p *Page) Press(key string, modifiers int) {
	p.t.Helper()
	k, ok := keys[key]
	if !ok {
		p.t.Fatalf("Press: no key %q (have Enter, Escape, ArrowUp, ArrowDown, Tab)", key)
	}
	down := map[string]any{"type": "keyDown", "key": key, "code": k.code, "windowsVirtualKeyCode": k.vk, "modifiers": modifiers}
	if k.text != "" {
		down["text"] = k.text
	}
	p.Call("Input.dispatchKeyEvent", down, nil)
	p.Call("Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": key, "code": k.code, "windowsVirtualKeyCode": k.vk, "modifiers": modifiers}, nil)
}

// Type types text where the focus is, as an input method commits it.
func (p *Page) Type(text string) {
	p.t.Helper()
	p.Call("Input.insertText", map[string]any{"text": text}, nil)
}

// ColorScheme makes the page see the system's colour scheme as "light"
// or "dark" (prefers-color-scheme).
func (p *Page) ColorScheme(scheme string) {
	p.t.Helper()
	p.Call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}}, nil)
}

// Phone makes the page a phone's: 375 by 740 CSS pixels, touch, mobile.
func (p *Page) Phone() {
	p.t.Helper()
	p.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 375, "height": 740, "deviceScaleFactor": 2, "mobile": true}, nil)
}

//go:embed axe/axe.min.js
var axeSource string

// Violation is one rule an accessibility audit found broken, with the
// elements that break it.
type Violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// Audit runs axe-core (axe/axe.min.js, MPL-2.0) over the page as it is
// now, for the WCAG 2.x A and AA rules and best practices, and returns
// what it found broken. DevTools evaluation is not bound by the page's
// Content-Security-Policy, so the audit runs in the page unchanged.
func (p *Page) Audit() []Violation {
	p.t.Helper()
	var loaded bool
	p.Eval("(() => { if (!window.axe) { "+axeSource+"\n } return !!window.axe })()", &loaded)
	if !loaded {
		p.t.Fatal("axe-core did not load in the page")
	}
	var out []Violation
	p.Eval(`axe.run(document, {resultTypes: ["violations"], runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]}})
		.then(r => r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
			nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))})))`, &out)
	return out
}
