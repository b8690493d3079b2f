package dbutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
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

// After a spell that filled SQLite's page caches, closing its connections
// frees their memory into SQLite's allocator, which keeps it resident for
// reuse; trimSQLiteHeap must hand it back to the system. If the names
// sqliteheap_libc.go borrows stopped naming modernc.org/libc's allocator,
// the trim would touch an empty one and give back nothing.
func TestTrimSQLiteHeapHandsMemoryBack(t *testing.T) {
	if !trimsSQLiteHeap {
		t.Skip("modernc.org/libc keeps its allocator otherwise on this platform; nothing to trim")
	}
	ctx := context.Background()
	db, err := Open(ctx, Options{URL: filepath.Join(t.TempDir(), "heap.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(q Querier) error {
		if _, err := q.ExecContext(ctx, "CREATE TABLE t (v BLOB)"); err != nil {
			return err
		}
		_, err := q.ExecContext(ctx, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 4000) INSERT INTO t SELECT randomblob(3000) FROM n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// A reader with room for all of it reads every page into its cache.
	var n int64
	if err := db.View(ctx, func(q Querier) error {
		if _, err := q.ExecContext(ctx, "PRAGMA cache_size = -32000"); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, "SELECT sum(length(v)) FROM t").Scan(&n)
	}); err != nil || n != 4000*3000 {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := anonResident(t)
	if err := trimSQLiteHeap(); err != nil {
		t.Fatal(err)
	}
	after := anonResident(t)
	if before-after < 1<<20 {
		t.Fatalf("trimming SQLite's heap gave back %d KiB of %d KiB anonymous memory; want at least 1 MiB", (before-after)>>10, before>>10)
	}
}

// anonResident is this process's resident anonymous memory, once the Go
// heap has handed back what it could.
func anonResident(t *testing.T) int64 {
	t.Helper()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// The writer goroutine prepares the statements a batch missed, and lets
// go of its connection, before the batch's callers hear of their commit:
// a settle right after a write finds the writer idle and closes its
// connection (CI: "1 writer connections left open", when the writer
// prepared a statement after the caller had its answer and took the
// connection back after ShrinkMemory had closed the idle ones).
func TestShrinkMemoryRightAfterAWrite(t *testing.T) {
	ctx := context.Background()
	// NORMAL: nothing fsyncs before the answer, so the caller is answered
	// as soon as the writer lets it be.
	db, err := Open(ctx, Options{URL: filepath.Join(t.TempDir(), "after.db"), Synchronous: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		// A statement new to the cache each time: the batch misses it.
		if err := db.Tx(ctx, func(q Querier) error {
			_, err := q.ExecContext(ctx, fmt.Sprintf("INSERT INTO t VALUES ('%d')", i))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.ShrinkMemory(ctx); err != nil {
			t.Fatal(err)
		}
		if open := db.write.Stats().OpenConnections; open != 0 {
			t.Fatalf("write %d: %d writer connections left open", i, open)
		}
	}
}
