package daemon

import (
	"context"
	"log/slog"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/migrations"
)

// OpenDatabase opens the configured database and brings its schema up to
// date, returning how many migrations it applied. The caller closes it.
func OpenDatabase(ctx context.Context, cfg *config.Config, log *slog.Logger) (*dbutil.DB, int, error) {
	db, err := Dial(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	n, err := migrations.Up(ctx, db, log)
	if err != nil {
		db.Close()
		return nil, n, err
	}
	return db, n, nil
}

// Dial opens the configured database as it is, with the configured pool and
// SQLite settings.
func Dial(ctx context.Context, cfg *config.Config) (*dbutil.DB, error) {
	return dbutil.Open(ctx, dbutil.Options{
		URL:         cfg.Database.URL.Reveal(),
		Synchronous: cfg.Database.SQLite.Synchronous,
		BusyTimeout: cfg.Database.SQLite.BusyTimeout.Std(),
		MaxConns:    cfg.Database.Postgres.MaxConns,
		// A replica paused inside a transaction holds up the others no
		// longer than two leases; their fence ends it sooner.
		StuckAfter: max(2*cfg.Gateway.ReplicaLease.Std(), dbutil.DefaultStuckAfter),
	})
}
