package daemon

import (
	"fmt"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/tools"
)

// openPermissions builds the permission checker on the config's rules and
// the database's stored answers, and makes reg check every call with it.
func (d *Daemon) openPermissions(cfg *config.Config, reg *tools.Registry) error {
	pol, err := cfg.PermissionPolicy()
	if err != nil {
		return fmt.Errorf("permission rules: %w", err)
	}
	d.perms = permissions.NewChecker(permissions.Options{Policy: pol, Store: permissions.NewStore(d.db),
		AskTimeout: cfg.Permissions.AskTimeout.Std(), External: permissions.IsMCP, SharedGroupGrants: cfg.Permissions.SharedGroupGrants, Log: d.named("permissions")})
	d.desk = permissions.NewDesk()
	reg.SetPermissions(d.perms)
	return nil
}

// reloadPermissions puts a reloaded config's rules and ask timeout in place.
func (d *Daemon) reloadPermissions(cfg *config.Config) {
	if pol, err := cfg.PermissionPolicy(); err == nil {
		d.perms.SetPolicy(pol)
	}
	d.perms.SetAskTimeout(cfg.Permissions.AskTimeout.Std())
	d.perms.SetSharedGroupGrants(cfg.Permissions.SharedGroupGrants)
}
