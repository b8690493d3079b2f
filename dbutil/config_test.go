package dbutil

import (
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/config/section"
)

// The database section: SQLite under data/ by default, and each bad value
// a problem naming its key, never quoting a password.
func TestConfigCheck(t *testing.T) {
	var c Config
	c.SetDefaults(section.Set{})
	var l section.List
	c.Check(&l)
	if c.URL.Reveal() != DefaultURL || c.Engine() != "sqlite" || c.SQLite.BusyTimeout.Std() != DefaultBusyTimeout ||
		c.Postgres.MaxConns != DefaultMaxConns || len(l) != 0 {
		t.Fatalf("defaults %+v, problems %v", c, l)
	}

	bad := Config{URL: "postgres://bob:h7q2@zk9w@db/parley", HistoryCacheMB: -1,
		SQLite: SQLiteConfig{Synchronous: "off", MinFreeMB: -1}, Postgres: PostgresConfig{MaxConns: 0}}
	l = nil
	bad.Check(&l)
	want := []string{"url", "sqlite.synchronous", "sqlite.busy_timeout", "history_cache_mb", "sqlite.min_free_mb", "postgres.max_conns"}
	if !slices.Equal(l.Keys(), want) {
		t.Fatalf("problems at %v, want %v: %v", l.Keys(), want, l)
	}
	for _, p := range l {
		if p.Key == "url" && (strings.Contains(p.Message, "h7q2") || strings.Contains(p.Message, "zk9w")) {
			t.Errorf("the url's problem shows the password: %s", p.Message)
		}
	}

	// An explicit 0 is the file's.
	c = Config{}
	c.SetDefaults(section.NewSet("database", func(k string) bool { return k == "database.history_cache_mb" }))
	if c.HistoryCacheMB != 0 || c.SQLite.MinFreeMB != DefaultMinFreeMB {
		t.Errorf("history_cache_mb %d (want 0), min_free_mb %d", c.HistoryCacheMB, c.SQLite.MinFreeMB)
	}
}
