package mcptools

import (
	"fmt"
	"strings"

	"github.com/parleyd/parley/config"
)

// CheckAgentTools reports every tool an agent names that is neither one
// of names (the built-in tools) nor a reference to a configured MCP
// server (mcp:<server>), each at its line.
func CheckAgentTools(cfg *config.Config, names []string) error {
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	var ps config.Problems
	for i, a := range cfg.Agents {
		seen := map[string]bool{}
		for j, name := range a.Tools {
			// A blank, spaced or repeated name is the config's to report.
			if name == "" || strings.ContainsAny(name, " \t\r\n") || seen[name] {
				continue
			}
			seen[name] = true
			if ref, ok := strings.CutPrefix(name, Prefix); ok {
				id, _, _ := strings.Cut(ref, "/")
				if _, ok := cfg.MCPServer(id); !ok {
					ps = append(ps, cfg.Problem(fmt.Sprintf("agents[%d].tools[%d]", i, j),
						fmt.Sprintf("no MCP server is called %q; add it under mcp.servers, or use one of those there", id)))
				}
				continue
			}
			if !known[name] {
				ps = append(ps, cfg.Problem(fmt.Sprintf("agents[%d].tools[%d]", i, j),
					fmt.Sprintf("no tool is called %q; the tools are %s", name, strings.Join(names, ", "))))
			}
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return ps
}
