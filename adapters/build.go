package adapters

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/vault"
)

// BuildOptions are what Build makes the channels with. DB and Vault (the
// secrets store) are nil when the config is only being checked.
type BuildOptions struct {
	Log   *slog.Logger
	DB    *dbutil.DB
	Vault *vault.Store
	// Refused, if set, counts a request refused at a channel's own webhook.
	Refused func(id ID, reason string)
}

// Build makes the channels cfg declares, each by its type's registered
// factory. A channel without credentials is skipped with a log line, so
// the same config runs with whichever tokens the environment has; any
// other problem is an error, at the channel's line.
func Build(cfg *config.Config, o BuildOptions) (map[ID]Adapter, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	out := map[ID]Adapter{}
	var errs []error
	for _, a := range cfg.Adapters {
		if a.Type == "" {
			continue // the config reports it
		}
		if o.DB == nil && a.UsesSecrets() {
			continue // its ${secret:...} values are known only when parley starts
		}
		id := ID(a.ID)
		deps := Deps{Log: o.Log.With("component", "channel", "adapter", a.ID)}
		if o.DB != nil {
			deps.DB, deps.Dialect, deps.Vault = o.DB.Writer(), string(o.DB.Dialect), o.Vault
		}
		if count := o.Refused; count != nil {
			deps.Refused = func(reason string) { count(id, reason) }
		}
		ad, err := New(a.Type, id, a.Decode, deps)
		switch {
		case errors.Is(err, ErrNoCredentials):
			o.Log.Info("channel skipped: no credentials", "adapter", a.ID, "type", a.Type, "reason", err.Error())
		case err != nil:
			if ps := (config.Problems)(nil); errors.As(err, &ps) {
				errs = append(errs, ps)
			} else {
				errs = append(errs, cfg.Problem(a.Path(), err.Error()))
			}
		default:
			out[id] = ad
		}
	}
	// Two channels can't take webhooks on one path.
	paths := map[string]ID{}
	for id, a := range out {
		if wh := CapabilitiesOf(a).Webhook; wh != nil {
			if p, _ := wh.Webhook(); p != "" {
				if other, dup := paths[p]; dup {
					errs = append(errs, fmt.Errorf("adapters %s and %s both take webhooks at %q; give one a different webhook path", other, id, p))
				}
				paths[p] = id
			}
		}
	}
	return out, errors.Join(errs...)
}

// Checked builds the channels cfg declares with no database, as a config
// check does: a factory decodes and checks its section and connects
// nothing (doctor then asks each one that can check its credentials).
func Checked(cfg *config.Config) (map[ID]Adapter, error) { return Build(cfg, BuildOptions{}) }
