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
	"github.com/parleyd/parley/llm/llmtest"
)

// startDashboard runs `parley run` on config yaml and waits until it is
// ready; it returns the daemon's base URL.
func startDashboard(t *testing.T, ctx context.Context, addr, yaml string) string {
	t.Helper()
	path, _ := writeConfig(t, yaml)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var runErr bytes.Buffer
	go func() {
		done <- run(runCtx, []string{"run", "--config", path}, &bytes.Buffer{}, &syncWriter{w: &runErr})
	}()
	t.Cleanup(func() { stop(); <-done })
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", runErr.String())
		}
	}
}

// dashboardPage logs a browser in to the dashboard at base, the window
// a desktop's size.
func dashboardPage(t *testing.T, ctx context.Context, base string) *browsertest.Page {
	t.Helper()
	p := browsertest.Open(t, ctx, base+"/admin")
	p.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1600, "deviceScaleFactor": 1, "mobile": false}, nil)
	p.WaitTrue(`document.querySelector("h1") && document.querySelector("h1").textContent === "Log in"`, 30*time.Second)
	p.Eval(`document.querySelector("input[name=token]").value = `+browsertest.JSString(apiToken)+`; document.querySelector("form.login").submit()`, nil)
	p.WaitTrue(`document.readyState === "complete" && document.querySelector("h1") && document.querySelector("h1").textContent === "Overview"`, 30*time.Second)
	return p
}

// visitPage opens path in p and waits for its heading; with
// PARLEY_TEST_SCREENSHOTS=DIR it keeps a picture of it as DIR/shot.png.
func visitPage(t *testing.T, p *browsertest.Page, path, h1, shot string) {
	t.Helper()
	// The mark goes with the page it is set on: its absence says the
	// browser is on the new page, even when the address is the same.
	p.Eval(`window.leftPage = true; location.href = `+browsertest.JSString(path), nil)
	u := strings.SplitN(path, "?", 2)
	p.WaitTrue(`!window.leftPage && document.readyState === "complete" && location.pathname === `+browsertest.JSString(u[0])+
		` && document.querySelector("h1") && document.querySelector("h1").textContent.startsWith(`+browsertest.JSString(h1)+`)`, 30*time.Second)
	if dir := os.Getenv("PARLEY_TEST_SCREENSHOTS"); dir != "" && shot != "" {
		p.Screenshot(filepath.Join(dir, shot+".png"))
	}
}

