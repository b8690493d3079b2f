package daemon

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/webhooks"
)

// Reload puts cfg in place of the running config, as SIGHUP and parley
// reload ask: agents (models, prompts, tools, queue modes, session
// policies), bindings, channels' access lists, cron jobs, hooks and MCP
// servers change
// at once, for the messages taken from then on; a turn already running
// finishes on what it started with. What can't change without a restart
// (the database, the listen addresses, the channels and their tokens, the
// API tokens) is named in the log and kept. A config that doesn't load, or
// that parley run would refuse, changes nothing.
func (d *Daemon) Reload(ctx context.Context, cfg *config.Config, loadErr error) error {
	if loadErr == nil {
		loadErr = ResolveSecrets(ctx, cfg, d.vault)
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
	warnSecretArgs(cfg, d.scrubber, d.log)
	old := d.cfg()
	if fixed := restartOnly(old, cfg); len(fixed) > 0 {
		d.log.WarnContext(ctx, "config reloaded, but these keys change only at a restart; they keep their running values",
			"keys", strings.Join(fixed, ", "))
		keepRestartOnly(old, cfg)
	}
	if d.cron != nil {
		jobs, err := cronJobs(cfg)
		if err != nil {
			return err
		}
		if err := d.cron.Store().SyncConfig(ctx, jobs); err != nil {
			return fmt.Errorf("config not reloaded: store its cron jobs: %w", err)
		}
		d.cron.Reload()
	}
	d.conf.Store(cfg)
	d.mcp.Reload(cfg.MCP.Servers)
	d.reloadPermissions(cfg)
	d.applySessionTools(cfg)
	d.gw.SetPolicies(gatewayAgents(cfg), accessPolicies(cfg))
	if h, ok := d.adapters[webhooks.AdapterID].(*webhooks.Server); ok {
		h.SetHooks(cfg.Hooks)
	}
	d.noteReload(nil)
	d.log.InfoContext(ctx, "config reloaded", "agents", len(cfg.Agents), "cron_jobs", len(cfg.Cron.Jobs), "hooks", len(cfg.Hooks))
	return nil
}

// noteReload records a reload's time and outcome for the status.
func (d *Daemon) noteReload(err error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.reloadedAt = time.Now()
	d.reloadErr = ""
	if err != nil {
		d.reloadErr = err.Error()
	}
}

// restartOnly names the keys that differ between old and cfg but can't
// change while parley runs.
func restartOnly(old, cfg *config.Config) []string {
	var out []string
	for _, k := range []struct {
		name   string
		differ bool
	}{
		{"database", !reflect.DeepEqual(old.Database, cfg.Database)},
		{"http.listen", old.HTTP.Listen != cfg.HTTP.Listen},
		{"http.ops_listen", old.HTTP.OpsListen != cfg.HTTP.OpsListen},
		{"http.tokens", !reflect.DeepEqual(old.HTTP.Tokens, cfg.HTTP.Tokens)},
		{"http.callback_secret", old.HTTP.CallbackSecret != cfg.HTTP.CallbackSecret},
		{"providers", !reflect.DeepEqual(old.Providers, cfg.Providers)},
		{"gateway", !reflect.DeepEqual(old.Gateway, cfg.Gateway)},
		{"memory", !reflect.DeepEqual(old.Memory, cfg.Memory)},
		{"log", !reflect.DeepEqual(old.Log, cfg.Log)},
		{"adapters (channels and their tokens)", !sameChannels(old, cfg)},
	} {
		if k.differ {
			out = append(out, k.name)
		}
	}
	return out
}

// sameChannels says whether the channels are the same but for their access
// lists, which change live.
func sameChannels(old, cfg *config.Config) bool {
	if len(old.Adapters) != len(cfg.Adapters) {
		return false
	}
	for i := range old.Adapters {
		a, b := old.Adapters[i], cfg.Adapters[i]
		if a.ID != b.ID || a.Type != b.Type || a.Stream != b.Stream || !a.SameSettings(b) {
			return false
		}
	}
	return true
}

// keepRestartOnly copies into cfg the running values of what only a
// restart changes, so the running config says what runs.
func keepRestartOnly(old, cfg *config.Config) {
	cfg.Database, cfg.Providers, cfg.Gateway, cfg.Memory, cfg.Log = old.Database, old.Providers, old.Gateway, old.Memory, old.Log
	cfg.HTTP.Listen, cfg.HTTP.OpsListen, cfg.HTTP.Tokens, cfg.HTTP.CallbackSecret = old.HTTP.Listen, old.HTTP.OpsListen, old.HTTP.Tokens, old.HTTP.CallbackSecret
	if !sameChannels(old, cfg) {
		access := map[string]config.Adapter{}
		for _, a := range cfg.Adapters {
			access[a.ID] = a
		}
		adapters := make([]config.Adapter, len(old.Adapters))
		for i, a := range old.Adapters {
			adapters[i] = a
			if n, ok := access[a.ID]; ok {
				adapters[i].DMPolicy, adapters[i].GroupPolicy, adapters[i].Allow = n.DMPolicy, n.GroupPolicy, n.Allow
			}
		}
		cfg.Adapters = adapters
	}
}
