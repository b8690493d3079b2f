package daemon

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/vault"
)

// openVault opens the secrets store and resolves the config's secrets.
func (d *Daemon) openVault(ctx context.Context, cfg *config.Config) error {
	v, err := vault.Open(d.db, cfg.Secrets.KeyFile)
	if err != nil {
		return err
	}
	d.vault = v
	if err := v.CheckKey(ctx); err != nil {
		return err
	}
	if k := v.Key(); k != nil {
		d.scrubber.Add(k.Encode())
		d.log.Info("secrets store open", "key_id", k.ID())
		if mode := vault.ExposedKeyFile(cfg.Secrets.KeyFile); mode != "" {
			d.log.Warn("the secrets key file can be read by others than its owner; chmod 600 it", "file", cfg.Secrets.KeyFile, "mode", mode)
		}
	}
	if err := v.ResolveConfig(ctx, cfg); err != nil {
		return fmt.Errorf("config refers to secrets parley can't read:\n%w", err)
	}
	d.scrubber.Add(cfg.SecretValues()...)
	return nil
}
