package dbutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// ErrNoWAL means the database has no write-ahead log of SQLite's to count.
var ErrNoWAL = errors.New("WAL frames are counted on SQLite only")

// WALFrames is how many pages SQLite's writer connection has written to
// the write-ahead log since it opened: one frame per page each commit
// changed, however many transactions that commit carried. `parley bench`
// divides it by the turns. It waits for the writer's batch under way, if
// any; ErrNoWAL on PostgreSQL.
func (d *DB) WALFrames(ctx context.Context) (int64, error) {
	if d.Dialect != SQLite {
		return 0, ErrNoWAL
	}
	conn, err := d.write.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("count WAL frames: %w", err)
	}
	defer conn.Close()
	frames, err := logPages(conn)
	if err != nil {
		return 0, fmt.Errorf("count WAL frames: %w", err)
	}
	return frames, nil
}

// logPages is how many pages conn, a connection of SQLite's, has written
// to the write-ahead log since it opened: SQLITE_DBSTATUS_CACHE_WRITE,
// which in WAL mode counts the pages written as frames (pagerWalFrames).
func logPages(conn *sql.Conn) (int64, error) {
	var frames int64
	err := conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("the SQLite driver (%T) reports no page counts", dc)
		}
		n, _, err := st.Status(sqlite.DBStatusCacheWrite, false)
		frames = int64(n)
		return err
	})
	return frames, err
}
