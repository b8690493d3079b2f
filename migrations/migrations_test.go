package migrations_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/migrations"
)

// A fresh install and a step-by-step upgrade, one release at a time, must
// leave the same schema.
func TestFreshInstallMatchesStepwiseUpgrade(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			fresh := e.Raw(t)
			n, err := migrations.Up(ctx, fresh, nil)
			if err != nil {
				t.Fatal(err)
			}
			latest, err := migrations.Latest(fresh.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			// Numbers are handed out ahead, so the files may have gaps.
			sources, err := migrations.Provider(fresh, nil)
			if err != nil {
				t.Fatal(err)
			}
			var versions []int64
			for _, src := range sources.Sources() {
				versions = append(versions, src.Version)
			}
			if n < 2 || n != len(versions) || versions[len(versions)-1] != latest {
				t.Fatalf("fresh install applied %d migrations, want all %d up to %d (and at least 2, so the upgrade path is exercised)", n, len(versions), latest)
			}

			stepwise := e.Raw(t)
			for _, v := range versions {
				// A new provider per step, as each release's binary would make.
				p, err := migrations.Provider(stepwise, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.UpTo(ctx, v); err != nil {
					t.Fatalf("upgrade to %d: %v", v, err)
				}
				got, err := p.Version(ctx)
				if err != nil || got != v {
					t.Fatalf("after upgrade to %d the database is at %d (%v)", v, got, err)
				}
			}

			a, b := dbtest.Schema(t, fresh), dbtest.Schema(t, stepwise)
			if !strings.Contains(a, "sessions_active_key") {
				t.Fatalf("schema dump is missing the active-key index:\n%s", a)
			}
			if a != b {
				t.Fatalf("schemas differ\nfresh:\n%s\nstepwise:\n%s", a, b)
			}

			// Running again is a no-op.
			n, err = migrations.Up(ctx, fresh, nil)
			if err != nil || n != 0 {
				t.Fatalf("second Up applied %d (%v), want 0", n, err)
			}
		})
	}
}

func TestNewerSchemaIsRefusedAndOlderIsReported(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			db := e.Raw(t)
			p, err := migrations.Provider(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := migrations.Check(ctx, db); !errors.Is(err, migrations.ErrSchemaBehind) || !strings.Contains(err.Error(), "parley migrate") {
				t.Fatalf("Check on an old schema = %v", err)
			}
			if _, err := migrations.Up(ctx, db, nil); err != nil {
				t.Fatal(err)
			}
			if err := migrations.Check(ctx, db); err != nil {
				t.Fatalf("Check after Up = %v", err)
			}
			latest, _ := migrations.Latest(db.Dialect)
			// A newer parley migrated this database.
			if _, err := db.Writer().ExecContext(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, $2)", latest+1, true); err != nil {
				t.Fatal(err)
			}
			for name, fn := range map[string]func() error{
				"Up":    func() error { _, err := migrations.Up(ctx, db, nil); return err },
				"Check": func() error { return migrations.Check(ctx, db) },
			} {
				if err := fn(); !errors.Is(err, migrations.ErrSchemaAhead) || !strings.Contains(err.Error(), "upgrade parley") {
					t.Errorf("%s on a newer schema = %v", name, err)
				}
			}
		})
	}
}

// A database whose version table skips a migration it should have (a
// development build migrated it, or someone edited the table) is refused
// with what happened and what to do, not migrated around the gap.
func TestAGapInTheAppliedMigrationsIsRefused(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			db := e.Raw(t)
			if _, err := migrations.Up(ctx, db, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Writer().ExecContext(ctx, "DELETE FROM goose_db_version WHERE version_id = 2"); err != nil {
				t.Fatal(err)
			}
			_, err := migrations.Up(ctx, db, nil)
			if err == nil || !strings.Contains(err.Error(), "migrations 2 were never applied") || !strings.Contains(err.Error(), "restore the database from a backup") {
				t.Fatalf("Up over a gap = %v", err)
			}
		})
	}
}

// Both engines must have the same tables, columns and indexes, whatever
// their types.
func TestEnginesHaveTheSameSchemaShape(t *testing.T) {
	dbtest.RequirePostgres(t)
	shape := func(db *dbutil.DB, q string) []string {
		rows, err := db.Reader().QueryContext(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		sort.Strings(out)
		return out
	}
	lite, pg := dbtest.SQLite(t), dbtest.Postgres(t)
	liteShape := shape(lite, `SELECT m.name || '.' || p.name FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
		UNION ALL SELECT 'index ' || name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
		UNION ALL SELECT 'trigger ' || name FROM sqlite_master WHERE type = 'trigger'`)
	pgShape := shape(pg, `SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE connamespace = current_schema()::regnamespace)
		UNION SELECT 'trigger ' || trigger_name FROM information_schema.triggers WHERE trigger_schema = current_schema()`)
	if strings.Join(liteShape, "\n") != strings.Join(pgShape, "\n") {
		t.Fatalf("schemas differ\nsqlite:\n%s\npostgres:\n%s", strings.Join(liteShape, "\n"), strings.Join(pgShape, "\n"))
	}
}
