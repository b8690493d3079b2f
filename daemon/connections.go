package daemon

import (
	"context"
	"slices"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/vault"
)

// connections are people's own tokens as the gateway's /connect sees them.
type connections struct{ d *Daemon }

var _ gateway.Connections = connections{}

// Providers are the providers some MCP server takes people's tokens for;
// none without a secrets key.
func (c connections) Providers() []string {
	if c.d.vault == nil || c.d.vault.Key() == nil {
		return nil
	}
	var out []string
	for _, s := range c.d.cfg().MCP.Servers {
		if p := s.UserToken.Provider; p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (c connections) Connect(ctx context.Context, q dbutil.Querier, user, provider, token string) error {
	u, err := vault.ParseUser(user)
	if err != nil {
		return err
	}
	return c.d.vault.ConnectIn(ctx, q, u, provider, token)
}

func (c connections) Disconnect(ctx context.Context, user, provider string) (bool, error) {
	u, err := vault.ParseUser(user)
	if err != nil {
		return false, err
	}
	return c.d.vault.Disconnect(ctx, u, provider)
}
