package gateway

import (
	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
)

// The gateway's part of the config: each agent's queue mode, session
// policy and allowed models, and each channel's access policy.

// AgentsOf are the config's agents as the gateway sees them: queue modes and
// session policies.
func AgentsOf(cfg *config.Config) []Agent {
	agents := make([]Agent, len(cfg.Agents))
	for i, a := range cfg.Agents {
		hour, daily := a.DailyReset()
		agents[i] = Agent{ID: a.ID, Mode: Mode(a.QueueMode), Models: a.AllowedModels(), Effort: a.ReasoningEffort, Policy: sessions.Policy{
			IdleTimeout: a.IdleTimeout(), DailyReset: daily, DailyResetHour: hour, Location: a.Location()}}
	}
	return agents
}

// AccessOf is each configured channel's access policy.
func AccessOf(cfg *config.Config) map[adapters.ID]Access {
	out := map[adapters.ID]Access{}
	for _, a := range cfg.Adapters {
		allow := map[string]bool{}
		for _, u := range a.Allow {
			allow[u] = true
		}
		groups := map[string]bool{}
		for _, g := range a.Groups.Allow {
			groups[g] = true
		}
		out[adapters.ID(a.ID)] = Access{DM: DMPolicy(a.DMPolicy), Group: GroupPolicy(a.GroupPolicy), Allow: allow,
			Groups: GroupsPolicy(a.Groups.Policy), AllowGroups: groups, AckReaction: a.AckReaction}
	}
	return out
}
