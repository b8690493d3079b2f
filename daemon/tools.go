package daemon

import (
	"errors"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/tools"

	"github.com/parleyd/parley/config"
)

// registerTools adds parley's built-in tools to reg: each package that
// has some registers them (tools.RegisterBuiltin), made over the parts
// provided here.
func (d *Daemon) registerTools(reg *tools.Registry) error {
	deps := tools.Deps{Config: d.cfg}
	deps.Provide(d.cron, d.memory, d.kv, d.files, d.sql, d.runner, d.sessions, d.mcp)
	return tools.RegisterBuiltins(reg, deps)
}

// Check reports what in cfg `parley run` would refuse beyond the config's
// own rules: a channel that can't be built, a cron job that doesn't parse,
// an agent tool that doesn't exist. `parley config check` prints it.
func Check(cfg *config.Config) error {
	names, err := tools.BuiltinNames()
	if err != nil {
		return err
	}
	_, adapterErr := adapters.Checked(cfg)
	_, cronErr := cron.JobsOf(cfg)
	return errors.Join(adapterErr, cronErr, mcptools.CheckAgentTools(cfg, names))
}
