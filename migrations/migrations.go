// Package migrations holds parley's forward-only SQL migrations, one set per
// dialect, embedded in the binary, and runs them with goose: applied
// versions are kept in goose's goose_db_version table, and on PostgreSQL
// applying holds goose's advisory lock, so replicas starting together
// migrate one at a time.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/parleyd/parley/dbutil"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

const (
	versionTableExistsPostgres = `SELECT EXISTS (SELECT 1 FROM pg_tables
		WHERE (current_schema() IS NULL OR schemaname = current_schema()) AND tablename = 'goose_db_version')`
	versionTableExistsSQLite = `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version')`
)

var (
	// ErrSchemaBehind means the database needs migrating.
	ErrSchemaBehind = errors.New("database schema is behind")
	// ErrSchemaAhead means the database was migrated by a newer parley.
	ErrSchemaAhead = errors.New("database schema is ahead")
)

// Runner applies a dialect's migrations to one database through a goose
// provider. Migrations are forward-only, so it offers no way down.
type Runner struct {
	goose *goose.Provider
	store database.Store
	db    *dbutil.DB
	log   *slog.Logger
}

// Provider returns the runner for db's dialect. On PostgreSQL, applying
// takes goose's session advisory lock, so replicas starting together
// migrate one at a time.
func Provider(db *dbutil.DB, log *slog.Logger) (*Runner, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, store, err := newGoose(db.Dialect, db.Writer(), log)
	if err != nil {
		return nil, err
	}
	return &Runner{goose: p, store: store, db: db, log: log}, nil
}

// newGoose makes goose's provider of d's migrations on conn, and its store
// of the version table.
func newGoose(d dbutil.Dialect, conn *sql.DB, log *slog.Logger) (*goose.Provider, database.Store, error) {
	sub, err := fs.Sub(files, string(d))
	if err != nil {
		return nil, nil, fmt.Errorf("migrations for %s: %w", d, err)
	}
	dialect := goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true), goose.WithSlog(log)}
	if d == dbutil.Postgres {
		dialect = goose.DialectPostgres
		opts = append(opts, goose.WithSessionLocker(waitingLocker{}))
	}
	p, err := goose.NewProvider(dialect, conn, sub, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s migrations: %w", d, err)
	}
	store, err := database.NewStore(dialect, goose.DefaultTablename)
	if err != nil {
		return nil, nil, fmt.Errorf("version table for %s: %w", d, err)
	}
	return p, store, nil
}

// Sources lists the runner's migrations, ascending by version.
func (r *Runner) Sources() []*goose.Source { return r.goose.ListSources() }

// Up applies every pending migration and returns how many it applied.
func (r *Runner) Up(ctx context.Context) (int, error) {
	sources := r.Sources()
	return r.UpTo(ctx, sources[len(sources)-1].Version)
}

// UpTo applies the pending migrations up to version, one transaction each,
// and returns how many it applied. A migration missing below the newest
// applied one is an error: numbers are applied in order.
func (r *Runner) UpTo(ctx context.Context, version int64) (int, error) {
	if err := r.refuseGaps(ctx); err != nil {
		return 0, err
	}
	results, err := r.goose.UpTo(ctx, version)
	for _, res := range results {
		r.log.DebugContext(ctx, "migration applied", "version", res.Source.Version, "source", res.Source.Path,
			"duration_seconds", res.Duration.Seconds())
	}
	return len(results), err
}

// GetVersions returns the newest version the database records and the
// newest this binary ships, as goose's provider does.
func (r *Runner) GetVersions(ctx context.Context) (current, target int64, err error) {
	current, err = r.Version(ctx)
	sources := r.Sources()
	return current, sources[len(sources)-1].Version, err
}

// HasPending reports whether a migration this binary ships is not applied.
func (r *Runner) HasPending(ctx context.Context) (bool, error) {
	if err := r.refuseGaps(ctx); err != nil {
		return false, err
	}
	return r.goose.HasPending(ctx)
}

