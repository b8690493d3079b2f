package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/dbutil"
)

// Defaults of the database, http and log sections.
const (
	DefaultDatabaseURL      = "data/parley.db"
	DefaultSynchronous      = "full"
	DefaultBusyTimeout      = 5 * time.Second
	DefaultPostgresMaxConns = 10
	DefaultMinFreeMB        = 100
	DefaultHistoryCacheMB   = 8
	DefaultListen           = "127.0.0.1:8080"
	DefaultEventLogMB       = 4
	DefaultMaxTitleChars    = 200
	DefaultMaxMetadataBytes = 16 << 10
	DefaultLogLevel         = "info"
	DefaultLogFormat        = "text"
)

// Database selects and tunes the message store.
type Database struct {
	// URL is a postgres:// or postgresql:// URL for PostgreSQL; anything else
	// is a SQLite file path, optionally prefixed with "file:" or "sqlite:".
	URL DSN `yaml:"url"`
	// HistoryCacheMB bounds, in MiB, the recent histories kept in memory,
	// so a turn reads one row of its session instead of its messages
	// (0 turns it off).
	HistoryCacheMB int      `yaml:"history_cache_mb"`
	SQLite         SQLite   `yaml:"sqlite"`
	Postgres       Postgres `yaml:"postgres"`
}

// SQLite tunes the SQLite engine.
type SQLite struct {
	// Synchronous is "full" or "normal". FULL fsyncs every commit, so an
	// acknowledged message survives power loss. NORMAL (in WAL mode) is
	// faster, but the last commits can be lost on power loss; never on a
	// process crash.
	Synchronous string `yaml:"synchronous"`
	// BusyTimeout is how long a writer waits for a lock before giving up.
	BusyTimeout Duration `yaml:"busy_timeout"`
	// MinFreeMB is the free space, in MiB, the database's filesystem must
	// keep for /readyz to say ready.
	MinFreeMB int `yaml:"min_free_mb"`
}

// Postgres tunes the PostgreSQL engine.
type Postgres struct {
	MaxConns int `yaml:"max_conns"`
}

// HTTP configures the API and webhook listener.
type HTTP struct {
	Listen string `yaml:"listen"`
	// Tokens are the admin bearer tokens of the /v1 API; with none, the API
	// answers every request with 401.
	Tokens []Secret `yaml:"tokens"`
	// OpsListen, when set, serves /healthz, /readyz and /metrics on this
	// address instead of Listen (which keeps the API and webhooks).
	OpsListen string `yaml:"ops_listen"`
	// CallbackSecret signs the replies POSTed to an API session's
	// webhook_url; with none, sessions can't have one.
	CallbackSecret Secret `yaml:"callback_secret"`
	// EventLogMB bounds, in MiB, the run events the API keeps in memory for
	// its streams; past it the runs that finished first are dropped (a
	// replay of one is rebuilt from the database).
	EventLogMB int `yaml:"event_log_mb"`
	// MaxTitleChars and MaxMetadataBytes cap an API session's title (in
	// characters) and its metadata (in bytes of JSON).
	MaxTitleChars    int `yaml:"max_title_chars"`
	MaxMetadataBytes int `yaml:"max_metadata_bytes"`
	// CallbackAllow lists the IP addresses, CIDR networks and host names
	// reply callbacks may reach although they are loopback, link-local,
	// private or reserved; by default callbacks reach only public
	// addresses.
	CallbackAllow []string `yaml:"callback_allow"`
	// MCP serves parley as an MCP server at /mcp, to requests with one of
	// Tokens; true unless set to false.
	MCP bool `yaml:"mcp"`
}

// Log configures the daemon's logger.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // text or json
}

// Engine returns "postgres" for a postgres:// or postgresql:// URL and
// "sqlite" otherwise (validation rejects URLs that are neither).
func (d Database) Engine() string {
	if t, err := dbutil.ParseURL(string(d.URL)); err == nil && t.Dialect == dbutil.Postgres {
		return "postgres"
	}
	return "sqlite"
}

// SQLitePath returns the SQLite file path: the URL without a "file:" or
// "sqlite:" prefix and query. It is "" for PostgreSQL or an invalid URL.
func (d Database) SQLitePath() string {
	t, err := dbutil.ParseURL(string(d.URL))
	if err != nil {
		return ""
	}
	return t.Path
}

