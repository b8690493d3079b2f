// Package sessionsql gives each session a SQL database of its own: an
// isolated SQLite database the agent reads and writes with the sql_exec and
// sql_query tools. The database is kept whole in the parley database (so
// every replica reads the same one), deleted with its session and copied to
// a branch. Each call opens it in a private temporary file, within limits:
// its size, the rows a query returns, the time a call may take, and no
// statement that reaches past the database (ATTACH, PRAGMA, VACUUM,
// extensions).
package sessionsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// The limits when the config sets none: the config's (sessions.sql).
const (
	DefaultMaxBytes = config.DefaultSQLMaxBytes
	DefaultMaxRows  = config.DefaultSQLMaxRows
	DefaultTimeout  = config.DefaultSQLStatementTimeout
)

// pageSize is the databases' page size: MaxBytes counts pages of it.
const pageSize = 4096

// Limits bound each session's database.
type Limits struct {
	// MaxBytes caps the database's size.
	MaxBytes int64
	// MaxRows caps the rows a query returns (the rest are counted, not
	// shown).
	MaxRows int
	// Timeout bounds one call: a statement still running then is stopped.
	Timeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultMaxRows
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

const (
	readQuery   = `SELECT data FROM session_sql WHERE session_id = $1`
	sizeQuery   = `SELECT size FROM session_sql WHERE session_id = $1`
	upsertQuery = `INSERT INTO session_sql (session_id, size, data, updated_at) VALUES ($1, $2, $3, $4)
	ON CONFLICT (session_id) DO UPDATE SET size = excluded.size, data = excluded.data, updated_at = excluded.updated_at`
	copyQuery = `INSERT INTO session_sql (session_id, size, data, updated_at)
	SELECT $2, size, data, updated_at FROM session_sql WHERE session_id = $1
	ON CONFLICT (session_id) DO NOTHING`
	existsQuery = `SELECT 1 FROM sessions WHERE id = $1`
)

// ErrNotFound means the session does not exist.
var ErrNotFound = errors.New("session not found")

// Store keeps the sessions' databases. It is safe for concurrent use: the
// calls of one session (a turn's tools may run at once) take turns.
type Store struct {
	db     *dbutil.DB
	limits atomic.Pointer[Limits]
	locks  sync.Map // sessions.ID -> *sync.Mutex
	now    func() time.Time
}

// NewStore returns the store on db with limits (zero fields: defaults).
func NewStore(db *dbutil.DB, limits Limits) *Store {
	s := &Store{db: db, now: time.Now}
	s.SetLimits(limits)
	return s
}

// SetLimits sets the limits from now on (zero fields: defaults).
func (s *Store) SetLimits(l Limits) {
	l = l.withDefaults()
	s.limits.Store(&l)
}

// Limits are the limits in force.
func (s *Store) Limits() Limits { return *s.limits.Load() }

func (s *Store) lock(id sessions.ID) func() {
	m, _ := s.locks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Size is the session's database's size in bytes, 0 when it has none.
func (s *Store) Size(ctx context.Context, id sessions.ID) (int64, error) {
	var n int64
	err := s.db.Read().QueryRowContext(ctx, sizeQuery, string(id)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// CopyIn gives session to a copy of from's database, in q (the caller's
// transaction: a branch gets it as it is made). A database to already has
// stays.
func CopyIn(ctx context.Context, q dbutil.Querier, from, to sessions.ID) error {
	if _, err := q.ExecContext(ctx, copyQuery, string(from), string(to)); err != nil {
		return fmt.Errorf("copy the SQL database of session %s to %s: %w", from, to, err)
	}
	return nil
}

// open runs fn on the session's database, opened in a private temporary
// file within the limits; write stores what fn changed back, when it
// returns no error.
func (s *Store) open(ctx context.Context, id sessions.ID, write bool, fn func(ctx context.Context, conn *sql.Conn) error) error {
	unlock := s.lock(id)
	defer unlock()
	lim := s.Limits()
	var data []byte
	switch err := s.db.Read().QueryRowContext(ctx, readQuery, string(id)).Scan(&data); {
	case errors.Is(err, sql.ErrNoRows):
		var one int
		if err := s.db.Read().QueryRowContext(ctx, existsQuery, string(id)).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		} else if err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("read the SQL database of session %s: %w", id, err)
	}
	dir, err := os.MkdirTemp("", "parley-sql-")
	if err != nil {
		return fmt.Errorf("a temporary folder for session %s's SQL database: %w", id, err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "session.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("a temporary file for session %s's SQL database: %w", id, err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	cctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errTooLong)
	defer cancel()
	conn, err := db.Conn(cctx)
	if err != nil {
		return err
	}
	// The limits, set before anything the model wrote runs: the model's
	// statements can't change them (no PRAGMA passes check).
	setup := []string{
		fmt.Sprintf("PRAGMA page_size = %d", pageSize),
		fmt.Sprintf("PRAGMA max_page_count = %d", max(lim.MaxBytes/pageSize, 1)),
		"PRAGMA trusted_schema = OFF",
		"PRAGMA journal_mode = DELETE",
	}
	if !write {
		setup = append(setup, "PRAGMA query_only = ON")
	}
	for _, p := range setup {
		if _, err := conn.ExecContext(cctx, p); err != nil {
			conn.Close()
			return fmt.Errorf("open session %s's SQL database: %w", id, err)
		}
	}
	err = fn(cctx, conn)
	conn.Close()
	if err != nil {
		return s.explain(cctx, err, lim)
	}
	if !write {
		return nil
	}
	if err := db.Close(); err != nil {
		return err
	}
	out, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if int64(len(out)) > lim.MaxBytes {
		return fmt.Errorf("%w (%d bytes, over the %d of sessions.sql.max_bytes): delete rows or drop tables", ErrFull, len(out), lim.MaxBytes)
	}
	if _, err := s.db.Write().ExecContext(ctx, upsertQuery, string(id), int64(len(out)), out, dbutil.Millis(s.now())); err != nil {
		if errors.Is(err, sql.ErrNoRows) || strings.Contains(err.Error(), "FOREIGN KEY") || strings.Contains(err.Error(), "foreign key") {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return fmt.Errorf("store session %s's SQL database: %w", id, err)
	}
	return nil
}

var errTooLong = errors.New("the statement ran too long")

// ErrFull means the database reached its size limit.
var ErrFull = errors.New("this conversation's SQL database is full")

// ErrTimeout means a call ran past its time limit.
var ErrTimeout = errors.New("the statement ran past the time limit")

// explain turns what SQLite said into an error that names the limit hit.
func (s *Store) explain(ctx context.Context, err error, lim Limits) error {
	msg := err.Error()
	switch {
	case errors.Is(context.Cause(ctx), errTooLong), strings.Contains(msg, "interrupted"):
		return fmt.Errorf("%w of %s (sessions.sql.statement_timeout) and was stopped; nothing it did was kept; make it do less, such as with a LIMIT", ErrTimeout, lim.Timeout)
	case strings.Contains(msg, "database or disk is full"), strings.Contains(msg, "SQLITE_FULL"):
		return fmt.Errorf("%w (%d bytes, sessions.sql.max_bytes); nothing the call did was kept; delete rows or drop tables first", ErrFull, lim.MaxBytes)
	case strings.Contains(msg, "readonly database"), strings.Contains(msg, "query_only"):
		return fmt.Errorf("sql_query only reads; change the database with sql_exec")
	}
	return err
}
