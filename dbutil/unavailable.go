package dbutil

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// SQLite's primary result codes that mean the database can't be written
// now, though the statement was fine: it is busy, the disk is full, or an
// I/O or file error.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)

// Unavailable reports whether err says the database could not be reached
// or could not take the write (a connection refused or cut, a server
// restarting or out of resources, a full disk), as opposed to a statement
// it refused. Such a failure passes: what met it may be tried again once
// the database answers. Only the drivers' own errors count: a model
// provider's dropped connection (a bare network error, an unexpected EOF)
// is never taken for the database's, nor is a cancelled or expired context.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),  // insufficient resources (disk full, too many connections)
			strings.HasPrefix(pe.Code, "57P"), // the server shutting down, or not yet taking connections
			strings.HasPrefix(pe.Code, "58"):  // system error (I/O)
			return true
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked, sqliteIOErr, sqliteFull, sqliteCantOpen:
			return true
		}
		return false
	}
	// pgconn's connection-level errors (a connection that could not be
	// made, or died under a statement: "conn closed", "failed to receive
	// message") are the ones that say whether a retry is safe.
	var ce *pgconn.ConnectError
	var pgconnErr interface{ SafeToRetry() bool }
	return errors.As(err, &ce) || errors.As(err, &pgconnErr) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}
