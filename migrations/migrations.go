// Package migrations holds parley's forward-only SQL migrations, one set per
// dialect, embedded in the binary, and runs them with goose.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/parleyd/parley/dbutil"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// Provider returns a goose provider for db's dialect. On PostgreSQL it takes
// a session advisory lock, so replicas starting together migrate one at a time.
func Provider(db *dbutil.DB, log *slog.Logger) (*goose.Provider, error) {
	sub, err := fs.Sub(files, string(db.Dialect))
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", db.Dialect, err)
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	dialect := goose.DialectSQLite3
	if db.Dialect == dbutil.Postgres {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, db.Writer(), sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s migrations: %w", db.Dialect, err)
	}
	return p, nil
}

// Up applies every pending migration and returns how many it applied.
func Up(ctx context.Context, db *dbutil.DB, log *slog.Logger) (int, error) {
	p, err := Provider(db, log)
	if err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("migrate %s database: %w", db.Dialect, err)
	}
	return len(results), nil
}

// Latest is the newest migration version this binary ships for a dialect.
func Latest(d dbutil.Dialect) (int64, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return 0, fmt.Errorf("migrations for %s: %w", d, err)
	}
	var latest int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}
