package daemon

import (
	"context"
	"strings"
	"testing"
	"time"
)

// contrastJS lists the page's visible text whose colour is below WCAG AA's
// contrast against the background it sits on (4.5:1, or 3:1 for large
// text), the messages' times (drawn by ::after) included.
const contrastJS = `(() => {
	const rgba = (c) => { const v = (c.match(/[\d.]+/g) || []).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1] };
	const lum = ([r, g, b]) => { const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4 }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b) };
	const over = (top, under) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat(1) };
	// The colour behind el: its ancestors' backgrounds, blended.
	const behind = (el) => { const layers = []; for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor); if (c[3] > 0) layers.push(c); if (c[3] >= 1) break; }
		let c = [255, 255, 255, 1]; if (matchMedia("(prefers-color-scheme: dark)").matches && !layers.some(l => l[3] >= 1)) c = [0, 0, 0, 1];
		for (const l of layers.reverse()) c = over(l, c); return c };
	const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((m, n) => n - m); return (x + 0.05) / (y + 0.05) };
	const seen = new Set(), bad = [];
	const check = (el, style, what) => {
		const fg = over(rgba(style.color), behind(el)), size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
		const opacity = [...(function* () { for (let e = el; e; e = e.parentElement) yield Number(getComputedStyle(e).opacity) })()].reduce((a, b) => a * b, 1);
		const bg = behind(el), shown = opacity < 1 ? over([fg[0], fg[1], fg[2], opacity], bg) : fg;
		const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5, r = ratio(shown, bg);
		if (r < need) bad.push(what + ": " + r.toFixed(2) + " < " + need + " (" + style.color + " on " + bg.join(",") + ")");
	};
	const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n; (n = walk.nextNode());) {
		const el = n.parentElement;
		if (!n.nodeValue.trim() || seen.has(el) || !el.checkVisibility() || el.closest(".sr-only,.skip")) continue;
		seen.add(el);
		check(el, getComputedStyle(el), (el.id ? "#" + el.id : el.tagName.toLowerCase() + (el.className ? "." + el.className : "")) + " " + JSON.stringify(n.nodeValue.trim().slice(0, 30)));
	}
	for (const el of document.querySelectorAll(".msg[data-time]")) check(el, getComputedStyle(el, "::after"), "the time of " + JSON.stringify(el.textContent.slice(0, 30)));
	return bad;
})()`

// focusOrderJS is the ids, or names, of what Tab should reach, in the
// order of the page: the visible, enabled, focusable elements.
const focusOrderJS = `[...document.querySelectorAll("a[href], button, input, textarea, select, [tabindex]")]
	.filter(e => !e.disabled && e.tabIndex >= 0 && e.checkVisibility() && !e.closest("[hidden]") && getComputedStyle(e).visibility !== "hidden" && (e.type !== "file"))
	.map(e => e.id || e.getAttribute("aria-label") || e.textContent.trim())`

// The web chat passes an accessibility audit (axe-core's WCAG 2.x A and
// AA rules and best practices) with no serious or critical finding, in
// the light and the dark theme, with a conversation, a table, code and a
// permission question on the page; every text's colour has AA contrast;
// Tab follows the page's order, and a new reply is announced (aria-live).
func TestWebChatAccessible(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	d, p, stop := openChat(t, ctx, askingAgent, false)
	defer stop()
	sayIn(t, p, "first question")
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-id]").length === 1 && !running`, 60*time.Second)
	p.Eval(`document.getElementById("new").click()`, nil)
	sayIn(t, p, "## Notes\n\n- one [link](https://example.com)\n- `two`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n\n```\ncode\n```")
	p.WaitTrue(`document.querySelectorAll(".msg.assistant[data-id] table").length === 1 && !running`, 60*time.Second)
	// The reply was announced to a screen reader.
	var announced string
	p.Eval(`document.getElementById("announce").getAttribute("aria-live") + ": " + document.getElementById("announce").textContent`, &announced)
	if !strings.HasPrefix(announced, "polite: Reply: Notes") {
		t.Fatalf("the live region says %q; want the reply", announced)
	}
	searchTurn(d, "a1", "searched")
	sayIn(t, p, "what are my plans?")
	p.WaitTrue(`document.querySelector(".msg.ask:not([data-done])")`, 60*time.Second)
	p.WaitTrue(`document.querySelectorAll("#convs li[data-id]").length === 2`, 30*time.Second)

	audit := func(theme string) {
		t.Helper()
		for _, v := range p.Audit() {
			if v.Impact == "serious" || v.Impact == "critical" {
				t.Errorf("%s theme: %s (%s): %s\n  %s", theme, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
			} else {
				t.Logf("%s theme, %s finding: %s: %s (%d elements)", theme, v.Impact, v.ID, v.Help, len(v.Nodes))
			}
		}
		var bad []string
		p.Eval(contrastJS, &bad)
		if len(bad) > 0 {
			t.Errorf("%s theme: text below AA contrast:\n  %s", theme, strings.Join(bad, "\n  "))
		}
	}
	audit("light")
	p.Screenshot("/tmp/h42c-a11y-light.png")
	p.ColorScheme("dark")
	p.WaitTrue(`matchMedia("(prefers-color-scheme: dark)").matches`, 10*time.Second)
	audit("dark")
	p.Screenshot("/tmp/h42c-a11y-dark.png")

	// Tab from the top reaches each control in the page's order, the
	// skip link first; none is put out of order with a positive tabindex.
	// (Reloaded, so the keyboard starts from the top of the page.)
	p.Eval(`window.__old = true; location.reload()`, nil)
	p.WaitTrue(`!window.__old && document.querySelector(".msg.ask:not([data-done])") && document.querySelectorAll("#convs li[data-id]").length === 2`, 60*time.Second)
	var want []string
	p.Eval(focusOrderJS, &want)
	var positive int
	p.Eval(`[...document.querySelectorAll("[tabindex]")].filter(e => e.tabIndex > 0).length`, &positive)
	if positive > 0 || len(want) < 10 || want[0] != "Skip to the message box" {
		t.Fatalf("focusable in page order: %q; %d with a positive tabindex", want, positive)
	}
	var got []string
	for range want {
		p.Press("Tab", 0)
		var name string
		p.Eval(`(e => e.id || e.getAttribute("aria-label") || e.textContent.trim())(document.activeElement)`, &name)
		got = append(got, name)
	}
	if strings.Join(got, " > ") != strings.Join(want, " > ") {
		t.Fatalf("Tab goes\n  %s\nwant the page's order\n  %s", strings.Join(got, " > "), strings.Join(want, " > "))
	}
	// The question is left unanswered: Esc stops its turn (a daemon
	// stopping waits for a question until it expires).
	p.Press("Escape", 0)
	p.WaitTrue(`!running`, 30*time.Second)
}
