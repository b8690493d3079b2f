package daemon

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/parleyd/parley/adapters"
	// The channels parley ships.
	_ "github.com/parleyd/parley/adapters/discord"
	_ "github.com/parleyd/parley/adapters/telegram"
	_ "github.com/parleyd/parley/adapters/whatsapp"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/vault"
)

// buildAdapters makes the configured channels. An adapter without
// credentials is skipped with a log line, so the same config runs with
// whichever tokens the environment has; any other problem stops the start.
// db and v (the secrets store) are nil when the config is only being
// checked.
func buildAdapters(cfg *config.Config, log *slog.Logger, db *dbutil.DB, v *vault.Store, refused ...func(id adapters.ID, reason string)) (map[adapters.ID]adapters.Adapter, error) {
	out := map[adapters.ID]adapters.Adapter{}
	var errs []error
	for _, a := range cfg.Adapters {
		if a.Type == "" {
			continue // the config reports it
		}
		if db == nil && a.UsesSecrets() {
			continue // its ${secret:...} values are known only when parley starts
		}
		id := adapters.ID(a.ID)
		deps := adapters.Deps{Log: log.With("component", "channel", "adapter", a.ID)}
		if db != nil {
			deps.DB, deps.Dialect, deps.Vault = db.Writer(), string(db.Dialect), v
		}
		for _, count := range refused {
			deps.Refused = func(reason string) { count(id, reason) }
		}
		ad, err := adapters.New(a.Type, id, a.Decode, deps)
		switch {
		case errors.Is(err, adapters.ErrNoCredentials):
			log.Info("channel skipped: no credentials", "adapter", a.ID, "type", a.Type, "reason", err.Error())
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
	paths := map[string]adapters.ID{}
	for id, a := range out {
		if wh := adapters.CapabilitiesOf(a).Webhook; wh != nil {
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

// CheckedChannels builds the channels cfg declares with no database, as a
// config check does: a factory decodes and checks its section and connects
// nothing (doctor then asks each one that can check its credentials).
func CheckedChannels(cfg *config.Config) (map[adapters.ID]adapters.Adapter, error) {
	return buildAdapters(cfg, slog.New(slog.DiscardHandler), nil, nil)
}
