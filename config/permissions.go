package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/permissions"
)

// Permissions are the settings of tool permissions that are not an
// agent's own: how long a question waits, and project rules.
type Permissions struct {
	// AskTimeout is how long a question ("may this tool run?") waits for
	// the person's answer; no answer denies the call. Default: 5m.
	AskTimeout Duration `yaml:"ask_timeout"`
	// Rules are project rules: for an agent (or every agent) and a user
	// (or every user). They override the agents' own rules, but not the
	// pinned ones.
	Rules []ProjectPermission `yaml:"rules"`
	// SharedGroupGrants makes a group member's "Always in this chat" hold
	// for every member of the group; by default it holds for that member.
	SharedGroupGrants bool `yaml:"shared_group_grants"`
}

// PermissionRule is one of an agent's own permission rules (its
// manifest): for a tool, by name or pattern (* and ?; "mcp:<server>" and
// "mcp:<server>/<tool>" as in tools), allow, ask or deny; pin makes it one
// no other rule or answer overrides.
type PermissionRule struct {
	Tool   string `yaml:"tool"`
	Action string `yaml:"action"`
	Pin    bool   `yaml:"pin"`
}

// ProjectPermission is a project rule in the config.
type ProjectPermission struct {
	// Agent is the agent it is for; empty means every agent.
	Agent string `yaml:"agent"`
	// User is "<channel type>:<user id>" as the channel names the person
	// (e.g. "telegram:123456789"); empty means everyone.
	User   string `yaml:"user"`
	Tool   string `yaml:"tool"`
	Action string `yaml:"action"`
}

// DefaultAskTimeout is permissions.ask_timeout's default.
const DefaultAskTimeout = Duration(permissions.DefaultAskTimeout)

// Rule is the rule as the permissions package reads it.
func (r PermissionRule) Rule() permissions.Rule {
	return permissions.Rule{Tool: strings.TrimSpace(r.Tool), Decision: permissions.Decision(strings.ToLower(strings.TrimSpace(r.Action))), Pin: r.Pin}
}

// Rule is the rule as the permissions package reads it.
func (r ProjectPermission) Rule() permissions.ProjectRule {
	return permissions.ProjectRule{Agent: strings.TrimSpace(r.Agent), User: strings.TrimSpace(r.User),
		Rule: permissions.Rule{Tool: strings.TrimSpace(r.Tool), Decision: permissions.Decision(strings.ToLower(strings.TrimSpace(r.Action)))}}
}

// PermissionPolicy compiles the agents' rules and the project rules; a
// config that validated always compiles.
func (c *Config) PermissionPolicy() (*permissions.Policy, error) {
	manifest := map[string][]permissions.Rule{}
	for _, a := range c.Agents {
		for _, r := range a.Permissions {
			manifest[a.ID] = append(manifest[a.ID], r.Rule())
		}
	}
	project := make([]permissions.ProjectRule, 0, len(c.Permissions.Rules))
	for _, r := range c.Permissions.Rules {
		project = append(project, r.Rule())
	}
	return permissions.NewPolicy(manifest, project)
}

// SetDefaults fills in the ask timeout's default.
func (p *Permissions) SetDefaults(section.Set) {
	if p.AskTimeout == 0 {
		p.AskTimeout = DefaultAskTimeout
	}
}

// Check reports the ask timeout's and the project rules' problems; the
// agents the rules name are the root's to check.
func (p Permissions) Check(r section.Reporter) {
	if d := p.AskTimeout; d < 0 || d.Std() > 24*time.Hour {
		r.Add("ask_timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 24h, such as "5m"`, d))
	}
	for i, rule := range p.Rules {
		key := fmt.Sprintf("rules[%d]", i)
		pr := rule.Rule()
		if pr.User != "" && !strings.Contains(pr.User, ":") {
			r.Add(key+".user", fmt.Sprintf(`%q names no channel; write "<channel type>:<user id>", e.g. "telegram:123456789"`, pr.User))
		}
		checkRule(section.Prefixed(r, key), pr.Rule)
	}
}

// Check reports a bad rule of an agent's where it is written.
func (p PermissionRule) Check(r section.Reporter) { checkRule(r, p.Rule()) }

// checkProjectRuleAgents reports the project rules naming an agent there
// is none of.
func (c *Config) checkProjectRuleAgents(ck *checker) {
	for i, r := range c.Permissions.Rules {
		if pr := r.Rule(); pr.Agent != "" {
			if _, ok := c.Agent(pr.Agent); !ok {
				ck.add(fmt.Sprintf("permissions.rules[%d].agent", i), fmt.Sprintf("%q is not an agent in agents; name one, or leave it out for every agent", pr.Agent))
			}
		}
	}
}

func checkRule(r section.Reporter, rule permissions.Rule) {
	if !rule.Decision.Valid() {
		r.Add("action", fmt.Sprintf("%q is not an action; use allow, ask or deny", rule.Decision))
		return
	}
	if _, err := permissions.Compile([]permissions.Rule{rule}); err != nil {
		_, msg, _ := strings.Cut(err.Error(), ": ")
		r.Add("tool", msg)
	}
}

// checkAllowTools reports the bad patterns of an allow_tools list at key.
func checkAllowTools(r section.Reporter, key string, tools []string) {
	for i, t := range tools {
		if _, err := permissions.Compile([]permissions.Rule{{Tool: t, Decision: permissions.Allow}}); err != nil {
			_, msg, _ := strings.Cut(err.Error(), ": ")
			r.Add(fmt.Sprintf("%s[%d]", key, i), msg)
		}
	}
}
