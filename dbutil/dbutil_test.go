package dbutil_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		opts    dbutil.Options
		want    string
		secrets []string
	}{
		{"empty url", dbutil.Options{}, "database.url is empty", nil},
		{"bad synchronous", dbutil.Options{URL: t.TempDir() + "/x.db", Synchronous: "off"}, `synchronous "off" is not supported; use full or normal`, nil},
		{"malformed postgres url", dbutil.Options{URL: "postgres://bob:hunter2@host:notaport/db"}, "not a valid postgres URL", []string{"hunter2"}},
		{"unreachable postgres", dbutil.Options{URL: "postgres://bob:hunter2@127.0.0.1:1/db?connect_timeout=2"}, "connect to postgres bob@127.0.0.1:1/db", []string{"hunter2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, err := dbutil.Open(ctx, tc.opts)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			for _, s := range tc.secrets {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error leaks %q: %v", s, err)
				}
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	good := []struct {
		raw     string
		dialect dbutil.Dialect
		path    string
	}{
		{"data/parley.db", dbutil.SQLite, "data/parley.db"},
		{"  data/parley.db ", dbutil.SQLite, "data/parley.db"},
		{"file:///var/lib/parley.db?mode=rwc", dbutil.SQLite, "/var/lib/parley.db"},
		{"SQLite://data/parley.db", dbutil.SQLite, "data/parley.db"},
		{"sqlite:data/parley.db", dbutil.SQLite, "data/parley.db"},
		{" postgres://u:p@db/parley", dbutil.Postgres, ""},
		{"postgresql://db/parley?sslmode=disable", dbutil.Postgres, ""},
	}
	for _, tc := range good {
		got, err := dbutil.ParseURL(tc.raw)
		if err != nil || got.Dialect != tc.dialect || got.Path != tc.path {
			t.Errorf("ParseURL(%q) = %+v, %v; want %s %q", tc.raw, got, err, tc.dialect, tc.path)
		}
	}
	bad := []struct{ raw, want string }{
		{"", "empty"},
		{"postgre://bob:hunter2@dbhost/parley", `scheme "postgre"`},
		{"mysql://bob:hunter2@dbhost/parley", `scheme "mysql"`},
		{"host=db user=bob password=hunter2 dbname=parley", "key=value"},
		{"password=hunter2", "key=value"},
		{":memory:", "in-memory"},
		{"file:x.db?mode=memory", "in-memory"},
		{"sqlite:", "no file path"},
	}
	for _, tc := range bad {
		_, err := dbutil.ParseURL(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q) = %v; want an error saying %q without the password", tc.raw, err, tc.want)
		}
	}
}

func TestSQLitePragmas(t *testing.T) {
	ctx := context.Background()
	// With "full" group commit's batches commit without an fsync and it
	// fsyncs the log before it answers (group.go); the connection itself
	// stays at FULL for writes made on it directly. With "normal", nothing
	// fsyncs a commit.
	for _, tc := range []struct {
		sync, want string
		syncs      bool
	}{{"", "2", true}, {"full", "2", true}, {"normal", "1", false}} {
		db, err := dbutil.Open(ctx, dbutil.Options{URL: "sqlite:" + t.TempDir() + "/sub/dir/x.db", Synchronous: tc.sync})
		if err != nil {
			t.Fatal(err)
		}
		var journal, syncLevel, fk, temp string
		w := db.Writer()
		if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
			t.Fatal(err)
		}
		if err := w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel); err != nil {
			t.Fatal(err)
		}
		if err := w.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		// 2: memory, where group commit's savepoints keep their sub-journals.
		if err := w.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&temp); err != nil {
			t.Fatal(err)
		}
		if journal != "wal" || syncLevel != tc.want || fk != "1" || temp != "2" || db.SyncsWAL() != tc.syncs {
			t.Fatalf("synchronous %q: journal %s, synchronous %s, foreign_keys %s, temp_store %s, the log synced by group commit %v",
				tc.sync, journal, syncLevel, fk, temp, db.SyncsWAL())
		}
		if _, err := db.Reader().ExecContext(ctx, "CREATE TABLE nope (x)"); err == nil {
			t.Fatal("the reader handle can write")
		}
		db.Close()
	}
}