// The dashboard an operator opens after a run through the Telegram Bot
// API: the usage charts drawn from it (each with a title a screen reader
// reads), the person approved and then revoked through the people page
// (their next message refused with a new pairing code, and blocked after),
// the agents page with the day's spend, the providers page with the
// calls, and the session page at a phone's width.
func TestAdminDashboardChartsPeopleAgentsProviders(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	model := llmtest.NewOpenAIEcho(t, 0)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := startDashboard(t, ctx, addr, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n    tools: [memory_search]\n"+
		"gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    dm_policy: pairing\n"+indentYAML(tg.ConfigYAML(), "    ")+
		"budgets:\n  prices:\n    - model: openai/gpt-test\n      input: 1000\n      output: 2000\n")

	// A stranger asks to pair.
	tg.InjectText(601, 601, "hello")
	if _, err := tg.WaitSent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p := dashboardPage(t, ctx, base)

	// Approved from the people page, where they wait by name.
	visitPage(t, p, "/admin/people", "People", "")
	p.WaitTrue(`!!document.querySelector("tr.person.pending") && document.querySelector("tr.person.pending td.name").textContent.trim() !== "601"`, 10*time.Second)
	before := len(tg.Sent())
	p.Eval(`document.querySelector("tr.person.pending button.approve").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector(".flash") && document.querySelector(".flash").textContent.startsWith("Approved")`, 30*time.Second)
	if err := tg.WaitFor(ctx, func() bool { return len(tg.SentSince(before)) > 0 }); err != nil {
		t.Fatalf("the approval never reached the chat: %v", err)
	}
	for i, q := range []string{"first question", "second question", "third question"} {
		tg.InjectText(601, 601, q)
		if err := tg.WaitFor(ctx, func() bool {
			for _, m := range tg.Sent() {
				if m.ChatID == "601" && strings.Contains(m.Text, q) {
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatalf("question %d was never answered: %v", i+1, err)
		}
	}

	// A turn that calls a tool, for the session page.
	model.CallTool("look up plans", "memory_search", `{"query":"plans"}`)
	tg.InjectText(601, 601, "look up plans")
	if err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.Sent() {
			if m.ChatID == "601" && strings.HasPrefix(m.Text, "tool said:") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the turn with a tool call was never answered: %v", err)
	}

	// The charts: turns and tokens drawn from the run, each chart an image
	// with a title and a description.
	visitPage(t, p, "/admin/usage?range=24h&by=channel", "Usage", "dashboard-usage")
	var charts []struct {
		ID, Title, Desc string
		Bars, Dots      int
		NoData          bool
	}
	p.Eval(`[...document.querySelectorAll("svg.chart")].map(s => ({
		ID: s.id,
		Title: (document.getElementById(s.getAttribute("aria-labelledby").split(" ")[0]) || {}).textContent || "",
		Desc: (document.getElementById(s.getAttribute("aria-labelledby").split(" ")[1]) || {}).textContent || "",
		Bars: s.querySelectorAll("rect > title").length,
		Dots: s.querySelectorAll("circle").length,
		NoData: !!s.querySelector(".nodata")}))`, &charts)
	got := map[string]int{}
	for _, c := range charts {
		if c.Title == "" || c.Desc == "" {
			t.Errorf("chart %s has no title or description: %+v", c.ID, c)
		}
		got[c.ID] = c.Bars + c.Dots
		if (c.ID == "chart-turns" || c.ID == "chart-tokens" || c.ID == "chart-cost" || c.ID == "chart-latency") && c.NoData {
			t.Errorf("chart %s says no data after the run: %+v", c.ID, c)
		}
	}
	if len(charts) != 6 || got["chart-turns"] < 1 || got["chart-tokens"] < 1 || got["chart-cost"] < 1 || got["chart-latency"] < 2 {
		t.Fatalf("charts: %+v", charts)
	}
	var turns string
	p.Eval(`document.querySelector("#chart-turns desc").textContent`, &turns)
	if !strings.Contains(turns, "telegram: 4 in all") {
		t.Fatalf("the turns chart's description: %q, want the run's four turns on telegram", turns)
	}
	// Per day, by model: the same run.
	visitPage(t, p, "/admin/usage?range=14d&by=model", "Usage", "")
	p.WaitTrue(`document.querySelector("#chart-tokens desc").textContent.includes("openai/gpt-test")`, 10*time.Second)

	// Revoked through the page: their next message is refused and gets a
	// new pairing code.
	visitPage(t, p, "/admin/people", "People", "dashboard-people")
	p.WaitTrue(`!!document.querySelector("tr.person.approved button.revoke")`, 10*time.Second)
	p.Eval(`document.querySelector("tr.person.approved button.revoke").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector(".flash") && document.querySelector(".flash").textContent.startsWith("Revoked") &&
		!document.querySelector("tr.person.approved")`, 30*time.Second)
	before = len(tg.Sent())
	tg.InjectText(601, 601, "after the revoke")
	if err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.SentSince(before) {
			if m.ChatID == "601" && strings.Contains(m.Text, "pairing code") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("a revoked person's message got no pairing code: %v", err)
	}
	for _, m := range tg.SentSince(before) {
		if strings.Contains(m.Text, "after the revoke") {
			t.Fatalf("a revoked person's message was answered: %q", m.Text)
		}
	}
	// Blocked through the page: shown so, with the way back.
	visitPage(t, p, "/admin/people", "People", "")
	p.WaitTrue(`!!document.querySelector("tr.person.pending button.block")`, 10*time.Second)
	p.Eval(`document.querySelector("tr.person.pending button.block").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector(".flash") && document.querySelector(".flash").textContent.startsWith("Blocked") &&
		!!document.querySelector("tr.person.blocked button.unblock")`, 30*time.Second)
	if os.Getenv("PARLEY_TEST_SCREENSHOTS") != "" {
		p.Screenshot(filepath.Join(os.Getenv("PARLEY_TEST_SCREENSHOTS"), "dashboard-people-blocked.png"))
	}

	// Agents: the model, its tools and the day's spend at the table's price.
	visitPage(t, p, "/admin/agents", "Agents", "dashboard-agents")
	var agent struct{ Model, Spend string }
	p.Eval(`(() => { const r = document.querySelector("tr.agent"); return {Model: r.querySelector("td.model").textContent, Spend: r.querySelector("td.spend").textContent} })()`, &agent)
	if !strings.HasPrefix(agent.Model, "openai/gpt-test") || strings.HasPrefix(agent.Spend, "$0.0000") || !strings.Contains(agent.Spend, "model replies") {
		t.Fatalf("agents page: %+v", agent)
	}

	// Providers: the OpenAI-compatible server answered the run, healthy,
	// nothing in flight, its key nowhere on the page.
	visitPage(t, p, "/admin/providers", "Providers", "dashboard-providers")
	var echo struct{ Health, InFlight, Calls string }
	p.Eval(`(() => { const r = document.querySelector("tr#provider-openai"); return r && {Health: r.querySelector("td.health").textContent,
		InFlight: r.querySelector("td.inflight").textContent, Calls: r.children[4].textContent} })()`, &echo)
	if echo.Health != "ok" || !strings.HasPrefix(echo.InFlight, "0") || echo.Calls == "0" || echo.Calls == "" {
		t.Fatalf("providers page, openai: %+v", echo)
	}
	var html string
	p.Eval(`document.documentElement.outerHTML`, &html)
	if strings.Contains(html, "sk-test-fake-key") {
		t.Fatal("the providers page shows the API key")
	}

	// The session, listed by the person's name and found by the id: its
	// tool call and the tool's result folded.
	visitPage(t, p, "/admin/sessions?q=601", "Sessions", "")
	p.WaitTrue(`document.querySelectorAll("tr.session a").length >= 1 && document.querySelector("tr.session a").textContent.startsWith("User (telegram:601)")`, 10*time.Second)
	p.Eval(`document.querySelector("tr.session a").click()`, nil)
	p.WaitTrue(`document.readyState === "complete" && !!document.querySelector("#run-state") && document.querySelectorAll("tr.message.assistant").length >= 4`, 30*time.Second)
	session := `location.pathname`
	p.Eval(session, &session)
	var folded struct {
		Calls, Results, Open int
		Summary              string
	}
	p.Eval(`({Calls: document.querySelectorAll("details.tool").length, Results: document.querySelectorAll("details.tool-result").length,
		Open: document.querySelectorAll("details[open]").length, Summary: (document.querySelector("details.tool summary") || {}).textContent || ""})`, &folded)
	if folded.Calls != 1 || folded.Results != 1 || folded.Open != 0 || !strings.Contains(folded.Summary, "memory_search") {
		t.Fatalf("the tool call and its result, folded: %+v", folded)
	}
	if dir := os.Getenv("PARLEY_TEST_SCREENSHOTS"); dir != "" {
		p.Eval(`document.querySelector("details.tool").open = true`, nil)
		p.Screenshot(filepath.Join(dir, "dashboard-session.png"))
	}

	// At a phone's width: Role and Model whole, not squeezed.
	p.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true}, nil)
	visitPage(t, p, session, "User", "dashboard-session-phone")
	var cells []struct {
		Text          string
		Width, Scroll float64
	}
	p.Eval(`[...document.querySelectorAll("tr.message.assistant td.role, tr.message.assistant td.model")].map(td =>
		({Text: td.textContent.trim(), Width: td.getBoundingClientRect().width, Scroll: td.scrollWidth - td.clientWidth}))`, &cells)
	if len(cells) < 2 {
		t.Fatalf("role and model cells: %+v", cells)
	}
	for _, c := range cells {
		// Wide enough for its text: nothing cut or wrapped letter by letter.
		if c.Width < 40 || c.Scroll > 0 {
			t.Fatalf("a squeezed cell at a phone's width: %+v", c)
		}
	}
	var pageWidth float64
	p.Eval(`document.documentElement.scrollWidth`, &pageWidth)
	if pageWidth > 390 {
		t.Fatalf("the session page is %v px wide at a phone's 390", pageWidth)
	}
}
