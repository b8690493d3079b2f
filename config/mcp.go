package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// MCP is the Model Context Protocol servers whose tools agents may use.
type MCP struct {
	Servers []MCPServer `yaml:"servers"`
}

// MCPServer is one MCP server: a command parley starts (stdio) or a URL
// it connects to (streamable HTTP). Agents name its tools in their tools
// list as "mcp:<id>" (all of them) or "mcp:<id>/<tool>".
type MCPServer struct {
	ID string `yaml:"id"`
	// Command and Args start a stdio server; Env ("NAME=value") is added
	// to its environment (values are secrets: never logged).
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []string `yaml:"env"`
	// URL is a streamable HTTP server; Headers ("Name: value") go with each
	// request (values are secrets).
	URL     string   `yaml:"url"`
	Headers []string `yaml:"headers"`
	// Timeout bounds each tool call. Default: 60s
	Timeout Duration `yaml:"timeout"`
}

// DefaultMCPTimeout bounds an MCP tool call when the server sets none.
const DefaultMCPTimeout = Duration(60 * time.Second)

var mcpID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// checkMCP reports the servers' problems and fills in defaults.
func (c *Config) checkMCP(ck *checker) {
	seen := map[string]bool{}
	for i := range c.MCP.Servers {
		s := &c.MCP.Servers[i]
		p := fmt.Sprintf("mcp.servers[%d].", i)
		s.ID = strings.TrimSpace(s.ID)
		switch {
		case !mcpID.MatchString(s.ID):
			ck.add(p+"id", fmt.Sprintf("%q is not a server id; use up to 32 lower-case letters, digits, '-' or '_' (it prefixes the server's tools: <id>__<tool>)", s.ID))
		case seen[s.ID]:
			ck.add(p+"id", fmt.Sprintf("two servers are called %q; give each its own id", s.ID))
		}
		seen[s.ID] = true
		s.Command, s.URL = strings.TrimSpace(s.Command), strings.TrimSpace(s.URL)
		switch {
		case s.Command == "" && s.URL == "":
			ck.add(p+"command", "give either command (a stdio server parley starts) or url (a streamable HTTP server)")
		case s.Command != "" && s.URL != "":
			ck.add(p+"url", "give command or url, not both")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ck.add(p+"url", fmt.Sprintf("%q is not an http:// or https:// URL", s.URL))
			}
		}
		for j, e := range s.Env {
			if name, _, ok := strings.Cut(e, "="); !ok || !envName.MatchString(name) {
				ck.add(fmt.Sprintf("%senv[%d]", p, j), "write NAME=value, e.g. GITHUB_TOKEN=${GITHUB_TOKEN}")
			}
		}
		for j, h := range s.Headers {
			if name, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
				ck.add(fmt.Sprintf("%sheaders[%d]", p, j), "write Name: value, e.g. \"Authorization: Bearer ${API_TOKEN}\"")
			}
		}
		if s.Timeout < 0 {
			ck.add(p+"timeout", "must not be negative")
		}
		if s.Timeout == 0 {
			s.Timeout = DefaultMCPTimeout
		}
	}
}

// MCPServer returns the server called id.
func (c *Config) MCPServer(id string) (MCPServer, bool) {
	for _, s := range c.MCP.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return MCPServer{}, false
}
