package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/internal/browsertest"
)

// The dashboard in a browser: the login, every page, a pairing approved
// and a failed send retried through the pages, a refused webhook shown;
// without the login or from another site, nothing.
func TestAdminDashboard(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	addr := freeAddr(t)
	path, _ := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n"+
		"gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    dm_policy: pairing\n"+indentYAML(tg.ConfigYAML(), "    ")+
		"hooks:\n  - id: ci\n    auth: token\n    secret: \""+hookSecret+"\"\n    prompt: \"{{.q}}\"\n"+
		"cron:\n  jobs:\n    - id: nightly\n      schedule: \"0 3 * * *\"\n      prompt: report\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var runErr bytes.Buffer
	go func() {
		done <- run(runCtx, []string{"run", "--config", path}, &bytes.Buffer{}, &syncWriter{w: &runErr})
	}()
	defer func() { stop(); <-done }()
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", runErr.String())
		}
	}
	// Two strangers ask to pair; the second's code can't be delivered
	// (they blocked the bot), so it fails at once.
	tg.InjectText(501, 501, "hello")
	if _, err := tg.WaitSent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tg.Fail("sendMessage", telegramtest.Failure{Code: 403, Description: "Forbidden: bot was blocked by the user"})
	tg.InjectText(502, 502, "hello too")
	// A refused webhook request.
	req, _ := http.NewRequest("POST", base+"/hooks/ci", strings.NewReader(`{"q":"x"}`))
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bad hook token: %v %v", resp, err)
	}
	// An accepted one: its row shows the 202 its sender got, not 0.
	req, _ = http.NewRequest("POST", base+"/hooks/ci", strings.NewReader(`{"q":"the build broke"}`))
	req.Header.Set("Authorization", "Bearer "+hookSecret)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a good hook token: %v %v", resp, err)
	}

	// Without the login: the login page; a cross-site post: refused.
	resp, err := http.Get(base + "/admin/outbox")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the dashboard without a login: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("POST", base+"/admin/outbox/x/retry", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site post: %v %v", resp, err)
	}

	p := browsertest.Open(t, ctx, base+"/admin")
	p.WaitTrue(`document.querySelector("h1") && document.querySelector("h1").textContent === "Log in"`, 30*time.Second)
	p.Eval(`document.querySelector("input[name=token]").value = "wrong"; document.querySelector("form.login").submit()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector(".error") && document.querySelector(".error").textContent.includes("refused")`, 30*time.Second)
	p.Eval(`document.querySelector("input[name=token]").value = `+browsertest.JSString(apiToken)+`; document.querySelector("form.login").submit()`, nil)
	p.WaitTrue(`document.readyState === "complete" && document.querySelector("h1") && document.querySelector("h1").textContent === "Overview"`, 30*time.Second)
	var channels []string
	p.Eval(`[...document.querySelectorAll("tr.channel td:first-child")].map(td => td.textContent)`, &channels)
	if len(channels) == 0 || !strings.Contains(strings.Join(channels, " "), "tg") {
		t.Fatalf("overview channels: %q", channels)
	}
	// PARLEY_TEST_SCREENSHOTS=DIR keeps a picture of each page visited.
	shots := os.Getenv("PARLEY_TEST_SCREENSHOTS")
	visit := func(path, h1 string) {
		t.Helper()
		// The mark goes with the page it is set on: its absence says the
		// browser is on the new page, even when the address is the same
		// (a screenshot taken mid-navigation never answers).
		p.Eval(`window.leftPage = true; location.href = `+browsertest.JSString(path), nil)
		p.WaitTrue(`!window.leftPage && document.readyState === "complete" && location.pathname === `+browsertest.JSString(path)+` && document.querySelector("h1") && document.querySelector("h1").textContent.startsWith(`+browsertest.JSString(h1)+`)`, 30*time.Second)
		if shots != "" {
			p.Screenshot(filepath.Join(shots, strings.ReplaceAll(strings.Trim(path, "/"), "/", "_")+".png"))
		}
	}
	visit("/admin/sessions", "Sessions")
	var sessionLinks int
	p.Eval(`document.querySelectorAll("tr.session a").length`, &sessionLinks)
	visit("/admin/runs", "Runs")
	visit("/admin/cron", "Cron jobs")
	p.WaitTrue(`!!document.querySelector("#job-nightly")`, 5*time.Second)
	visit("/admin/hooks", "Webhooks")
	p.WaitTrue(`[...document.querySelectorAll("tr.refusal")].some(r => r.textContent.includes("ci") && r.textContent.includes("401"))`, 5*time.Second)
	p.WaitTrue(`document.querySelectorAll("tr.delivery").length === 1 && document.querySelector("tr.delivery td.http").textContent === "202"`, 5*time.Second)

	// Approve the first stranger through the page.
	visit("/admin/pairing", "Pairing")
	var codes []string
	p.Eval(`[...document.querySelectorAll("tr.pairing td:first-child")].map(td => td.textContent)`, &codes)
	if len(codes) != 2 {
		t.Fatalf("pairing requests on the page: %q", codes)
	}
	before := len(tg.Sent())
	p.Eval(`document.querySelector("tr.pairing button.approve").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector(".flash") && document.querySelector(".flash").textContent.startsWith("Approved")`, 30*time.Second)
	if err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.SentSince(before) {
			if strings.Contains(m.Text, "approved") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the approval never reached the chat: %v", err)
	}

	// Retry the failed send through the page.
	visit("/admin/outbox", "Outbox")
	p.WaitTrue(`document.querySelectorAll("tr.failed").length === 1 && document.querySelector("tr.failed").textContent.includes("blocked")`, 30*time.Second)
	before = len(tg.Sent())
	p.Eval(`document.querySelector("tr.failed button.retry").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector(".flash") && document.querySelector(".flash").textContent.startsWith("Sending")`, 30*time.Second)
	if err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.SentSince(before) {
			if m.ChatID == "502" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the retried send never reached chat 502: %v", err)
	}
	visit("/admin/outbox", "Outbox")
	p.WaitTrue(`document.querySelectorAll("tr.failed").length === 0`, 30*time.Second)

	// The approved person talks; their session's page shows the messages.
	tg.InjectText(501, 501, "a question after approval")
	if err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.Sent() {
			if m.ChatID == "501" && strings.Contains(m.Text, "a question after approval") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no answer after the approval: %v", err)
	}
	visit("/admin/sessions", "Sessions")
	p.Eval(`location.href = "/admin/sessions?q=501"`, nil)
	p.WaitTrue(`document.readyState === "complete" && location.search === "?q=501" && document.querySelectorAll("tr.session a").length === 1`, 30*time.Second)
	p.Eval(`document.querySelector("tr.session a").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector("#run-state") &&
		[...document.querySelectorAll("tr.message.user")].some(r => r.textContent.includes("a question after approval")) &&
		[...document.querySelectorAll("tr.message.assistant")].some(r => r.textContent.includes("a question after approval"))`, 30*time.Second)
}
