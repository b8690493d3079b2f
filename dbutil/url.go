package dbutil

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Target is a parsed database.url.
type Target struct {
	Dialect Dialect
	// Path is the SQLite file path; URL is the PostgreSQL URL.
	Path, URL string
}

// ParseURL reads database.url: a postgres:// or postgresql:// URL, or a
// SQLite file path, optionally written "file:PATH" or "sqlite:PATH". Anything
// that looks like another scheme or a key=value connection string is an
// error rather than a file name, so a typo never opens an empty database
// somewhere. Errors never quote the URL, which may hold a password.
func ParseURL(raw string) (Target, error) {
	s := strings.TrimSpace(raw)
	lower := strings.ToLower(s)
	const forms = `use a postgres://user:password@host:5432/dbname URL or a SQLite file path such as data/parley.db`
	switch {
	case s == "":
		return Target{}, errors.New("database.url is empty; " + forms)
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			return Target{}, errors.New("database.url is not a valid postgres URL (%-escape special characters in the password); " + forms)
		}
		// The driver ends the user and password at the first "@": the rest
		// of a password holding another would become the host or the
		// database name, and show in every connection error.
		if _, rest, _ := strings.Cut(s, "://"); strings.Count(strings.SplitN(rest, "?", 2)[0], "@") > 1 {
			return Target{}, errors.New("database.url has more than one @ before its host; %-escape an @ in the password as %40")
		}
		// What the driver refuses is refused here, by config check too; its
		// error may quote the URL, so it is not repeated.
		scheme, rest, _ := strings.Cut(s, "://")
		if _, err := pgconn.ParseConfig(strings.ToLower(scheme) + "://" + rest); err != nil {
			return Target{}, errors.New("database.url is not a postgres URL the driver accepts (check the port, sslmode and other parameters, and %-escape special characters in the password); " + forms)
		}
		return Target{Dialect: Postgres, URL: s}, nil
	}
	path := s
	for _, prefix := range []string{"sqlite:", "file:"} {
		if strings.HasPrefix(lower, prefix) {
			path = strings.TrimPrefix(s[len(prefix):], "//")
			path, _, _ = strings.Cut(path, "?")
			break
		}
	}
	if i := strings.Index(path, "://"); i >= 0 {
		scheme := path[:i]
		if strings.ContainsAny(scheme, "@:/ ") || len(scheme) > 20 {
			scheme = "?"
		}
		return Target{}, fmt.Errorf("database.url has the scheme %q, which parley does not support; %s", scheme, forms)
	}
	if strings.Contains(path, "=") && (strings.Contains(path, " ") || looksLikeKeyValue(path)) {
		return Target{}, errors.New("database.url looks like a key=value connection string; " + forms)
	}
	if path == "" {
		return Target{}, errors.New("database.url has no file path; " + forms)
	}
	if path == ":memory:" || strings.Contains(lower, "mode=memory") {
		return Target{}, errors.New("database.url names an in-memory SQLite database, which would lose every message on exit; use a file path such as data/parley.db")
	}
	return Target{Dialect: SQLite, Path: path}, nil
}

func looksLikeKeyValue(s string) bool {
	for _, k := range []string{"host=", "user=", "dbname=", "password=", "port=", "sslmode="} {
		if strings.HasPrefix(strings.ToLower(s), k) {
			return true
		}
	}
	return false
}
