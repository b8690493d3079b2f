package dbutil_test

import (
	"context"
	"errors"
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

// A commit whose fsync failed may not be on disk: its caller hears so.
func TestFailedLogSyncFailsTheWrite(t *testing.T) {
	db, _ := openFull(t)
	ctx := context.Background()
	db.WrapSyncWAL(func(func() error) error { return errors.New("input/output error") })
	err := db.Tx(ctx, func(q dbutil.Querier) error {
		_, err := q.ExecContext(ctx, "INSERT INTO t (id) VALUES (1)")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "durable") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("got %v, want the failed fsync", err)
	}
	// A transaction that failed by itself committed nothing and waits for
	// no fsync: it gets its own error.
	want := errors.New("refused")
	if err := db.Tx(ctx, func(dbutil.Querier) error { return want }); !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}
