package permissions

import (
	"fmt"
	"sort"
)

// ProjectRule is a project rule written in the config: for one agent (or,
// with Agent empty, every agent), and
// for one user ("<surface>:<user id>", as User is everywhere here) or, with
// User empty, for every user of the agent. It overrides the agent's
// manifest rules but not its pins.
type ProjectRule struct {
	Agent string
	User  string
	Rule
}

// Policy is the config's rules, compiled: each agent's manifest and the
// project rules. It is immutable; a reload builds a new one.
type Policy struct {
	manifest map[string]Set
	// project maps an agent to its rules per user ("" for every user).
	project map[string]map[string]Set
}

// NewPolicy compiles the manifests (by agent id) and the config's project
// rules. Project rules can't be pinned: pins belong to the manifest.
func NewPolicy(manifest map[string][]Rule, project []ProjectRule) (*Policy, error) {
	p := &Policy{manifest: map[string]Set{}, project: map[string]map[string]Set{}}
	agents := make([]string, 0, len(manifest))
	for a := range manifest {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, a := range agents {
		s, err := Compile(manifest[a])
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a, err)
		}
		p.manifest[a] = s
	}
	for i, r := range project {
		if r.Pin {
			return nil, fmt.Errorf("project rule %d (%s): only an agent's own rules can be pinned", i, r.Tool)
		}
		if !r.Decision.Valid() {
			return nil, fmt.Errorf("project rule %d (%s): %q is not a decision; use allow, ask or deny", i, r.Tool, r.Decision)
		}
		pat, err := compilePattern(r.Tool)
		if err != nil {
			return nil, fmt.Errorf("project rule %d: %w", i, err)
		}
		users := p.project[r.Agent]
		if users == nil {
			users = map[string]Set{}
			p.project[r.Agent] = users
		}
		s := users[r.User]
		s.add(compiled{rule: r.Rule, pat: pat})
		users[r.User] = s
	}
	return p, nil
}

// layers are the config's layers for a call by agent for user, with room
// for the stored ones.
func (p *Policy) layers(agent, user string) Layers {
	if p == nil {
		return Layers{}
	}
	l := Layers{Manifest: p.manifest[agent]}
	// Rules for every agent (Agent ""), then the agent's own.
	for _, a := range [2]string{"", agent} {
		users := p.project[a]
		if users == nil || a == "" && agent == "" {
			continue
		}
		if s, ok := users[""]; ok {
			l.Project = append(l.Project, s)
		}
		if s, ok := users[user]; ok && user != "" {
			l.Project = append(l.Project, s)
		}
	}
	return l
}
