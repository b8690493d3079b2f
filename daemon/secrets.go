package daemon

import (
	"context"
	"fmt"
	"os"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/vault"
)

// ResolveSecrets replaces each ${secret:NAME} in cfg with the stored
// secret; each one that can't be (missing, no key, another key) is a
// config problem naming the key and the secret.
func ResolveSecrets(ctx context.Context, cfg *config.Config, v *vault.Store) error {
	if len(cfg.SecretRefs()) == 0 {
		return nil
	}
	return cfg.ResolveSecrets(func(name string) (string, error) { return v.Secret(ctx, name) })
}

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
		if f := cfg.Secrets.KeyFile; f != "" && os.Getenv(vault.EnvKey) == "" {
			if st, err := os.Stat(f); err == nil && st.Mode().Perm()&0o077 != 0 {
				d.log.Warn("the secrets key file can be read by others than its owner; chmod 600 it", "file", f, "mode", st.Mode().Perm().String())
			}
		}
	}
	if err := ResolveSecrets(ctx, cfg, v); err != nil {
		return fmt.Errorf("config refers to secrets parley can't read:\n%w", err)
	}
	d.scrubber.Add(cfg.SecretValues()...)
	return nil
}
