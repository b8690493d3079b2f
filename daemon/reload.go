package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/webhooks"
)

// Reload puts cfg in place of the running config, as SIGHUP and parley
// reload ask. Every key is either applied live, for the messages taken
// from then on (a turn already running finishes on what it started with),
// or changes only at a restart (config.ReloadKeys classes each one). A config
// that changes a restart-only key, that doesn't load, or that parley run
// would refuse, changes nothing: the reload fails naming why, and the
// running config stays whole.
func (d *Daemon) Reload(ctx context.Context, cfg *config.Config, loadErr error) error {
	if loadErr == nil {
		loadErr = d.vault.ResolveConfig(ctx, cfg)
	}
	if loadErr == nil {
		loadErr = Check(cfg)
	}
	if loadErr != nil {
		d.noteReload(loadErr)
		d.log.ErrorContext(ctx, "config not reloaded: it has problems; the running config stays", "error", loadErr)
		return fmt.Errorf("config not reloaded: %w", loadErr)
	}
	d.scrubber.Add(cfg.SecretValues()...)
	mcptools.WarnSecretArgs(cfg, d.scrubber.Scrub, d.log)
	old := d.cfg()
	if fixed := config.RestartOnly(old, cfg); len(fixed) > 0 {
		err := fmt.Errorf("these keys change only at a restart: %s; restart parley to apply them, "+
			"or put back their running values to reload the rest", strings.Join(fixed, ", "))
		d.noteReload(err)
		d.log.ErrorContext(ctx, "config not reloaded: it changes keys only a restart applies; the running config stays",
			"keys", strings.Join(fixed, ", "))
		return fmt.Errorf("config not reloaded: %w", err)
	}
	if d.cron != nil {
		if err := d.cron.Apply(ctx, cfg); err != nil {
			return fmt.Errorf("config not reloaded: %w", err)
		}
	}
	if d.callbacks != nil {
		if err := d.callbacks.SetAllow(cfg.HTTP.CallbackAllow); err != nil {
			return fmt.Errorf("config not reloaded: %w", err)
		}
	}
	d.conf.Store(cfg)
	if d.events != nil {
		d.events.SetMaxBytes(int64(cfg.HTTP.EventLogMB) << 20)
	}
	d.mcp.Reload(cfg.MCP.Servers)
	d.reloadPermissions(cfg)
	d.applySessionTools(cfg)
	d.gw.SetPolicies(gateway.AgentsOf(cfg), gateway.AccessOf(cfg))
	if h, ok := d.adapters[webhooks.AdapterID].(*webhooks.Server); ok {
		h.SetHooks(cfg.Hooks)
	}
	d.noteReload(nil)
	d.log.InfoContext(ctx, "config reloaded", "agents", len(cfg.Agents), "cron_jobs", len(cfg.Cron.Jobs), "hooks", len(cfg.Hooks))
	return nil
}

// noteReload records a reload's time and outcome for the status.
func (d *Daemon) noteReload(err error) {
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	d.reloadedAt = time.Now()
	d.reloadErr = ""
	if err != nil {
		d.reloadErr = err.Error()
	}
}
