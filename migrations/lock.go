package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pressly/goose/v3/lock"
)

const (
	lockQuery   = `SELECT pg_advisory_lock($1)`
	unlockQuery = `SELECT pg_advisory_unlock($1)`
	// lockWait bounds the wait for another replica's migration, as goose's
	// own locker's 60 tries 5 s apart do.
	lockWait = 5 * time.Minute
)

// waitingLocker holds goose's advisory lock (lock.DefaultLockID) for a
// migration, as goose's Postgres session locker does, but waits on it in
// PostgreSQL instead of trying every 5 s: a replica starting beside one
// that migrates goes on the moment that one is done.
type waitingLocker struct{}

var _ lock.SessionLocker = waitingLocker{}

func (waitingLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	// A migration waits for another's longer than a connection's own
	// lock_timeout (dbutil's StuckAfter) allows: lockWait bounds it instead.
	if _, err := conn.ExecContext(ctx, "SET lock_timeout = 0"); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if _, err := conn.ExecContext(ctx, lockQuery, lock.DefaultLockID); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "RESET lock_timeout")
		return fmt.Errorf("take the migration lock (another parley may be migrating this database; it waits up to %s): %w", lockWait, err)
	}
	return nil
}

func (waitingLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, rerr := conn.ExecContext(ctx, "RESET lock_timeout")
	if _, err := conn.ExecContext(ctx, unlockQuery, lock.DefaultLockID); err != nil {
		return fmt.Errorf("free the migration lock: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("free the migration lock: %w", rerr)
	}
	return nil
}
