package mcptools

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/textcut"
)

const (
	// maxTools caps the tools one server may list.
	maxTools = 1000
	// maxToolName is the longest name a model's API takes for a tool
	// ("<server>__<tool>").
	maxToolName = 64
	// maxDescription caps a tool's description, which goes in every
	// prompt the tool is offered in.
	maxDescription = 4 << 10
)

// toolNameProblem says why a tool's name can't be used, or "". MCP allows
// 1-128 letters, digits, '_', '-' and '.'; parley takes those a model's
// API takes (no '.'), that fit in 64 with the server's id, and without
// "__", which separates the server from the tool. Nothing else: not '*'
// or '?', which permission rules read as patterns.
func toolNameProblem(server, name string) string {
	if name == "" {
		return "it is empty"
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("%q is not a letter, digit, '_' or '-'", c)
		}
	}
	if strings.Contains(name, Sep) {
		return fmt.Sprintf("it holds %q, which separates the server from the tool", Sep)
	}
	if n := len(server) + len(Sep) + len(name); n > maxToolName {
		return fmt.Sprintf("<server>__<tool> is %d characters, over %d", n, maxToolName)
	}
	return ""
}

// validTools is list without the tools whose names parley can't use
// (logged, a few at a time) and without a second tool of the same name.
func (s *server) validTools(list []*mcp.Tool) []*mcp.Tool {
	out := make([]*mcp.Tool, 0, len(list))
	seen := map[string]bool{}
	var refused []string
	for _, t := range list {
		if t == nil {
			continue
		}
		problem := toolNameProblem(s.cfg.ID, t.Name)
		if problem == "" && seen[t.Name] {
			problem = "the server lists it twice"
		}
		if problem != "" {
			if len(refused) < 5 {
				refused = append(refused, fmt.Sprintf("%q: %s", textcut.Bytes(t.Name, 64, "…"), problem))
			}
			continue
		}
		seen[t.Name] = true
		out = append(out, t)
	}
	if n := len(list) - len(out); n > 0 {
		s.m.log.Warn("MCP server's tools left out: their names can't be used", "server", s.cfg.ID, "count", n,
			"tools", s.scrub(strings.Join(refused, "; ")))
	}
	return out
}

// cutDescription is a tool's description, capped.
func cutDescription(d string) string { return textcut.Bytes(d, maxDescription, "…") }

// secretsOf are the values of c to hide: its env and header values, and
// the password and query values of its URL.
func secretsOf(c config.MCPServer) []string {
	var out []string
	for _, pairs := range []struct {
		list config.Pairs
		sep  string
	}{{c.Headers, ":"}, {c.Env, "="}} {
		for _, p := range pairs.list {
			if _, v, ok := strings.Cut(p, pairs.sep); ok {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	if u, err := url.Parse(c.URL); err == nil && c.URL != "" {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
	}
	return out
}

// scrub hides, in text a server sent or an error about it, every value
// the Manager hides, and shows its URL as config.RedactURL does.
func (s *server) scrub(text string) string {
	if s.cfg.URL != "" && strings.Contains(text, s.cfg.URL) {
		text = strings.ReplaceAll(text, s.cfg.URL, config.RedactURL(s.cfg.URL))
	}
	return s.m.Scrubber().Scrub(text)
}