// Prepared statements must not deadlock the single SQLite writer when
// transactions and plain writes race, and must give the same results.
func TestQuerierUnderConcurrentTransactions(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			db := e.Raw(t)
			ctx := context.Background()
			if _, err := db.Write().ExecContext(ctx, "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Write().ExecContext(ctx, "INSERT INTO counter (id, n) VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
			const workers, each = 8, 25
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						var err error
						if w%2 == 0 {
							err = db.Tx(ctx, func(q dbutil.Querier) error {
								var n int
								if err := q.QueryRowContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = $1 RETURNING n", 1).Scan(&n); err != nil {
									return err
								}
								return q.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = $1", 1).Scan(&n)
							})
						} else {
							_, err = db.Write().ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = $1", 1)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("writers deadlocked")
			}
			var n int
			if err := db.Read().QueryRowContext(ctx, "SELECT n FROM counter WHERE id = $1", 1).Scan(&n); err != nil || n != workers*each {
				t.Fatalf("counter = %d (%v), want %d", n, err, workers*each)
			}
		})
	}
}

func TestLockSQLite(t *testing.T) {
	path := t.TempDir() + "/parley.db"
	release, err := dbutil.LockSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file, so a second open in this process
	// conflicts just as another process would.
	if _, err := dbutil.LockSQLite(path); !errors.Is(err, dbutil.ErrLocked) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second lock: %v", err)
	}
	release()
	again, err := dbutil.LockSQLite(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

// Transactions that share a group commit stay independent: one that fails
// or panics rolls back alone, and the others commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	db := dbtest.RawSQLite(t)
	ctx := context.Background()
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const n = 60
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Tx(ctx, func(q dbutil.Querier) error {
				if _, err := q.ExecContext(ctx, "INSERT INTO t (id, v) VALUES ($1, $2)", i, "x"); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return errors.New("changed my mind")
				case 2:
					if i%2 == 0 {
						panic("boom")
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	var rows int
	if err := db.Read().QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range n {
		failed := i%3 == 1 || (i%3 == 2 && i%2 == 0)
		if failed != (errs[i] != nil) {
			t.Fatalf("transaction %d: err %v", i, errs[i])
		}
		if !failed {
			want++
		}
	}
	if rows != want {
		t.Fatalf("%d rows committed, want %d", rows, want)
	}
	// The writer accounts for its time: some of it in commits, never more
	// than all of it.
	busy, commit := db.WriterBusy()
	if busy <= 0 || commit <= 0 || commit > busy {
		t.Fatalf("writer busy %v, of which commits %v", busy, commit)
	}
}

// Transactions queued behind a busy writer share one commit, and the
// counts say so: Transactions counts each, Commits each commit.
func TestCommitsCountSharedCommits(t *testing.T) {
	db := dbtest.RawSQLite(t)
	ctx := context.Background()
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx0, c0 := db.Transactions(), db.Commits()
	hold, holding := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = db.Tx(ctx, func(q dbutil.Querier) error {
			close(holding)
			<-hold // the writer is busy with this one while the rest queue
			_, err := q.ExecContext(ctx, "INSERT INTO t (id) VALUES (0)")
			return err
		})
	}()
	<-holding
	const queued = 10
	for i := 1; i <= queued; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.Tx(ctx, func(q dbutil.Querier) error {
				_, err := q.ExecContext(ctx, "INSERT INTO t (id) VALUES ($1)", i)
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	// Let every one queue before the writer is free again.
	deadline := time.Now().Add(10 * time.Second)
	for db.Queued() < queued && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	if got := db.Transactions() - tx0; got != queued+1 {
		t.Fatalf("%d transactions, want %d", got, queued+1)
	}
	if got := db.Commits() - c0; got != 2 {
		t.Fatalf("%d commits for a transaction and %d queued behind it, want 2", got, queued)
	}
}

// Transactions racing Close end with an error; none hangs.
func TestTxAfterCloseFails(t *testing.T) {
	ctx := context.Background()
	for range 50 {
		db, err := dbutil.Open(ctx, dbutil.Options{URL: t.TempDir() + "/x.db"})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 8)
		for range 8 {
			go func() { done <- db.Tx(ctx, func(dbutil.Querier) error { return nil }) }()
		}
		db.Close()
		for range 8 {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("a transaction racing Close hung")
			}
		}
		if err := db.Tx(ctx, func(dbutil.Querier) error { return nil }); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Tx after Close = %v", err)
		}
	}
}

func TestView(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			db := e.Raw(t)
			ctx := context.Background()
			if _, err := db.Write().ExecContext(ctx, "CREATE TABLE v (id INTEGER PRIMARY KEY, s TEXT NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Write().ExecContext(ctx, "INSERT INTO v (id, s) VALUES (1, 'a'), (2, 'b')"); err != nil {
				t.Fatal(err)
			}
			// Many concurrent views, more than there are readers, each
			// scanning every row.
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var got []string
					err := db.View(ctx, func(q dbutil.Querier) error {
						rows, err := q.QueryContext(ctx, "SELECT s FROM v ORDER BY id")
						if err != nil {
							return err
						}
						defer rows.Close()
						for rows.Next() {
							var s string
							if err := rows.Scan(&s); err != nil {
								return err
							}
							got = append(got, s)
						}
						return rows.Err()
					})
					if err != nil || strings.Join(got, ",") != "a,b" {
						t.Errorf("view = %v, %v", got, err)
					}
				}()
			}
			wg.Wait()

			err := db.View(ctx, func(dbutil.Querier) error { panic("boom") })
			if err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("a panicking view returned %v", err)
			}
			// The reader that recovered still serves.
			var n int
			if err := db.View(ctx, func(q dbutil.Querier) error {
				return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM v").Scan(&n)
			}); err != nil || n != 2 {
				t.Fatalf("count after a panic = %d, %v", n, err)
			}
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			ran := false
			if err := db.View(canceled, func(dbutil.Querier) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
				t.Fatalf("a canceled view = %v", err)
			}
			if ran {
				t.Fatal("a canceled view ran")
			}
		})
	}
}