// Version is the newest version the database records, 0 before any. Unlike
// goose's GetDBVersion it changes nothing (no version table is created)
// and waits on no lock.
func (r *Runner) Version(ctx context.Context) (int64, error) {
	read := r.db.Reader()
	exists, err := r.versionTableExists(ctx, read)
	if err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	v, err := r.store.GetLatestVersion(ctx, read)
	if errors.Is(err, database.ErrVersionNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// versionTableExists looks for goose_db_version without creating it, as
// goose's own check (which goose's SQLite store lacks) would.
func (r *Runner) versionTableExists(ctx context.Context, q *sql.DB) (bool, error) {
	query := versionTableExistsSQLite
	if r.db.Dialect == dbutil.Postgres {
		query = versionTableExistsPostgres
	}
	var exists bool
	if err := q.QueryRowContext(ctx, query).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for the version table: %w", err)
	}
	return exists, nil
}

// refuseGaps says what happened, and what to do, when the version table
// skips a migration below its newest: goose refuses to apply around the gap
// too, in words meant for a developer.
func (r *Runner) refuseGaps(ctx context.Context) error {
	read := r.db.Reader()
	exists, err := r.versionTableExists(ctx, read)
	if err != nil || !exists {
		return err
	}
	rows, err := r.store.ListMigrations(ctx, read)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	applied := map[int64]bool{}
	var newest int64
	for _, row := range rows {
		applied[row.Version] = true
		newest = max(newest, row.Version)
	}
	var missing []string
	for _, src := range r.Sources() {
		if src.Version < newest && !applied[src.Version] {
			missing = append(missing, strconv.FormatInt(src.Version, 10))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("migrations %s were never applied, yet the database is at version %d: "+
			"goose_db_version holds later migrations without these, so a build of parley other than a release migrated it, or the table was edited; "+
			"restore the database from a backup made before that (README: Operations, Backups)", strings.Join(missing, ", "), newest)
	}
	return nil
}

// Up applies every pending migration and returns how many it applied. A
// database whose schema is newer than this binary is refused: an older
// parley must not write to it.
func Up(ctx context.Context, db *dbutil.DB, log *slog.Logger) (int, error) {
	versions, err := versionsOf(db.Dialect)
	if err != nil {
		return 0, err
	}
	// The common start: the schema is current, every migration this
	// binary ships recorded and none newer. One read says so, without
	// loading goose and every migration file; anything else (a gap too)
	// goes the whole way, which says what is wrong.
	if newest, applied, ok := recordedVersions(ctx, db); ok && newest == versions[len(versions)-1] && applied == len(versions) {
		return 0, nil
	}
	r, err := Provider(db, log)
	if err != nil {
		return 0, err
	}
	if _, _, err := r.refuseNewer(ctx); err != nil {
		return 0, err
	}
	n, err := r.Up(ctx)
	if err != nil {
		return n, fmt.Errorf("migrate %s database: %w", db.Dialect, err)
	}
	return n, nil
}

// Check reports whether the schema is exactly the one this binary ships,
// without changing anything: ErrSchemaBehind means run "parley migrate",
// ErrSchemaAhead means upgrade parley.
func Check(ctx context.Context, db *dbutil.DB) error {
	r, err := Provider(db, nil)
	if err != nil {
		return err
	}
	current, latest, err := r.refuseNewer(ctx)
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
func (r *Runner) refuseNewer(ctx context.Context) (current, latest int64, err error) {
	current, latest, err = r.GetVersions(ctx)
	if err != nil {
		return 0, 0, err
	}
	if current > latest {
		return 0, 0, fmt.Errorf("%w: the database schema is at version %d, newer than this parley knows (%d); upgrade parley to the version that wrote it", ErrSchemaAhead, current, latest)
	}
	return current, latest, nil
}

// recordedVersions reads the newest applied version from the version table
// and how many versions are applied; ok is false when it can't (a new
// database has no table yet).
func recordedVersions(ctx context.Context, db *dbutil.DB) (newest int64, applied int, ok bool) {
	err := db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version_id), 0), COUNT(DISTINCT version_id) FROM goose_db_version WHERE is_applied AND version_id > 0").Scan(&newest, &applied)
	})
	return newest, applied, err == nil
}

// Version is the schema version the database is at.
func Version(ctx context.Context, db *dbutil.DB) (int64, error) {
	r, err := Provider(db, nil)
	if err != nil {
		return 0, err
	}
	return r.Version(ctx)
}

// versionsOf lists the versions a dialect's migration files carry,
// ascending, read from their names as goose reads them.
func versionsOf(d dbutil.Dialect) ([]int64, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", d, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("no migrations for %s", d)
	}
	out := make([]int64, 0, len(entries))
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// Latest is the newest migration version this binary ships for a dialect.
func Latest(d dbutil.Dialect) (int64, error) {
	versions, err := versionsOf(d)
	if err != nil {
		return 0, err
	}
	return versions[len(versions)-1], nil
}

// Count is how many migrations this binary ships for d: a fresh install
// applies that many. Numbers are handed out ahead, so it may be below Latest.
func Count(d dbutil.Dialect) (int, error) {
	versions, err := versionsOf(d)
	return len(versions), err
}
