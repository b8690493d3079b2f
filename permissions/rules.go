// Package permissions decides whether a tool call may run: allow, ask the
// person, or deny. Rules come in layers that compose:
//
//   - the manifest, the agent's own config: per tool name or pattern,
//     allow, ask or deny, and pin to make a rule unchangeable;
//   - project rules, per agent and user: "always" answers, stored, and
//     rules set in the config;
//   - session rules: "always in this chat" answers, stored per session.
//
// The most specific matching rule wins (an exact name beats a pattern, a
// longer pattern a shorter one); at equal specificity the narrower layer
// wins (session, then project, then manifest). A pinned manifest rule is
// never overridden. With no matching rule, MCP tools ("<server>__<tool>")
// ask and parley's own tools are allowed.
//
// A Checker applies the rules to each call (tools.Registry.Call asks it),
// asks the person through the turn's AskFunc when a rule says ask, and
// stores the "always" answers. A run nobody watches (a cron job, a
// webhook) is answered by its own config instead (Unattended).
package permissions

import (
	"fmt"
	"strings"
)

// Decision is what a rule says of a call.
type Decision string

// The decisions.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// Valid reports whether d is one of the three decisions.
func (d Decision) Valid() bool { return d == Allow || d == Ask || d == Deny }

// Rule is one rule: the tools it covers (an exact name, a pattern with *
// and ?, or "mcp:<server>" and "mcp:<server>/<tool>" as agents select
// them), what it decides, and, for a manifest rule, whether it is pinned.
type Rule struct {
	Tool     string
	Decision Decision
	Pin      bool
}

func (r Rule) String() string {
	s := r.Tool + ": " + string(r.Decision)
	if r.Pin {
		s += " (pinned)"
	}
	return s
}

// Layer is where a rule comes from.
type Layer int

// The layers, from the widest to the narrowest.
const (
	// LayerDefault is no rule: MCP tools ask, parley's own are allowed.
	LayerDefault Layer = iota
	LayerManifest
	LayerProject
	LayerSession
)

func (l Layer) String() string {
	switch l {
	case LayerManifest:
		return "the agent's config"
	case LayerProject:
		return "a rule for this agent and user"
	case LayerSession:
		return "a rule for this chat"
	}
	return "the default"
}

// MCPSep joins an MCP server's id and its tool's name in the tool name the
// model sees ("github__list_issues"); such tools ask by default. It is
// mcptools.Sep, repeated here so this package depends on no tool source.
const MCPSep = "__"

// mcpPrefix marks a rule written as agents select MCP tools.
const mcpPrefix = "mcp:"

// pattern is a compiled tool pattern.
type pattern struct {
	text  string // as matched: "mcp:" forms already rewritten
	exact bool
	// literal counts the pattern's characters that are not wildcards:
	// the more it has, the fewer names it covers.
	literal int
}

// compilePattern rewrites "mcp:<server>" to "<server>__*" and
// "mcp:<server>/<tool>" to "<server>__<tool>", and checks the rest.
func compilePattern(s string) (pattern, error) {
	s = strings.TrimSpace(s)
	if ref, ok := strings.CutPrefix(s, mcpPrefix); ok {
		server, tool, hasTool := strings.Cut(ref, "/")
		switch {
		case server == "" || strings.ContainsAny(server, "*?/"):
			return pattern{}, fmt.Errorf("%q: write mcp:<server> or mcp:<server>/<tool>", s)
		case !hasTool:
			s = server + MCPSep + "*"
		case tool == "":
			return pattern{}, fmt.Errorf("%q: name the tool after the slash, or drop the slash for all of the server's tools", s)
		default:
			s = server + MCPSep + tool
		}
	}
	if s == "" {
		return pattern{}, fmt.Errorf("empty tool name; write a tool's name or a pattern such as github__*")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return pattern{}, fmt.Errorf("%q: tool names have no spaces", s)
	}
	p := pattern{text: s, exact: !strings.ContainsAny(s, "*?")}
	for _, c := range s {
		if c != '*' && c != '?' {
			p.literal++
		}
	}
	return p, nil
}

// match reports whether name matches the pattern: * is any run of
// characters (none included), ? any one character.
func (p pattern) match(name string) bool {
	if p.exact {
		return p.text == name
	}
	return glob(p.text, name)
}

