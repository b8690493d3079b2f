package dbutil_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
)

func openFull(t *testing.T) (*dbutil.DB, string) {
	t.Helper()
	path := t.TempDir() + "/x.db"
	db, err := dbutil.Open(context.Background(), dbutil.Options{URL: "sqlite:" + path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Write().ExecContext(context.Background(), "CREATE TABLE t (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// A write is answered only once the log holding its commit is on disk:
// the writer commits without an fsync, and the acker fsyncs the log before
// any caller of the batch hears of it.
func TestCommitIsAnsweredOnlyOnceTheLogIsOnDisk(t *testing.T) {
	db, path := openFull(t)
	ctx := context.Background()
	syncing, release := make(chan struct{}, 1), make(chan struct{})
	var synced atomic.Int64
	db.WrapSyncWAL(func(sync func() error) error {
		select {
		case syncing <- struct{}{}:
		default:
		}
		<-release
		err := sync()
		if err == nil {
			synced.Add(1)
		}
		return err
	})
	done := make(chan error, 1)
	go func() {
		done <- db.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "INSERT INTO t (id) VALUES (1)")
			return err
		})
	}()
	select {
	case <-syncing:
	case err := <-done:
		t.Fatalf("the write was answered (%v) with no fsync of the log", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the log is never fsynced")
	}
	select {
	case err := <-done:
		t.Fatalf("the write was answered (%v) before its commit was on disk", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if synced.Load() == 0 {
		t.Fatal("the log was never fsynced")
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("the log fsynced is not the database's: %v", err)
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows (%v), want the one written", n, err)
	}
}

// A commit whose fsync failed may not be on disk: its caller hears so, and
// so does every later one's, even if a later fsync succeeds: the kernel may
// have dropped the pages it could not write, leaving a hole in the log past
// which recovery reads nothing.
func TestFailedLogSyncFailsTheWrite(t *testing.T) {
	db, _ := openFull(t)
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	db.WrapSyncWAL(func(sync func() error) error {
		if failing.Load() {
			return fmt.Errorf("%w x.db-wal: input/output error", dbutil.ErrFsync)
		}
		return sync()
	})
	insert := func(id int) error {
		return db.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "INSERT INTO t (id) VALUES ($1)", id)
			return err
		})
	}
	err := insert(1)
	if err == nil || !strings.Contains(err.Error(), "durable") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("got %v, want the failed fsync", err)
	}
	failing.Store(false)
	if err := insert(2); err == nil || !strings.Contains(err.Error(), "restart parley") {
		t.Fatalf("a write after a failed fsync: got %v, want it refused as not durable", err)
	}
	if b := db.Broken(); b == nil || !strings.Contains(b.Error(), "restart parley") {
		t.Fatalf("Broken after a failed fsync: %v, want why writes fail", b)
	}
	// The log could not be opened, say: that write fails, but nothing was
	// lost, and the next fsync makes every commit durable again.
	db2, _ := openFull(t)
	var opening atomic.Bool
	opening.Store(true)
	db2.WrapSyncWAL(func(sync func() error) error {
		if opening.Load() {
			return errors.New("open x.db-wal: too many open files")
		}
		return sync()
	})
	insert2 := func(id int) error {
		return db2.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "INSERT INTO t (id) VALUES ($1)", id)
			return err
		})
	}
	if err := insert2(1); err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Fatalf("got %v, want the failure to open the log", err)
	}
	opening.Store(false)
	if err := insert2(2); err != nil {
		t.Fatalf("a write after the log opened again: %v", err)
	}
	if b := db2.Broken(); b != nil {
		t.Fatalf("Broken after a failure only to open the log: %v, want nil", b)
	}

	// As SQLite's own I/O error would be: the database couldn't take the
	// write, so what met it is tried again later, not failed for good.
	if !dbutil.Unavailable(err) {
		t.Fatalf("%v is not counted as the database being unavailable", err)
	}
	// A transaction that failed by itself committed nothing and waits for
	// no fsync: it gets its own error.
	want := errors.New("refused")
	if err := db.Tx(ctx, func(dbutil.Querier) error { return want }); !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

// Only group commit's batches commit without an fsync of their own, the
// acker's following them. A write made on the writer's connection directly
// (the WhatsApp device store makes its own) commits at FULL, with no acker
// behind it.
func TestDirectWritesOnTheWriterStayFull(t *testing.T) {
	db, _ := openFull(t)
	ctx := context.Background()
	level := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		var n int
		if err := q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var inBatch int
	if err := db.Tx(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&inBatch)
	}); err != nil {
		t.Fatal(err)
	}
	if inBatch != 1 {
		t.Fatalf("synchronous %d inside a batch, want 1 (NORMAL, the acker fsyncs)", inBatch)
	}
	if got := level(db.Writer()); got != 2 {
		t.Fatalf("synchronous %d on the writer's connection after a batch, want 2 (FULL)", got)
	}
	if _, err := db.Writer().ExecContext(ctx, "INSERT INTO t (id) VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	if got := level(db.Writer()); got != 2 {
		t.Fatalf("synchronous %d, want 2", got)
	}
}
