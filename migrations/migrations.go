// Package migrations holds parley's forward-only SQL migrations, one set per
// dialect, embedded in the binary, and runs them with goose.
package migrations

import (
	"context"
	"embed"
	"errors"
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

// Up applies every pending migration and returns how many it applied. A
// database whose schema is newer than this binary is refused: an older
// parley must not write to it.
func Up(ctx context.Context, db *dbutil.DB, log *slog.Logger) (int, error) {
	latest, err := Latest(db.Dialect)
	if err != nil {
		return 0, err
	}
	// The common start: the schema is current. One read says so, without
	// loading goose and every migration file.
	if current, ok := recordedVersion(ctx, db); ok && current == latest {
		return 0, nil
	}
	p, err := Provider(db, log)
	if err != nil {
		return 0, err
	}
	if _, _, err := refuseNewer(ctx, p, db); err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("migrate %s database: %w", db.Dialect, err)
	}
	return len(results), nil
}

// Check reports whether the schema is exactly the one this binary ships,
// without changing anything: ErrSchemaBehind means run "parley migrate",
// ErrSchemaAhead means upgrade parley.
func Check(ctx context.Context, db *dbutil.DB) error {
	p, err := Provider(db, nil)
	if err != nil {
		return err
	}
	current, latest, err := refuseNewer(ctx, p, db)
	if err != nil {
		return err
	}
	if current < latest {
		return fmt.Errorf("%w: the database schema is at version %d and this parley needs %d; run \"parley migrate\" (or start \"parley run\", which migrates)", ErrSchemaBehind, current, latest)
	}
	return nil
}

// refuseNewer returns the schema version the database is at and the
// latest this binary ships, refusing a database ahead of it.
func refuseNewer(ctx context.Context, p *goose.Provider, db *dbutil.DB) (current, latest int64, err error) {
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	latest, err = Latest(db.Dialect)
	if err != nil {
		return 0, 0, err
	}
	if current > latest {
		return 0, 0, fmt.Errorf("%w: the database schema is at version %d, newer than this parley knows (%d); upgrade parley to the version that wrote it", ErrSchemaAhead, current, latest)
	}
	return current, latest, nil
}

// recordedVersion reads the newest applied version from goose's table;
// ok is false when it can't (a new database has no table yet).
func recordedVersion(ctx context.Context, db *dbutil.DB) (v int64, ok bool) {
	err := db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied").Scan(&v)
	})
	return v, err == nil
}

// Version is the schema version the database is at.
func Version(ctx context.Context, db *dbutil.DB) (int64, error) {
	p, err := Provider(db, nil)
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

var (
	// ErrSchemaBehind means the database needs migrating.
	ErrSchemaBehind = errors.New("database schema is behind")
	// ErrSchemaAhead means the database was migrated by a newer parley.
	ErrSchemaAhead = errors.New("database schema is ahead")
)

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

// Count is how many migrations this binary ships for d: a fresh install
// applies that many. Numbers are handed out ahead, so it may be below Latest.
func Count(d dbutil.Dialect) (int, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return 0, fmt.Errorf("migrations for %s: %w", d, err)
	}
	return len(entries), nil
}
