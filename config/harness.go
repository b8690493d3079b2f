package config

import (
	"fmt"
	"strings"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/llm"
)

// Harness is the infrastructure and base behaviour a session runs on: a
// base prompt, tools and capabilities, a model and limits. Once a session
// uses it, that version is the session's: a harness changed here is a new
// version, and running sessions keep theirs.
type Harness struct {
	ID string `yaml:"id"`
	// Prompt comes before the agent's own prompt.
	Prompt string `yaml:"prompt"`
	// Tools are given to every turn, beside the agent's.
	Tools []string `yaml:"tools"`
	// Capabilities are groups of tools: memory, kv, files, sql,
	// schedules, subagents, or mcp:<server>.
	Capabilities []string `yaml:"capabilities"`
	// Model, if set, answers instead of the agent's (a session's own model
	// override still wins).
	Model string `yaml:"model"`
	// MaxSteps, if set, caps the model calls of a turn below the agent's.
	MaxSteps int `yaml:"max_steps"`
}

// BuiltinCapabilities maps each built-in capability to the name its tools
// are registered under (tools.RegisterBuiltin).
var BuiltinCapabilities = map[string]string{
	"memory": "memory", "kv": "kv", "files": "files", "sql": "sql", "schedules": "cron", "subagents": "sessions_spawn",
}

// CapabilityProblem says what is wrong with a capability name, "" when it
// names a built-in capability or a configured MCP server.
func (c *Config) CapabilityProblem(name string) string {
	if _, ok := BuiltinCapabilities[name]; ok {
		return ""
	}
	if server, ok := strings.CutPrefix(name, "mcp:"); ok {
		for _, s := range c.MCP.Servers {
			if s.ID == server {
				return ""
			}
		}
		return fmt.Sprintf("%q names no MCP server; use mcp:<id> with an id from mcp.servers", name)
	}
	return fmt.Sprintf("%q is not a capability; use memory, kv, files, sql, schedules, subagents, or mcp:<server>", name)
}

// Harness is the harness id names.
func (c *Config) Harness(id string) (Harness, bool) {
	for _, h := range c.Harnesses {
		if h.ID == id {
			return h, true
		}
	}
	return Harness{}, false
}

// SetDefaults trims the harness's id and drops its empty lists.
func (h *Harness) SetDefaults(section.Set) {
	h.ID = strings.TrimSpace(h.ID)
	if len(h.Tools) == 0 {
		h.Tools = nil
	}
	if len(h.Capabilities) == 0 {
		h.Capabilities = nil
	}
}

// Check reports the harness's own problems; its id's uniqueness and the
// MCP servers its capabilities name are the root's to check.
func (h Harness) Check(r section.Reporter) {
	if !agentID.MatchString(h.ID) {
		r.Add("id", fmt.Sprintf("%q is not a harness id; use 1-64 characters from a-z, 0-9, '_' and '-'", h.ID))
	}
	if mp, mm, ok := strings.Cut(h.Model, "/"); h.Model != "" && h.Model != "echo" {
		if _, known := llm.Lookup(mp); !ok || !known || mm == "" || strings.ContainsAny(h.Model, " \t\r\n") {
			r.Add("model", fmt.Sprintf(`%q is not a model; %s`, h.Model, modelRule))
		}
	}
	if h.MaxSteps < 0 || h.MaxSteps > 100 {
		r.Add("max_steps", fmt.Sprintf("%d is out of range; use 1-100, or leave it out for the agent's", h.MaxSteps))
	}
}

// checkHarnessRefs reports two harnesses of one id, capabilities naming
// no MCP server, and the harnesses agents and bindings name that are not
// there.
func (c *Config) checkHarnessRefs(ck *checker) {
	seen := map[string]bool{}
	for i, h := range c.Harnesses {
		p := fmt.Sprintf("harnesses[%d].", i)
		if agentID.MatchString(h.ID) && seen[h.ID] {
			ck.add(p+"id", fmt.Sprintf("two harnesses are called %q; give each its own id", h.ID))
		}
		seen[h.ID] = true
		for j, name := range h.Capabilities {
			if msg := c.CapabilityProblem(name); msg != "" {
				ck.add(fmt.Sprintf("%scapabilities[%d]", p, j), msg)
			}
		}
	}
	for i, a := range c.Agents {
		if _, ok := c.Harness(a.Harness); a.Harness != "" && !ok {
			ck.add(fmt.Sprintf("agents[%d].harness", i), fmt.Sprintf("%q is not a harness; name one of harnesses[].id", a.Harness))
		}
	}
	for i, b := range c.Bindings {
		if _, ok := c.Harness(b.Harness); b.Harness != "" && !ok {
			ck.add(fmt.Sprintf("bindings[%d].harness", i), fmt.Sprintf("%q is not a harness; name one of harnesses[].id", b.Harness))
		}
	}
}
