package dbutil

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
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

// SQLite's primary result codes for a statement it refused: it undid the
// statement's changes and left the transaction as it was.
const (
	sqliteError      = 1
	sqliteTooBig     = 18
	sqliteConstraint = 19
	sqliteMismatch   = 20
	sqliteRange      = 25
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
	var syncErr *syncError
	if errors.Is(err, ErrLeaseLapsed) || errors.As(err, &syncErr) {
		return true
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
	var lost *connLost
	return errors.As(err, &ce) || errors.As(err, &pgconnErr) || errors.As(err, &lost) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// connLost marks a bare transport error (an unexpected EOF, a reset) that
// a statement or transaction of ours met: there it can only be the
// database's connection, which some driver paths report without a type of
// their own.
type connLost struct{ err error }

func (e *connLost) Error() string { return e.err.Error() }
func (e *connLost) Unwrap() error { return e.err }

// fromDB marks err, returned by a database call, as the database's when it
// is a bare transport error, so Unavailable knows it from a model
// provider's.
func fromDB(err error) error {
	if err == nil || Unavailable(err) {
		return err
	}
	var ne net.Error
	var ue *url.Error
	if (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne)) && !errors.As(err, &ue) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return &connLost{err}
	}
	return err
}