func TestViewIsReadOnlyOnSQLiteAndFailsAfterClose(t *testing.T) {
	ctx := context.Background()
	db, err := dbutil.Open(ctx, dbutil.Options{URL: t.TempDir() + "/x.db"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE v (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, func(q dbutil.Querier) error {
		_, err := q.ExecContext(ctx, "INSERT INTO v (id) VALUES (1)")
		return err
	})
	if err == nil {
		t.Fatal("a write inside View succeeded on SQLite")
	}
	db.Close()
	if err := db.View(ctx, func(dbutil.Querier) error { return nil }); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("View after Close = %v", err)
	}
}

func TestObserverHearsEveryWait(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			db := e.Raw(t)
			ctx := context.Background()
			var mu sync.Mutex
			got := map[dbutil.Op]int{}
			db.Observe(func(op dbutil.Op, start time.Time, took time.Duration) {
				if start.IsZero() || took < 0 || time.Since(start) < took {
					t.Errorf("observed %s: start %v took %v", op, start, took)
				}
				mu.Lock()
				got[op]++
				mu.Unlock()
			})
			if _, err := db.Write().ExecContext(ctx, "CREATE TABLE o (id INTEGER PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			if err := db.Tx(ctx, func(q dbutil.Querier) error {
				_, err := q.ExecContext(ctx, "INSERT INTO o (id) VALUES (1)")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.View(ctx, func(q dbutil.Querier) error {
				var n int
				return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM o").Scan(&n)
			}); err != nil {
				t.Fatal(err)
			}
			db.Observe(nil)
			_ = db.View(ctx, func(dbutil.Querier) error { return nil })
			mu.Lock()
			defer mu.Unlock()
			if got[dbutil.OpWrite] != 2 || got[dbutil.OpRead] != 1 {
				t.Fatalf("observed %v, want 2 writes and 1 read", got)
			}
		})
	}
}

