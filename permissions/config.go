package permissions

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
)

// Config is the permissions section of parley's config: the settings of
// tool permissions that are not an agent's own: how long a question
// waits, and project rules.
type Config struct {
	// AskTimeout is how long a question ("may this tool run?") waits for
	// the person's answer; no answer denies the call. Default: 5m.
	AskTimeout section.Duration `yaml:"ask_timeout"`
	// Rules are project rules: for an agent (or every agent) and a user
	// (or every user). They override the agents' own rules, but not the
	// pinned ones.
	Rules []ConfigProjectRule `yaml:"rules"`
	// SharedGroupGrants makes a group member's "Always in this chat" hold
	// for every member of the group; by default it holds for that member.
	SharedGroupGrants bool `yaml:"shared_group_grants"`
}

// ConfigRule is one of an agent's own permission rules as the config
// writes it (agents[].permissions, the agent's manifest): for a tool, by
// name or pattern (* and ?; "mcp:<server>" and "mcp:<server>/<tool>" as
// in tools), allow, ask or deny; pin makes it one no other rule or answer
// overrides.
type ConfigRule struct {
	Tool   string `yaml:"tool"`
	Action string `yaml:"action"`
	Pin    bool   `yaml:"pin"`
}

// ConfigProjectRule is a project rule as the config writes it.
type ConfigProjectRule struct {
	// Agent is the agent it is for; empty means every agent.
	Agent string `yaml:"agent"`
	// User is "<channel type>:<user id>" as the channel names the person
	// (e.g. "telegram:123456789"); empty means everyone.
	User   string `yaml:"user"`
	Tool   string `yaml:"tool"`
	Action string `yaml:"action"`
}

// Rule is the rule as the policy reads it.
func (r ConfigRule) Rule() Rule {
	return Rule{Tool: strings.TrimSpace(r.Tool), Decision: Decision(strings.ToLower(strings.TrimSpace(r.Action))), Pin: r.Pin}
}

// Rule is the rule as the policy reads it.
func (r ConfigProjectRule) Rule() ProjectRule {
	return ProjectRule{Agent: strings.TrimSpace(r.Agent), User: strings.TrimSpace(r.User),
		Rule: Rule{Tool: strings.TrimSpace(r.Tool), Decision: Decision(strings.ToLower(strings.TrimSpace(r.Action)))}}
}

// SetDefaults fills in the ask timeout's default.
func (c *Config) SetDefaults(section.Set) {
	if c.AskTimeout == 0 {
		c.AskTimeout = section.Duration(DefaultAskTimeout)
	}
}

// Check reports the ask timeout's and the project rules' problems; the
// agents the rules name are the config's to check, beside the agents.
func (c Config) Check(r section.Reporter) {
	if d := c.AskTimeout; d < 0 || d.Std() > 24*time.Hour {
		r.Add("ask_timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 24h, such as "5m"`, d))
	}
	for i, rule := range c.Rules {
		key := fmt.Sprintf("rules[%d]", i)
		pr := rule.Rule()
		if pr.User != "" && !strings.Contains(pr.User, ":") {
			r.Add(key+".user", fmt.Sprintf(`%q names no channel; write "<channel type>:<user id>", e.g. "telegram:123456789"`, pr.User))
		}
		checkRule(section.Prefixed(r, key), pr.Rule)
	}
}

// Check reports a bad rule of an agent's where it is written.
func (c ConfigRule) Check(r section.Reporter) { checkRule(r, c.Rule()) }

func checkRule(r section.Reporter, rule Rule) {
	if !rule.Decision.Valid() {
		r.Add("action", fmt.Sprintf("%q is not an action; use allow, ask or deny", rule.Decision))
		return
	}
	if _, err := Compile([]Rule{rule}); err != nil {
		_, msg, _ := strings.Cut(err.Error(), ": ")
		r.Add("tool", msg)
	}
}

// CheckAllowTools reports the patterns of an allow_tools list (a cron
// job's, a hook's) that don't compile, at key[i].
func CheckAllowTools(r section.Reporter, key string, tools []string) {
	for i, t := range tools {
		if _, err := Compile([]Rule{{Tool: t, Decision: Allow}}); err != nil {
			_, msg, _ := strings.Cut(err.Error(), ": ")
			r.Add(fmt.Sprintf("%s[%d]", key, i), msg)
		}
	}
}
