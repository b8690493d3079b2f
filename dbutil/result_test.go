package dbutil_test

import (
	"context"
	"database/sql/driver"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// parley_test_wait() is a statement that keeps the SQLite writer busy for as
// long as a test likes: it says it started on waitEntered and returns once
// waitRelease closes.
var (
	waitMu                   sync.Mutex
	waitEntered, waitRelease chan struct{}
)

func init() {
	sqlite.MustRegisterScalarFunction("parley_test_wait", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		waitMu.Lock()
		entered, release := waitEntered, waitRelease
		waitMu.Unlock()
		close(entered)
		<-release
		return int64(1), nil
	})
}

// A single write's result is read with no wait on the writer. Reading a
// database/sql result locks the connection it ran on, the writer's one
// connection, which the writer holds while it runs other callers'
// statements; the caller then waited for them, and the writer for the
// caller.
func TestSingleWriteResultWaitsForNoOtherStatement(t *testing.T) {
	db := dbtest.RawSQLite(t)
	ctx := context.Background()
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	res, err := db.Write().ExecContext(ctx, "INSERT INTO t (id) VALUES (1), (2)")
	if err != nil {
		t.Fatal(err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	waitMu.Lock()
	waitEntered, waitRelease = entered, release
	waitMu.Unlock()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	busy := make(chan error, 1)
	go func() {
		busy <- db.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "SELECT parley_test_wait()")
			return err
		})
	}()
	<-entered // the writer is inside another caller's statement

	type read struct {
		rows, id int64
		err      error
	}
	got := make(chan read, 1)
	go func() {
		var r read
		if r.rows, r.err = res.RowsAffected(); r.err == nil {
			r.id, r.err = res.LastInsertId()
		}
		got <- r
	}()
	select {
	case r := <-got:
		if r.err != nil || r.rows != 2 || r.id != 2 {
			t.Fatalf("rows affected %d, last id %d, error %v; want 2, 2, nil", r.rows, r.id, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a committed write's result waited for the statement the writer runs now")
	}
	free()
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
}
