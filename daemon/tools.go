package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/parleyd/parley/mcptools"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
	"github.com/parleyd/parley/turns"
)

// registerTools adds parley's built-in tools to reg: the schedule tools,
// memory's and sessions_spawn. build calls it with its parts built;
// builtinToolNames with none, to learn the names.
func (d *Daemon) registerTools(reg *tools.Registry) error {
	builtin := d.cron.Tools(cron.ToolOptions{TargetFor: d.cronTarget})
	builtin = append(builtin, memory.Tools(d.memory)...)
	builtin = append(builtin, kv.Tools(d.kv)...)
	builtin = append(builtin, files.Tools(d.files)...)
	builtin = append(builtin, d.runner.SpawnTool(agent.SpawnOptions{
		Resolve: func(ctx context.Context, key sessions.Key) (sessions.Session, error) {
			s, _, err := d.sessions.Resolve(ctx, key, sessions.Policy{})
			return s, err
		},
		Config: func(agentID string, root sessions.Key) (agent.AgentConfig, bool) {
			a, ok := d.cfg().Agent(agentID)
			c := turns.AgentConfig(a, root)
			c.Tools = d.mcp.Expand(context.Background(), c.Tools)
			c.SkillDirs = turns.SkillDirs(d.cfg(), a)
			return c, ok
		},
		Subagents: func(agentID string) []string {
			a, _ := d.cfg().Agent(agentID)
			return a.Subagents
		},
	}))
	for _, t := range builtin {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// builtinToolNames lists the tools an agent may name, for `parley config
// check`, from the same registration start uses.
func builtinToolNames() ([]string, error) {
	reg := tools.NewRegistry()
	if err := (&Daemon{}).registerTools(reg); err != nil {
		return nil, err
	}
	return reg.Names(), nil
}

// checkTools reports every agent tool that is not among names, at its line.
func checkTools(cfg *config.Config, names []string) error {
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
			if ref, ok := strings.CutPrefix(name, mcptools.Prefix); ok {
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

// Check reports what in cfg `parley run` would refuse beyond the config's
// own rules: a channel that can't be built, a cron job that doesn't parse,
// an agent tool that doesn't exist. `parley config check` prints it.
func Check(cfg *config.Config) error {
	names, err := builtinToolNames()
	if err != nil {
		return err
	}
	_, adapterErr := buildAdapters(cfg, slog.New(slog.DiscardHandler), nil, nil)
	_, cronErr := cron.JobsOf(cfg)
	return errors.Join(adapterErr, cronErr, checkTools(cfg, names))
}
