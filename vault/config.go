package vault

import (
	"context"
	"os"

	"github.com/parleyd/parley/config"
)

// ResolveConfig replaces each ${secret:NAME} in cfg with the stored
// secret; each one that can't be (missing, no key, another key) is a
// config problem naming the key and the secret.
func (s *Store) ResolveConfig(ctx context.Context, cfg *config.Config) error {
	if len(cfg.SecretRefs()) == 0 {
		return nil
	}
	return cfg.ResolveSecrets(func(name string) (string, error) { return s.Secret(ctx, name) })
}

// ExposedKeyFile is the mode of the key file when others than its owner
// may read it and the key is read from it (EnvKey is unset); "" if not.
func ExposedKeyFile(file string) string {
	if file == "" || os.Getenv(EnvKey) != "" {
		return ""
	}
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		return st.Mode().Perm().String()
	}
	return ""
}