// glob matches name against pat with * and ?, by the classic two-pointer
// walk: linear in practice, with no allocation.
func glob(pat, name string) bool {
	pi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(name) {
		switch {
		case pi < len(pat) && (pat[pi] == '?' || pat[pi] == name[ni]):
			pi++
			ni++
		case pi < len(pat) && pat[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// specificity orders matching patterns: an exact name first, then by
// literal characters.
func (p pattern) specificity() int {
	if p.exact {
		return 1 << 30
	}
	return p.literal
}

// compiled is a rule ready to match.
type compiled struct {
	rule Rule
	pat  pattern
}

// Set is a compiled list of rules of one layer. The zero Set has none.
type Set struct {
	exact map[string]compiled
	globs []compiled
}

// Compile checks and compiles rules. A bad pattern or decision is an error
// naming the rule.
func Compile(rules []Rule) (Set, error) {
	var s Set
	for i, r := range rules {
		if !r.Decision.Valid() {
			return Set{}, fmt.Errorf("rule %d (%s): %q is not a decision; use allow, ask or deny", i, r.Tool, r.Decision)
		}
		p, err := compilePattern(r.Tool)
		if err != nil {
			return Set{}, fmt.Errorf("rule %d: %w", i, err)
		}
		s.add(compiled{rule: r, pat: p})
	}
	return s, nil
}

func (s *Set) add(c compiled) {
	if c.pat.exact {
		if s.exact == nil {
			s.exact = map[string]compiled{}
		}
		if _, dup := s.exact[c.pat.text]; !dup { // the first one written wins
			s.exact[c.pat.text] = c
		}
		return
	}
	s.globs = append(s.globs, c)
}

// Len is how many rules the set holds.
func (s Set) Len() int { return len(s.exact) + len(s.globs) }

// best is the most specific rule of s matching name (among the pinned ones
// only, or the unpinned ones only), and its specificity; ok is false when
// none matches. Among equally specific patterns the first written wins.
func (s Set) best(name string, pinned bool) (c compiled, spec int, ok bool) {
	if e, found := s.exact[name]; found && e.rule.Pin == pinned {
		return e, e.pat.specificity(), true
	}
	for _, g := range s.globs {
		if g.rule.Pin != pinned || !g.pat.match(name) {
			continue
		}
		if sp := g.pat.specificity(); !ok || sp > spec {
			c, spec, ok = g, sp, true
		}
	}
	return c, spec, ok
}

// Verdict is what the rules decide for one call, and why.
type Verdict struct {
	Decision Decision
	// Rule is the rule that decided; its Tool is empty for the default.
	Rule  Rule
	Layer Layer
	// Pinned: a pinned manifest rule decided, which nothing overrides.
	Pinned bool
	// Of is the calling agent whose rules decided a subagent's call; ""
	// when the call's own agent's did.
	Of string
}

// Why says in a phrase what decided, for the model and the log.
func (v Verdict) Why() string {
	var why string
	switch {
	case v.Layer != LayerDefault:
		why = fmt.Sprintf("%s says %q", v.Layer, v.Rule.String())
	case v.Decision == Ask:
		why = "tools of MCP servers ask by default"
	default:
		why = "parley's own tools are allowed by default"
	}
	if v.Of != "" {
		why += fmt.Sprintf(" for agent %s, which handed over this task", v.Of)
	}
	return why
}

// Layers are the rule sets a call is judged by.
type Layers struct {
	Manifest Set
	// Project holds the config's rules for the agent (and user) and the
	// stored "always" answers.
	Project []Set
	// Session holds the stored "always in this chat" answers.
	Session Set
}

// Evaluate judges a call of tool: the most specific pinned manifest rule,
// if one matches; else the most specific matching rule of any layer (at
// equal specificity the narrower layer); else the default, ask when
// external (an MCP tool) and allow otherwise.
func Evaluate(tool string, l Layers, external bool) Verdict {
	if c, _, ok := l.Manifest.best(tool, true); ok {
		return Verdict{Decision: c.rule.Decision, Rule: c.rule, Layer: LayerManifest, Pinned: true}
	}
	var (
		win   compiled
		layer = LayerDefault
		spec  = -1
	)
	consider := func(s Set, at Layer) {
		if c, sp, ok := s.best(tool, false); ok && (sp > spec || sp == spec && at > layer) {
			win, spec, layer = c, sp, at
		}
	}
	consider(l.Manifest, LayerManifest)
	for _, s := range l.Project {
		consider(s, LayerProject)
	}
	consider(l.Session, LayerSession)
	if layer == LayerDefault {
		return Verdict{Decision: defaultFor(external), Layer: LayerDefault}
	}
	return Verdict{Decision: win.rule.Decision, Rule: win.rule, Layer: layer}
}

func defaultFor(external bool) Decision {
	if external {
		return Ask
	}
	return Allow
}

// IsMCP reports whether a tool name is an MCP server's ("<server>__<tool>").
func IsMCP(tool string) bool { return strings.Contains(tool, MCPSep) }

// ToolPattern is a tool name pattern as rules write one: an exact name, a
// pattern with * and ? (such as files__*), or mcp:<server> and
// mcp:<server>/<tool>. Whatever else names tools by pattern (a history's
// omitted results, the API's tool filter) matches them as rules do.
type ToolPattern struct{ p pattern }

// CompileToolPattern reads s, saying what is wrong with it when it is not
// a tool name or pattern.
func CompileToolPattern(s string) (ToolPattern, error) {
	p, err := compilePattern(s)
	return ToolPattern{p}, err
}

// Match reports whether the tool called name is one the pattern covers.
func (t ToolPattern) Match(name string) bool { return t.p.match(name) }

// MatchAnyTool reports whether name is covered by one of patterns; one that
// doesn't compile covers nothing.
func MatchAnyTool(patterns []string, name string) bool {
	for _, s := range patterns {
		if p, err := compilePattern(s); err == nil && p.match(name) {
			return true
		}
	}
	return false
}
