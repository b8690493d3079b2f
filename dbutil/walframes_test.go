package dbutil_test

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// WALFrames counts the pages commits write to SQLite's log: a commit that
// changes one table's page writes at least a frame; PostgreSQL has none.
func TestWALFramesCountsCommittedPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		before, err := db.WALFrames(ctx)
		if db.Dialect == dbutil.Postgres {
			if !errors.Is(err, dbutil.ErrNoWAL) {
				t.Fatalf("WALFrames on PostgreSQL: %v, want ErrNoWAL", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Write().ExecContext(ctx, "CREATE TABLE wal_probe (x INTEGER)"); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := db.Write().ExecContext(ctx, "INSERT INTO wal_probe VALUES (1)"); err != nil {
				t.Fatal(err)
			}
		}
		after, err := db.WALFrames(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The table's creation writes the schema page and its root; each
		// insert commits its page again.
		if after-before < 4 {
			t.Fatalf("%d frames for a table and three commits, want at least 4", after-before)
		}
	})
}
