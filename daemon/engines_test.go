package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// eachEngine runs fn once on a fresh SQLite file and once on a fresh
// PostgreSQL schema (skipped, saying how to enable it, without
// PARLEY_TEST_POSTGRES_URL), giving it the database URL to configure.
func eachEngine(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, filepath.Join(t.TempDir(), "data", "parley.db")) })
	t.Run("postgres", func(t *testing.T) { fn(t, dbtest.PostgresURL(t)) })
}

// testDaemonOn is testDaemon on the database at dbURL.
func testDaemonOn(tb testing.TB, dbURL, extra string, channels func(d *Daemon) map[adapters.ID]adapters.Adapter) (*Daemon, string, func()) {
	tb.Helper()
	return testDaemonAt(tb, writeConfigAt(tb, dbURL, extra), channels)
}

// writeConfigAt writes a config using the database at dbURL and returns
// its path.
func writeConfigAt(tb testing.TB, dbURL, extra string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte("database:\n  url: \""+dbURL+"\"\n"+extra), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
