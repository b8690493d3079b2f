package permissions

import (
	"strings"
	"testing"
)

func mustSet(t *testing.T, rules ...Rule) Set {
	t.Helper()
	s, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func r(tool string, d Decision) Rule      { return Rule{Tool: tool, Decision: d} }
func pinned(tool string, d Decision) Rule { return Rule{Tool: tool, Decision: d, Pin: true} }

// The evaluation table: which rule decides a call, for every way the
// layers can meet.
func TestEvaluate(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		manifest []Rule
		project  []Rule
		session  []Rule
		want     Decision
		layer    Layer
		pinned   bool
	}{
		{name: "own tool, no rules: allow", tool: "memory_write", want: Allow, layer: LayerDefault},
		{name: "MCP tool, no rules: ask", tool: "github__list_issues", want: Ask, layer: LayerDefault},
		{name: "manifest denies an own tool", tool: "memory_write", manifest: []Rule{r("memory_write", Deny)}, want: Deny, layer: LayerManifest},
		{name: "manifest allows an MCP server by pattern", tool: "github__list_issues", manifest: []Rule{r("github__*", Allow)}, want: Allow, layer: LayerManifest},
		{name: "mcp:<server> is the server's tools", tool: "github__list_issues", manifest: []Rule{r("mcp:github", Allow)}, want: Allow, layer: LayerManifest},
		{name: "mcp:<server>/<tool> is one tool", tool: "github__delete_repo", manifest: []Rule{r("mcp:github/delete_repo", Deny), r("mcp:github", Allow)}, want: Deny, layer: LayerManifest},
		{name: "mcp:<server> does not cover another server", tool: "gitlab__list_issues", manifest: []Rule{r("mcp:github", Allow)}, want: Ask, layer: LayerDefault},
		{name: "exact beats pattern in one layer", tool: "github__delete_repo", manifest: []Rule{r("github__*", Allow), r("github__delete_repo", Deny)}, want: Deny, layer: LayerManifest},
		{name: "longer pattern beats shorter", tool: "github__delete_repo", manifest: []Rule{r("*", Allow), r("github__delete_*", Deny), r("github__*", Ask)}, want: Deny, layer: LayerManifest},
		{name: "? matches one character", tool: "fs__read1", manifest: []Rule{r("fs__read?", Allow)}, want: Allow, layer: LayerManifest},
		{name: "? does not match none", tool: "fs__read", manifest: []Rule{r("fs__read?", Allow)}, want: Ask, layer: LayerDefault},
		{name: "project overrides manifest default at equal specificity", tool: "github__list_issues",
			manifest: []Rule{r("github__*", Ask)}, project: []Rule{r("github__*", Allow)}, want: Allow, layer: LayerProject},
		{name: "project exact grant beats manifest pattern", tool: "github__list_issues",
			manifest: []Rule{r("github__*", Ask)}, project: []Rule{r("github__list_issues", Allow)}, want: Allow, layer: LayerProject},
		{name: "project exact beats manifest exact", tool: "github__list_issues",
			manifest: []Rule{r("github__list_issues", Deny)}, project: []Rule{r("github__list_issues", Allow)}, want: Allow, layer: LayerProject},
		{name: "more specific manifest rule beats a project pattern", tool: "github__delete_repo",
			manifest: []Rule{r("github__delete_repo", Deny)}, project: []Rule{r("github__*", Allow)}, want: Deny, layer: LayerManifest},
		{name: "pinned manifest rule beats an exact project rule", tool: "github__delete_repo",
			manifest: []Rule{pinned("github__delete_*", Deny)}, project: []Rule{r("github__delete_repo", Allow)}, want: Deny, layer: LayerManifest, pinned: true},
		{name: "pinned manifest rule beats an exact session rule", tool: "shell__run",
			manifest: []Rule{pinned("shell__*", Ask)}, session: []Rule{r("shell__run", Allow)}, want: Ask, layer: LayerManifest, pinned: true},
		{name: "pinned manifest pattern beats an unpinned exact manifest rule", tool: "shell__run",
			manifest: []Rule{pinned("shell__*", Deny), r("shell__run", Allow)}, want: Deny, layer: LayerManifest, pinned: true},
		{name: "the most specific pin wins among pins", tool: "shell__run",
			manifest: []Rule{pinned("shell__*", Deny), pinned("shell__run", Ask)}, want: Ask, layer: LayerManifest, pinned: true},
		{name: "a pin elsewhere changes nothing", tool: "github__list_issues",
			manifest: []Rule{pinned("shell__*", Deny)}, project: []Rule{r("github__list_issues", Allow)}, want: Allow, layer: LayerProject},
		{name: "session beats project at equal specificity", tool: "github__list_issues",
			project: []Rule{r("github__list_issues", Deny)}, session: []Rule{r("github__list_issues", Allow)}, want: Allow, layer: LayerSession},
		{name: "session grant beats manifest ask", tool: "github__list_issues",
			manifest: []Rule{r("github__*", Ask)}, session: []Rule{r("github__list_issues", Allow)}, want: Allow, layer: LayerSession},
		{name: "a session grant for another tool doesn't apply", tool: "github__create_issue",
			session: []Rule{r("github__list_issues", Allow)}, want: Ask, layer: LayerDefault},
		{name: "first of two equal patterns wins", tool: "github__x",
			manifest: []Rule{r("github__?", Deny), r("github_?x", Allow)}, want: Deny, layer: LayerManifest},
		{name: "manifest ask makes an own tool ask", tool: "schedule_create", manifest: []Rule{r("schedule_*", Ask)}, want: Ask, layer: LayerManifest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := Layers{Manifest: mustSet(t, tc.manifest...), Session: mustSet(t, tc.session...)}
			if tc.project != nil {
				l.Project = []Set{mustSet(t, tc.project...)}
			}
			v := Evaluate(tc.tool, l, IsMCP(tc.tool))
			if v.Decision != tc.want || v.Layer != tc.layer || v.Pinned != tc.pinned {
				t.Fatalf("Evaluate(%s) = %+v (%s); want %s from %s, pinned %v", tc.tool, v, v.Why(), tc.want, tc.layer, tc.pinned)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		ok        bool
	}{
		{"*", "", true}, {"*", "anything", true}, {"a*", "a", true}, {"a*b", "axxb", true}, {"a*b", "axxbc", false},
		{"*b*", "abc", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"a**c", "abc", true}, {"*__*", "x__y", true},
		{"*__*", "x_y", false}, {"gh__*_repo", "gh__delete_repo", true}, {"gh__*_repo", "gh__delete_repos", false},
	} {
		if got := glob(tc.pat, tc.name); got != tc.ok {
			t.Errorf("glob(%q, %q) = %v", tc.pat, tc.name, got)
		}
	}
}

func TestCompileRefusesBadRules(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		says string
	}{
		{Rule{Tool: "x", Decision: "maybe"}, "use allow, ask or deny"},
		{Rule{Tool: "", Decision: Allow}, "empty tool name"},
		{Rule{Tool: "a b", Decision: Allow}, "no spaces"},
		{Rule{Tool: "mcp:", Decision: Allow}, "mcp:<server>"},
		{Rule{Tool: "mcp:gh/", Decision: Allow}, "name the tool"},
	} {
		if _, err := Compile([]Rule{tc.rule}); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Compile(%+v) = %v; want it to say %q", tc.rule, err, tc.says)
		}
	}
	if _, err := NewPolicy(nil, []ProjectRule{{Agent: "a", Rule: pinned("x", Allow)}}); err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Errorf("a pinned project rule: %v", err)
	}
}

// Project rules in the config apply to their agent, and to their user or,
// without one, to every user.
func TestPolicyLayers(t *testing.T) {
	p, err := NewPolicy(map[string][]Rule{"a": {r("github__*", Deny)}}, []ProjectRule{
		{Agent: "a", User: "telegram:1", Rule: r("github__list_issues", Allow)},
		{Agent: "a", Rule: r("github__search", Allow)},
		{Rule: r("fs__read", Allow)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent, user, tool string
		want              Decision
	}{
		{"a", "telegram:1", "github__list_issues", Allow},
		{"a", "telegram:2", "github__list_issues", Deny},
		{"a", "telegram:2", "github__search", Allow},
		{"b", "telegram:1", "github__list_issues", Ask},
		{"b", "telegram:1", "fs__read", Allow},
		{"a", "", "fs__read", Allow},
	} {
		if v := Evaluate(tc.tool, p.layers(tc.agent, tc.user), true); v.Decision != tc.want {
			t.Errorf("agent %s user %s tool %s: %s (%s), want %s", tc.agent, tc.user, tc.tool, v.Decision, v.Why(), tc.want)
		}
	}
}
