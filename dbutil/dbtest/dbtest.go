// Package dbtest gives tests a fresh, real database: a temporary SQLite file,
// or a PostgreSQL schema of their own when PARLEY_TEST_POSTGRES_URL is set.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/migrations"
)

// EnvPostgres names the variable that enables the PostgreSQL tests.
const EnvPostgres = "PARLEY_TEST_POSTGRES_URL"

// SkipMessage says how to enable the PostgreSQL tests.
const SkipMessage = EnvPostgres + " is not set; run the PostgreSQL tests with " +
	EnvPostgres + "=postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Opener opens a fresh database for one test.
type Opener func(t testing.TB) *dbutil.DB

// Engine is a named way to open a fresh database.
type Engine struct {
	Name string
	Open Opener // migrated
	Raw  Opener // not migrated
}

// Engines lists SQLite, and PostgreSQL when it is configured. The Postgres
// entry skips the calling test with SkipMessage when it is not.
func Engines() []Engine {
	return []Engine{
		{Name: "sqlite", Open: SQLite, Raw: RawSQLite},
		{Name: "postgres", Open: Postgres, Raw: RawPostgres},
	}
}

// Each runs fn once per engine as a subtest.
func Each(t *testing.T, fn func(t *testing.T, open Opener)) {
	for _, e := range Engines() {
		t.Run(e.Name, func(t *testing.T) { fn(t, e.Open) })
	}
}

// RequirePostgres skips the test, with SkipMessage, unless the PostgreSQL
// tests are enabled. Call it at the top of a Postgres-only test so the skip
// is reported once rather than per subtest.
func RequirePostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvPostgres) == "" {
		t.Skip(SkipMessage)
	}
}

// SQLite opens a migrated database in a fresh temporary file.
func SQLite(t testing.TB) *dbutil.DB { return migrate(t, RawSQLite(t)) }

// Postgres opens a migrated database in a fresh schema.
func Postgres(t testing.TB) *dbutil.DB { return migrate(t, RawPostgres(t)) }

// RawSQLite opens an empty SQLite database in a fresh temporary file.
func RawSQLite(t testing.TB) *dbutil.DB {
	t.Helper()
	db, err := dbutil.Open(context.Background(), dbutil.Options{URL: t.TempDir() + "/parley.db"})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// RawPostgres opens an empty schema of its own on the server named by
// PARLEY_TEST_POSTGRES_URL and drops it when the test ends. It skips when
// the variable is unset and fails when the server can't be reached.
func RawPostgres(t testing.TB) *dbutil.DB {
	t.Helper()
	db, err := dbutil.Open(context.Background(), dbutil.Options{URL: PostgresURL(t), MaxConns: 20})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// PostgresURL makes an empty schema of its own on the server named by
// PARLEY_TEST_POSTGRES_URL, drops it when the test ends, and returns the
// URL that opens it (for a daemon's database.url). It skips and fails as
// RawPostgres does.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgres)
	if base == "" {
		t.Skip(SkipMessage)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("%s is set but PostgreSQL can't be reached: %v", EnvPostgres, err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "parley_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvPostgres, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return u.String()
}

func migrate(t testing.TB, db *dbutil.DB) *dbutil.DB {
	t.Helper()
	if _, err := migrations.Up(context.Background(), db, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// TwoHandles opens two handles on one fresh, migrated database of engine
// ("sqlite" or "postgres"), as two replicas have: two pools on one
// PostgreSQL schema, or two processes' handles on one SQLite file.
func TwoHandles(t testing.TB, engine string) (*dbutil.DB, *dbutil.DB) {
	t.Helper()
	ctx := context.Background()
	url := t.TempDir() + "/parley.db"
	if engine == "postgres" {
		url = PostgresURL(t)
	}
	open := func() *dbutil.DB {
		db, err := dbutil.Open(ctx, dbutil.Options{URL: url})
		if err != nil {
			t.Fatalf("open %s: %v", engine, err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a := open()
	if _, err := migrations.Up(ctx, a, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return a, open()
}

// EachTwoHandles runs fn once per engine with TwoHandles; PostgreSQL is
// skipped with the standard message when it is not configured.
func EachTwoHandles(t *testing.T, fn func(t *testing.T, a, b *dbutil.DB)) {
	for _, e := range Engines() {
		t.Run(e.Name, func(t *testing.T) {
			a, b := TwoHandles(t, e.Name)
			fn(t, a, b)
		})
	}
}

// CountReads counts db's reads (its Views) from now on, for tests that a
// poller leaves an idle database alone.
func CountReads(db *dbutil.DB) *atomic.Int64 {
	var reads atomic.Int64
	db.Observe(func(op dbutil.Op, _ time.Time, _ time.Duration) {
		if op == dbutil.OpRead {
			reads.Add(1)
		}
	})
	return &reads
}

// IdleReads waits for a poller's first passes to end (a first read, then
// reads still for 50 ms; within 2 s), then returns how many reads it makes
// over window: none, from a poller that leaves an idle database alone. On
// a loaded machine a poller's first pass can start after the first 50 ms,
// and its reads would then fall in the window.
func IdleReads(reads *atomic.Int64, window time.Duration) int64 {
	deadline := time.Now().Add(2 * time.Second)
	n := reads.Load()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		m := reads.Load()
		if m == n && m > 0 {
			break
		}
		n = m
	}
	time.Sleep(window)
	return reads.Load() - n
}
