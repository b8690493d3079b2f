package dbutil_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// openPages is openFull with a table whose rows each fill a page of
// their own, so each insert adds at least one page to the log.
func openPages(t *testing.T) (*dbutil.DB, string) {
	t.Helper()
	db, path := openFull(t)
	if _, err := db.Write().ExecContext(context.Background(), "CREATE TABLE pages (body TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db, path
}

var pageBody = strings.Repeat("x", 4000)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A checkpoint that fails (here, the database has closed under it) is
// counted as failed for the operator's metric, not as one that ran.
func TestFailedCheckpointsAreCounted(t *testing.T) {
	db, _ := openPages(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ran, _ := db.CheckpointStats()
	db.CheckpointOnce()
	if r, f := db.CheckpointStats(); r != ran || f != 1 {
		t.Fatalf("after a checkpoint on the closed database: %d ran, %d failed; want %d and 1", r, f, ran)
	}
}

// Under the writer's own automatic checkpoint (now a backstop at 4,000
// pages), the checkpointer copies the log into the database every 1,000
// pages or so: well before the backstop, the database file holds what was
// committed.
func TestCheckpointerCopiesTheLogBeforeTheBackstop(t *testing.T) {
	ctx := context.Background()
	db, path := openPages(t)
	start := fileSize(t, path)
	for i := range 1500 {
		if _, err := db.Write().ExecContext(ctx, "INSERT INTO pages VALUES ($1)", pageBody); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.Checkpoints() == 0 || fileSize(t, path) < start+1000*4096 {
		if time.Now().After(deadline) {
			t.Fatalf("after 1,500 pages: %d checkpoints, database file %d bytes (from %d): the log was not copied back", db.Checkpoints(), fileSize(t, path), start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, failed := db.CheckpointStats(); failed != 0 {
		t.Fatalf("%d checkpoints failed on an open database", failed)
	}
}

// With checkpoints beside a busy writer, the log can't be rewound until
// one copies all of it: the writer's backstop does, so a long run of
// writes reuses a log of about 4,000 pages instead of growing it.
func TestBackstopBoundsTheLog(t *testing.T) {
	ctx := context.Background()
	db, path := openPages(t)
	const writers, each = 8, 1500
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				if _, err := db.Write().ExecContext(ctx, "INSERT INTO pages VALUES ($1)", pageBody); err != nil {
					errs <- fmt.Errorf("writer %d, insert %d: %w", w, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// 12,000 pages went through the log. It may hold the backstop's 4,000,
	// the batch that crossed it (up to 256 transactions) and the commits
	// made while its checkpoint ran.
	if size, limit := fileSize(t, path+"-wal"), int64(6000*4100); size > limit {
		t.Fatalf("log is %d MiB after 12,000 pages, want at most %d MiB", size>>20, limit>>20)
	}
	var n int
	if err := db.Read().QueryRowContext(ctx, "SELECT count(*) FROM pages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Fatalf("%d rows, want %d", n, writers*each)
	}
}
