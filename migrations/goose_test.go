package migrations_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/migrations"
)

// gooseProvider is a stock goose provider (goose's own Postgres session
// locker, as the parley builds before the hand-written runner had) on the
// same SQL files.
func gooseProvider(t *testing.T, db *dbutil.DB) *goose.Provider {
	t.Helper()
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	dialect := goose.DialectSQLite3
	if db.Dialect == dbutil.Postgres {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, db.Writer(), os.DirFS(string(db.Dialect)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// versionRows lists the version table's rows, oldest first.
func versionRows(t *testing.T, db *dbutil.DB) []string {
	t.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), "SELECT version_id, is_applied FROM goose_db_version ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v int64
		var applied bool
		if err := rows.Scan(&v, &applied); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(v, applied))
	}
	return out
}

// A database migrated part of the way by a stock goose provider upgrades in
// place, to the schema and version rows goose would have left; and goose
// reads the result as current.
func TestUpgradeFromGooseBuild(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			byGoose := e.Raw(t)
			if _, err := gooseProvider(t, byGoose).Up(ctx); err != nil {
				t.Fatal(err)
			}
			wantSchema, wantRows := dbtest.Schema(t, byGoose), versionRows(t, byGoose)

			r, err := migrations.Provider(byGoose, nil)
			if err != nil {
				t.Fatal(err)
			}
			sources := r.Sources()
			for _, cut := range []int{0, len(sources) / 2, len(sources) - 2} {
				from := sources[cut].Version
				t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
					db := e.Raw(t)
					if _, err := gooseProvider(t, db).UpTo(ctx, from); err != nil {
						t.Fatal(err)
					}
					if err := migrations.Check(ctx, db); err == nil {
						t.Fatal("Check passed a database goose left behind")
					}
					n, err := migrations.Up(ctx, db, nil)
					if err != nil || n != len(sources)-cut-1 {
						t.Fatalf("Up applied %d (%v), want %d", n, err, len(sources)-cut-1)
					}
					if got := dbtest.Schema(t, db); got != wantSchema {
						t.Fatalf("schema after the upgrade differs from goose's fresh install\ngot:\n%s\nwant:\n%s", got, wantSchema)
					}
					if got := versionRows(t, db); !slices.Equal(got, wantRows) {
						t.Fatalf("version rows %v, want goose's %v", got, wantRows)
					}
					assertGooseSeesCurrent(t, db)
				})
			}
		})
	}
}

// A fresh install by this runner is what a stock goose's fresh install is,
// so a replica running any earlier release works on it too.
func TestFreshInstallIsGoosesFreshInstall(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			byGoose, ours := e.Raw(t), e.Raw(t)
			if _, err := gooseProvider(t, byGoose).Up(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := migrations.Up(ctx, ours, nil); err != nil {
				t.Fatal(err)
			}
			if a, b := dbtest.Schema(t, ours), dbtest.Schema(t, byGoose); a != b {
				t.Fatalf("schemas differ\nours:\n%s\ngoose's:\n%s", a, b)
			}
			if a, b := versionRows(t, ours), versionRows(t, byGoose); !slices.Equal(a, b) {
				t.Fatalf("version rows %v, goose's %v", a, b)
			}
			assertGooseSeesCurrent(t, ours)
		})
	}
}

func assertGooseSeesCurrent(t *testing.T, db *dbutil.DB) {
	t.Helper()
	ctx := context.Background()
	p := gooseProvider(t, db)
	current, target, err := p.GetVersions(ctx)
	if err != nil || current != target {
		t.Fatalf("goose reads version %d of %d (%v)", current, target, err)
	}
	if pending, err := p.HasPending(ctx); err != nil || pending {
		t.Fatalf("goose sees pending migrations: %v %v", pending, err)
	}
	if res, err := p.Up(ctx); err != nil || len(res) != 0 {
		t.Fatalf("goose applied %d more (%v)", len(res), err)
	}
}

// The runner waits on goose's advisory lock, so a replica running an
// earlier release and one running this one never migrate at once.
func TestUpWaitsForGoosesLock(t *testing.T) {
	dbtest.RequirePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := dbtest.RawPostgres(t)
	holder, err := db.Writer().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		t.Fatal(err)
	}
	if err := locker.SessionLock(ctx, holder); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := migrations.Up(ctx, db, nil); done <- err }()
	// Wait until Up is blocked on the advisory lock.
	for {
		var waiting bool
		err := db.Reader().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND NOT l.granted AND a.datname = current_database())`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Up returned (%v) while goose held the lock", err)
		case <-ctx.Done():
			t.Fatal("Up never waited on the lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if v, err := migrations.Version(ctx, db); err != nil || v != 0 {
		t.Fatalf("the database moved to %d (%v) while goose held the lock", v, err)
	}
	if err := locker.SessionUnlock(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
}

// Two handles migrating one database at once, as two replicas starting
// together: both succeed and each migration is applied once.
func TestConcurrentUp(t *testing.T) {
	dbtest.RequirePostgres(t)
	ctx := context.Background()
	url := dbtest.PostgresURL(t)
	open := func() *dbutil.DB {
		db, err := dbutil.Open(ctx, dbutil.Options{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	errs := make(chan error, 2)
	for _, db := range []*dbutil.DB{a, b} {
		go func() { _, err := migrations.Up(ctx, db, nil); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	count, _ := migrations.Count(dbutil.Postgres)
	if rows := versionRows(t, a); len(rows) != count+1 {
		t.Fatalf("%d version rows, want version 0 and %d migrations once each: %v", len(rows), count, rows)
	}
}