// Query reads every row in order, and gives a scan's error.
func TestQueryReadsEveryRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		ctx := context.Background()
		if _, err := db.Write().ExecContext(ctx, `CREATE TABLE nums (n INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{3, 1, 2} {
			if _, err := db.Write().ExecContext(ctx, `INSERT INTO nums (n) VALUES ($1)`, n); err != nil {
				t.Fatal(err)
			}
		}
		got, err := dbutil.Query(ctx, db.Read(), `SELECT n FROM nums WHERE n > $1 ORDER BY n`, func(r dbutil.Scanner) (int, error) {
			var n int
			return n, r.Scan(&n)
		}, 1)
		if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 3 {
			t.Fatalf("Query = %v, %v", got, err)
		}
		_, err = dbutil.Query(ctx, db.Read(), `SELECT n FROM nums`, func(r dbutil.Scanner) (int, error) {
			var s struct{}
			return 0, r.Scan(&s)
		})
		if err == nil {
			t.Fatal("a scan into the wrong type gave no error")
		}
	})
}

// A mark says whether anything was written since, only on a SQLite file
// this process holds: another process may write any other database.
func TestMarkSeesEveryWriteOfAHeldFile(t *testing.T) {
	db := dbtest.RawSQLite(t)
	ctx := context.Background()
	if m := db.Mark(); m != dbutil.NoMark || db.Unchanged(m) {
		t.Fatalf("a file not held gave mark %d", m)
	}
	db.HoldsFile()
	m := db.Mark()
	if m == dbutil.NoMark || !db.Unchanged(m) {
		t.Fatalf("mark %d of a held file, unchanged %v", m, db.Unchanged(m))
	}
	if err := db.View(ctx, func(q dbutil.Querier) error {
		var n int
		return q.QueryRowContext(ctx, "SELECT 1").Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if !db.Unchanged(m) {
		t.Fatal("a read changed the mark")
	}
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	if db.Unchanged(m) {
		t.Fatal("a write on its own left the mark unchanged")
	}
	m = db.Mark()
	if err := db.Tx(ctx, func(q dbutil.Querier) error {
		_, err := q.ExecContext(ctx, "INSERT INTO t (v) VALUES ('x')")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if db.Unchanged(m) {
		t.Fatal("a transaction left the mark unchanged")
	}
}

// Single writes (db.Write()) share a batch without savepoints of their own:
// one that SQLite refuses part-way (a multi-row insert whose second row
// breaks a constraint) commits none of its rows, and every other write of
// the batch, single or not, commits.
func TestRefusedSingleWriteInASharedBatchUndoesOnlyItself(t *testing.T) {
	db := dbtest.RawSQLite(t)
	ctx := context.Background()
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL CHECK (v <> 'bad'))"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE c (id INTEGER PRIMARY KEY, t_id INTEGER NOT NULL REFERENCES t (id))"); err != nil {
		t.Fatal(err)
	}
	hold, holding := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = db.Tx(ctx, func(q dbutil.Querier) error {
			close(holding)
			<-hold // the writer is busy with this one while the rest queue
			_, err := q.ExecContext(ctx, "INSERT INTO t (id, v) VALUES (0, 'ok')")
			return err
		})
	}()
	<-holding
	type write struct {
		name  string
		run   func() error
		fails bool
	}
	single := func(query string) func() error {
		return func() error { _, err := db.Write().ExecContext(ctx, query); return err }
	}
	writes := []write{
		{"single before", single("INSERT INTO t (id, v) VALUES (1, 'ok')"), false},
		// Row 10 goes in before row 11 breaks the CHECK: SQLite must take
		// row 10 back out, with no savepoint around the statement.
		{"refused part-way", single("INSERT INTO t (id, v) VALUES (10, 'ok'), (11, 'bad')"), true},
		{"duplicate key", single("INSERT INTO t (id, v) VALUES (0, 'again')"), true},
		// A foreign key is checked once the row is in: SQLite takes it out.
		{"missing parent", single("INSERT INTO c (id, t_id) VALUES (1, 99)"), true},
		{"child", single("INSERT INTO c (id, t_id) VALUES (2, 0)"), false},
		{"transaction", func() error {
			return db.Tx(ctx, func(q dbutil.Querier) error {
				if _, err := q.ExecContext(ctx, "INSERT INTO t (id, v) VALUES (2, 'ok')"); err != nil {
					return err
				}
				_, err := q.ExecContext(ctx, "UPDATE t SET v = 'updated' WHERE id = 1")
				return err
			})
		}, false},
		{"single after", single("INSERT INTO t (id, v) VALUES (3, 'ok')"), false},
	}
	errs := make([]error, len(writes))
	for i, w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run()
		}()
		// Queue them in order, all behind the held transaction.
		deadline := time.Now().Add(10 * time.Second)
		for db.Queued() < i+1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	c0 := db.Commits()
	close(hold)
	wg.Wait()
	for i, w := range writes {
		if w.fails != (errs[i] != nil) {
			t.Errorf("%s: err %v, want failure %v", w.name, errs[i], w.fails)
		}
		if errs[i] != nil && dbutil.Unavailable(errs[i]) {
			t.Errorf("%s: a refused statement reads as the database unavailable: %v", w.name, errs[i])
		}
	}
	if got := db.Commits() - c0; got != 2 {
		t.Errorf("the held transaction and the writes queued behind it took %d commits, want 2 (the queued ones in one batch)", got)
	}
	rows, err := db.Read().QueryContext(ctx, "SELECT id, v FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id int
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d=%s", id, v))
	}
	if want := "0=ok 1=updated 2=ok 3=ok"; strings.Join(got, " ") != want {
		t.Fatalf("rows %q, want %q", strings.Join(got, " "), want)
	}
	var children string
	if err := db.Read().QueryRowContext(ctx, "SELECT group_concat(id) FROM c").Scan(&children); err != nil {
		t.Fatal(err)
	}
	if children != "2" {
		t.Fatalf("child rows %q, want only 2 (1's parent is missing)", children)
	}
}

// A database that already exists opens its first reader beside the
// writer. One made elsewhere in rollback-journal mode must still come up
// in WAL mode, with what it held readable through View, however the two
// connections' pragmas interleave.
func TestOpenAnExistingRollbackJournalDatabase(t *testing.T) {
	ctx := context.Background()
	for i := range 5 {
		path := fmt.Sprintf("%s/old-%d.db", t.TempDir(), i)
		old, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.ExecContext(ctx, "CREATE TABLE kept (v TEXT); INSERT INTO kept VALUES ('before')"); err != nil {
			t.Fatal(err)
		}
		var mode string
		if err := old.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "delete" {
			t.Fatalf("journal mode of the old database: %q, %v", mode, err)
		}
		old.Close()

		// Opened once it turns WAL; opened again, in WAL mode, its first
		// reader opens beside the writer. Both times it is WAL, with the
		// row it held.
		for _, open := range []string{"open", "open again"} {
			db, err := dbutil.Open(ctx, dbutil.Options{URL: path})
			if err != nil {
				t.Fatalf("%s %d: %v", open, i, err)
			}
			if err := db.Writer().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Fatalf("%s %d: journal mode %q, %v; want wal", open, i, mode, err)
			}
			var v string
			if err := db.View(ctx, func(q dbutil.Querier) error {
				return q.QueryRowContext(ctx, "SELECT v FROM kept").Scan(&v)
			}); err != nil || v != "before" {
				t.Fatalf("%s %d: read %q, %v", open, i, v, err)
			}
			db.Close()
		}
	}
}

// A commit that adds nothing to the log (its writes changed no row: a
// reclaim with nothing to take back, as at every start) has nothing to
// make durable and costs no fsync; one that adds pages still gets one
// before it is answered.
func TestCommitThatWroteNothingIsNotSynced(t *testing.T) {
	ctx := context.Background()
	db := dbtest.RawSQLite(t)
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	synced := db.Syncs()
	if synced == 0 {
		t.Fatal("creating a table was not synced")
	}
	for range 3 {
		res, err := db.Write().ExecContext(ctx, "UPDATE t SET v = 'x' WHERE v = 'nothing'")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 0 {
			t.Fatalf("updated %d rows of an empty table", n)
		}
		if err := db.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "DELETE FROM t WHERE v = 'nothing'")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.Syncs(); n != synced {
		t.Fatalf("%d fsyncs for commits that wrote nothing", n-synced)
	}
	if _, err := db.Write().ExecContext(ctx, "INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	if n := db.Syncs(); n != synced+1 {
		t.Fatalf("%d fsyncs for a commit that wrote a row; want 1", n-synced)
	}
}
