package mcptools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/vault"
)

// VaultTokens are people's own tokens from the secrets store, for the
// servers with user_token; seen hears each token read (the scrubber, so
// no tool result or log line shows it).
func VaultTokens(v *vault.Store, seen func(...string)) Tokens {
	return func(ctx context.Context, user, provider string) (string, error) {
		u, err := vault.ParseUser(user)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNotConnected, err)
		}
		tok, err := v.Token(ctx, u, provider)
		if errors.Is(err, vault.ErrNotFound) {
			return "", fmt.Errorf("%w: %v", ErrNotConnected, err)
		}
		seen(tok)
		return tok, err
	}
}

// Connections are people's own tokens as a chat's /connect sees them
// (gateway.Connections), kept in the secrets store.
type Connections struct {
	Vault  *vault.Store
	Config func() *config.Config
}

// Providers are the providers some MCP server takes people's tokens for;
// none without a secrets key.
func (c Connections) Providers() []string {
	if c.Vault == nil || c.Vault.Key() == nil {
		return nil
	}
	var out []string
	for _, s := range c.Config().MCP.Servers {
		if p := s.UserToken.Provider; p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (c Connections) Connect(ctx context.Context, q dbutil.Querier, user, provider, token string) error {
	u, err := vault.ParseUser(user)
	if err != nil {
		return err
	}
	return c.Vault.ConnectIn(ctx, q, u, provider, token)
}

func (c Connections) Disconnect(ctx context.Context, user, provider string) (bool, error) {
	u, err := vault.ParseUser(user)
	if err != nil {
		return false, err
	}
	return c.Vault.Disconnect(ctx, u, provider)
}

// WarnSecretArgs warns of each server argument holding a secret parley
// knows (scrub hides it): every user of the host sees a process's
// arguments (ps).
func WarnSecretArgs(cfg *config.Config, scrub func(string) string, log *slog.Logger) {
	for i, s := range cfg.MCP.Servers {
		for j, a := range s.Args {
			if scrub(a) != a {
				log.Warn("an MCP server's args hold a secret, which every user of this host can read in ps; pass it in env instead",
					"server", s.ID, "key", fmt.Sprintf("mcp.servers[%d].args[%d]", i, j))
			}
		}
	}
}
