package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/vault"
)

// OpenVault is the secrets store on db, sealing with the key from
// PARLEY_SECRET_KEY or secrets.key_file; with neither, its key is nil
// (names and dates can be listed; nothing can be sealed or opened).
func OpenVault(cfg *config.Config, db *dbutil.DB) (*vault.Store, error) {
	key, _, err := vault.LoadKey(cfg.Secrets.KeyFile, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return vault.NewStore(db, key), nil
}

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
	v, err := OpenVault(cfg, d.db)
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

// warnSecretArgs warns of each MCP server argument holding a secret
// parley knows: every user of the host sees a process's arguments (ps).
func warnSecretArgs(cfg *config.Config, scrubber *secret.Scrubber, log *slog.Logger) {
	for i, s := range cfg.MCP.Servers {
		for j, a := range s.Args {
			if scrubber.Scrub(a) != a {
				log.Warn("an MCP server's args hold a secret, which every user of this host can read in ps; pass it in env instead",
					"server", s.ID, "key", fmt.Sprintf("mcp.servers[%d].args[%d]", i, j))
			}
		}
	}
}

// userToken is a person's own token for a provider, for the MCP servers
// with user_token.
func (d *Daemon) userToken(ctx context.Context, user, provider string) (string, error) {
	u, err := vault.ParseUser(user)
	if err != nil {
		return "", fmt.Errorf("%w: %v", mcptools.ErrNotConnected, err)
	}
	tok, err := d.vault.Token(ctx, u, provider)
	if errors.Is(err, vault.ErrNotFound) {
		return "", fmt.Errorf("%w: %v", mcptools.ErrNotConnected, err)
	}
	d.scrubber.Add(tok)
	return tok, err
}