// SetDefaults fills in the database section's absent settings.
func (d *Database) SetDefaults(set section.Set) {
	if strings.TrimSpace(string(d.URL)) == "" {
		d.URL = DefaultDatabaseURL
	}
	d.SQLite.Synchronous = section.Normalize(d.SQLite.Synchronous, DefaultSynchronous)
	section.Default(&d.SQLite.BusyTimeout, set, "sqlite.busy_timeout", Duration(DefaultBusyTimeout))
	section.Default(&d.Postgres.MaxConns, set, "postgres.max_conns", DefaultPostgresMaxConns)
	section.Default(&d.SQLite.MinFreeMB, set, "sqlite.min_free_mb", DefaultMinFreeMB)
	section.Default(&d.HistoryCacheMB, set, "history_cache_mb", DefaultHistoryCacheMB)
}

// Check reports the database section's problems.
func (d Database) Check(r section.Reporter) {
	raw := strings.TrimSpace(d.URL.Reveal())
	if _, err := dbutil.ParseURL(raw); err != nil {
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

// SetDefaults fills in the http section's absent settings.
func (h *HTTP) SetDefaults(set section.Set) {
	if strings.TrimSpace(h.Listen) == "" {
		h.Listen = DefaultListen
	}
	section.Default(&h.EventLogMB, set, "event_log_mb", DefaultEventLogMB)
	section.Default(&h.MaxTitleChars, set, "max_title_chars", DefaultMaxTitleChars)
	section.Default(&h.MaxMetadataBytes, set, "max_metadata_bytes", DefaultMaxMetadataBytes)
	if len(h.Tokens) == 0 {
		h.Tokens = nil // "tokens: []" is the same as leaving it out
	}
	if len(h.CallbackAllow) == 0 {
		h.CallbackAllow = nil
	}
	if !set.Has("mcp") {
		h.MCP = true
	}
}

// Check reports the http section's problems.
func (h HTTP) Check(r section.Reporter) {
	for i, t := range h.Tokens {
		if msg := weakSecret(t.Reveal(), "PARLEY_API_TOKEN"); msg != "" {
			r.Add(fmt.Sprintf("tokens[%d]", i), msg)
		}
	}
	if cs := h.CallbackSecret.Reveal(); cs != "" {
		if msg := weakSecret(cs, "PARLEY_CALLBACK_SECRET"); msg != "" {
			r.Add("callback_secret", msg+`, or leave it empty to turn reply callbacks off`)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"event_log_mb", h.EventLogMB}, {"max_title_chars", h.MaxTitleChars}, {"max_metadata_bytes", h.MaxMetadataBytes}} {
		if n.v < 1 {
			r.Add(n.key, fmt.Sprintf("%d is below 1; leave it out for the default", n.v))
		}
	}
	for i, e := range h.CallbackAllow {
		if !callbackAllowEntry(e) {
			r.Add(fmt.Sprintf("callback_allow[%d]", i), fmt.Sprintf(`%q is not an IP address, a CIDR network or a host name; use such as "10.0.0.0/8", "127.0.0.1" or "hooks.internal"`, e))
		}
	}
	const use = `; use host:port such as "127.0.0.1:8080", "[::1]:8080" or ":8080"`
	if h.OpsListen != "" {
		if _, _, err := net.SplitHostPort(h.OpsListen); err != nil {
			r.Add("ops_listen", fmt.Sprintf("%q is not host:port%s, or leave it empty to serve health and metrics on http.listen", h.OpsListen, use))
		}
	}
	_, port, err := net.SplitHostPort(h.Listen)
	if err != nil {
		r.Add("listen", fmt.Sprintf("%q is not host:port%s", h.Listen, use))
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		r.Add("listen", fmt.Sprintf("port %q is not a number from 0 to 65535%s", port, use))
	}
}

// SetDefaults fills in the log section's absent settings.
func (l *Log) SetDefaults(section.Set) {
	l.Level = section.Normalize(l.Level, DefaultLogLevel)
	l.Format = section.Normalize(l.Format, DefaultLogFormat)
}

// Check reports the log section's problems.
func (l Log) Check(r section.Reporter) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		r.Add("level", fmt.Sprintf("%q is not a log level; use debug, info, warn or error", l.Level))
	}
	switch l.Format {
	case "text", "json":
	default:
		r.Add("format", fmt.Sprintf("%q is not a log format; use text or json", l.Format))
	}
}
