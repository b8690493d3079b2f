package config

import (
	"fmt"

	"github.com/parleyd/parley/permissions"
)

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
