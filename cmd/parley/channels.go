package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
)

// buildAdapters makes the configured channels. An adapter without
// credentials is skipped with a log line, so the same config runs with
// whichever tokens the environment has; any other problem stops the start.
// db is nil when the config is only being checked.
func buildAdapters(cfg *config.Config, log *slog.Logger, db *dbutil.DB) (map[adapters.ID]adapters.Adapter, error) {
	out := map[adapters.ID]adapters.Adapter{}
	var errs []error
	for _, a := range cfg.Adapters {
		id := adapters.ID(a.ID)
		deps := adapters.Deps{Log: log.With("adapter", a.ID)}
		if db != nil {
			deps.DB, deps.Dialect = db.Writer(), string(db.Dialect)
		}
		ad, err := adapters.New(a.Type, id, a.Decode, deps)
		switch {
		case errors.Is(err, adapters.ErrNoCredentials):
			log.Info("channel skipped: no credentials", "adapter", a.ID, "type", a.Type, "reason", err.Error())
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", a.Path(), err))
		default:
			out[id] = ad
		}
	}
	return out, errors.Join(errs...)
}
