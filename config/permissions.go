package config

import (
	"fmt"
	"strings"
	"time"

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

// checkPermissions reports bad rules where they are written and fills in
// the ask timeout's default.
func (c *Config) checkPermissions(ck *checker) {
	if c.Permissions.AskTimeout == 0 {
		c.Permissions.AskTimeout = DefaultAskTimeout
	}
	if d := c.Permissions.AskTimeout; d < 0 || d.Std() > 24*time.Hour {
		ck.add("permissions.ask_timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 24h, such as "5m"`, d))
	}
	for i, a := range c.Agents {
		for j, r := range a.Permissions {
			checkRule(ck, fmt.Sprintf("agents[%d].permissions[%d].", i, j), r.Rule())
		}
	}
	for i, r := range c.Permissions.Rules {
		p := fmt.Sprintf("permissions.rules[%d].", i)
		pr := r.Rule()
		if pr.Agent != "" {
			if _, ok := c.Agent(pr.Agent); !ok {
				ck.add(p+"agent", fmt.Sprintf("%q is not an agent in agents; name one, or leave it out for every agent", pr.Agent))
			}
		}
		if pr.User != "" && !strings.Contains(pr.User, ":") {
			ck.add(p+"user", fmt.Sprintf(`%q names no channel; write "<channel type>:<user id>", e.g. "telegram:123456789"`, pr.User))
		}
		checkRule(ck, p, pr.Rule)
	}
	for i, j := range c.Cron.Jobs {
		checkAllowTools(ck, fmt.Sprintf("cron.jobs[%d].allow_tools", i), j.AllowTools)
	}
	for i, h := range c.Hooks {
		checkAllowTools(ck, fmt.Sprintf("hooks[%d].allow_tools", i), h.AllowTools)
	}
}

func checkRule(ck *checker, p string, r permissions.Rule) {
	if !r.Decision.Valid() {
		ck.add(p+"action", fmt.Sprintf("%q is not an action; use allow, ask or deny", r.Decision))
		return
	}
	if _, err := permissions.Compile([]permissions.Rule{r}); err != nil {
		_, msg, _ := strings.Cut(err.Error(), ": ")
		ck.add(p+"tool", msg)
	}
}

func checkAllowTools(ck *checker, key string, tools []string) {
	for i, t := range tools {
		if _, err := permissions.Compile([]permissions.Rule{{Tool: t, Decision: permissions.Allow}}); err != nil {
			_, msg, _ := strings.Cut(err.Error(), ": ")
			ck.add(fmt.Sprintf("%s[%d]", key, i), msg)
		}
	}
}
