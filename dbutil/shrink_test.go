package dbutil

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// Shrinking closes the idle readers and the idle writer, and leaves the
// database working: the writer opens again as it was configured, and a
// cached statement is prepared again on it.
func TestShrinkMemory(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Options{URL: filepath.Join(t.TempDir(), "shrink.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Tx(ctx, func(q Querier) error {
		if _, err := q.ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
			return err
		}
		for i := range 100 {
			if _, err := q.ExecContext(ctx, "INSERT INTO t VALUES (?)", fmt.Sprint(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := db.View(ctx, func(q Querier) error {
			return q.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count() != 100 {
		t.Fatal("before shrinking")
	}
	if db.Reader().Stats().Idle == 0 {
		t.Fatal("no idle reader to close")
	}
	if err := db.ShrinkMemory(ctx); err != nil {
		t.Fatal(err)
	}
	if idle := db.Reader().Stats().Idle; idle != 0 {
		t.Fatalf("%d idle readers left open", idle)
	}
	if open := db.write.Stats().OpenConnections; open != 0 {
		t.Fatalf("%d writer connections left open", open)
	}
	if count() != 100 {
		t.Fatal("after shrinking")
	}
	var fk, sync, temp int
	if err := db.Tx(ctx, func(q Querier) error {
		if _, err := q.ExecContext(ctx, "INSERT INTO t VALUES (?)", "after"); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&temp)
	}); err != nil {
		t.Fatal(err)
	}
	// synchronous 1 (NORMAL): group commit's acker fsyncs the log instead.
	if fk != 1 || sync != 1 || temp != 2 || db.syncWAL.Load() == nil {
		t.Fatalf("the writer opened again with foreign_keys %d, synchronous %d, temp_store %d", fk, sync, temp)
	}
	if count() != 101 {
		t.Fatal("the write after shrinking is not there")
	}
}
