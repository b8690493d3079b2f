package turns

import (
	"context"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// sessions_spawn is built in, over the daemon's *agent.Runner: a
// subagent's turn is configured as any turn of its agent is (AgentConfig).
func init() {
	tools.RegisterBuiltin("sessions_spawn", func(deps tools.Deps) []tools.Tool {
		return []tools.Tool{tools.Part[*agent.Runner](deps).SpawnTool(spawnOptions(deps))}
	})
}

// spawnOptions resolve a subagent's session in the daemon's
// *sessions.SQLStore and configure it from the running config, its MCP
// servers' tools expanded by the *mcptools.Manager.
func spawnOptions(deps tools.Deps) agent.SpawnOptions {
	store, mcp, cfg := tools.Part[*sessions.SQLStore](deps), tools.Part[*mcptools.Manager](deps), deps.Config
	return agent.SpawnOptions{
		Resolve: func(ctx context.Context, key sessions.Key) (sessions.Session, error) {
			s, _, err := store.Resolve(ctx, key, sessions.Policy{})
			return s, err
		},
		Config: func(agentID string, root sessions.Key) (agent.AgentConfig, bool) {
			a, ok := cfg().Agent(agentID)
			c := AgentConfig(a, root)
			c.Tools = mcp.Expand(context.Background(), c.Tools)
			c.SkillDirs = SkillDirs(cfg(), a)
			return c, ok
		},
		Subagents: func(agentID string) []string {
			a, _ := cfg().Agent(agentID)
			return a.Subagents
		},
	}
}
