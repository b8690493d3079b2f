package dbutil

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/secret"
)

// Defaults of the database section, and of Options where they are left
// zero.
const (
	DefaultURL            = "data/parley.db"
	DefaultSynchronous    = "full"
	DefaultBusyTimeout    = 5 * time.Second
	DefaultMaxConns       = 10
	DefaultMinFreeMB      = 100
	DefaultHistoryCacheMB = 16
)

// Config is the database section of parley's config: which database
// holds the messages, and how each engine is tuned.
type Config struct {
	// URL is a postgres:// or postgresql:// URL for PostgreSQL; anything else
	// is a SQLite file path, optionally prefixed with "file:" or "sqlite:".
	URL secret.DSN `yaml:"url"`
	// HistoryCacheMB bounds, in MiB, the recent histories kept in memory,
	// so a turn reads one row of its session instead of its messages
	// (0 turns it off).
	HistoryCacheMB int            `yaml:"history_cache_mb"`
	SQLite         SQLiteConfig   `yaml:"sqlite"`
	Postgres       PostgresConfig `yaml:"postgres"`
}

// SQLiteConfig tunes the SQLite engine.
type SQLiteConfig struct {
	// Synchronous is "full" or "normal". FULL fsyncs every commit, so an
	// acknowledged message survives power loss. NORMAL (in WAL mode) is
	// faster, but the last commits can be lost on power loss; never on a
	// process crash.
	Synchronous string `yaml:"synchronous"`
	// BusyTimeout is how long a writer waits for a lock before giving up.
	BusyTimeout section.Duration `yaml:"busy_timeout"`
	// MinFreeMB is the free space, in MiB, the database's filesystem must
	// keep for /readyz to say ready.
	MinFreeMB int `yaml:"min_free_mb"`
}

// PostgresConfig tunes the PostgreSQL engine.
type PostgresConfig struct {
	MaxConns int `yaml:"max_conns"`
}

// Engine returns "postgres" for a postgres:// or postgresql:// URL and
// "sqlite" otherwise (validation rejects URLs that are neither).
func (d Config) Engine() string {
	if t, err := ParseURL(string(d.URL)); err == nil && t.Dialect == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// SQLitePath returns the SQLite file path: the URL without a "file:" or
// "sqlite:" prefix and query. It is "" for PostgreSQL or an invalid URL.
func (d Config) SQLitePath() string {
	t, err := ParseURL(string(d.URL))
	if err != nil {
		return ""
	}
	return t.Path
}

// SetDefaults fills in the section's absent settings.
func (d *Config) SetDefaults(set section.Set) {
	if strings.TrimSpace(string(d.URL)) == "" {
		d.URL = DefaultURL
	}
	d.SQLite.Synchronous = section.Normalize(d.SQLite.Synchronous, DefaultSynchronous)
	section.Default(&d.SQLite.BusyTimeout, set, "sqlite.busy_timeout", section.Duration(DefaultBusyTimeout))
	section.Default(&d.Postgres.MaxConns, set, "postgres.max_conns", DefaultMaxConns)
	section.Default(&d.SQLite.MinFreeMB, set, "sqlite.min_free_mb", DefaultMinFreeMB)
	section.Default(&d.HistoryCacheMB, set, "history_cache_mb", DefaultHistoryCacheMB)
}

// Check reports the section's problems.
func (d Config) Check(r section.Reporter) {
	raw := strings.TrimSpace(d.URL.Reveal())
	if _, err := ParseURL(raw); err != nil {
		msg := strings.TrimPrefix(err.Error(), "database.url ")
		if _, perr := url.Parse(raw); perr != nil && d.Engine() == "sqlite" && strings.Contains(strings.ToLower(raw), "postgres") {
			msg = "not a valid PostgreSQL URL: " + describeURLError(perr) +
				`; use postgres://user:password@host:5432/dbname, with special characters in the password %-escaped`
		}
		r.Add("url", msg)
	}

	switch d.SQLite.Synchronous {
	case "full", "normal":
	default:
		r.Add("sqlite.synchronous", fmt.Sprintf(`%q is not allowed; use "full" (an acknowledged message survives power loss) `+
			`or "normal" (faster, but the last commits can be lost on power loss)`, d.SQLite.Synchronous))
	}
	if d.SQLite.BusyTimeout <= 0 {
		r.Add("sqlite.busy_timeout", fmt.Sprintf(`%s is not allowed; use a duration above 0 such as "5s"`, d.SQLite.BusyTimeout))
	}
	if n := d.HistoryCacheMB; n < 0 || n > 4096 {
		r.Add("history_cache_mb", fmt.Sprintf("%d is out of range; use 0-4096 (0 keeps no history in memory)", n))
	}
	if d.SQLite.MinFreeMB < 0 {
		r.Add("sqlite.min_free_mb", fmt.Sprintf("%d is below 0; use 0 to turn the check off", d.SQLite.MinFreeMB))
	}
	if n := d.Postgres.MaxConns; n < 1 || n > 1000 {
		r.Add("postgres.max_conns", fmt.Sprintf("%d is out of range; use 1-1000", n))
	}
}

// describeURLError says what is wrong with a URL without quoting it: net/url
// errors include the whole URL, and an escape error a piece of the password.
func describeURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return `a "%" is not followed by two hex digits (write a literal % as %25)`
	}
	var he url.InvalidHostError
	if errors.As(err, &he) {
		return "invalid character in the host name"
	}
	msg := err.Error()
	if strings.Contains(msg, "port") {
		return "invalid port"
	}
	if strings.Contains(msg, "userinfo") {
		return "invalid user name or password (%-escape special characters)"
	}
	return "it does not parse"
}
