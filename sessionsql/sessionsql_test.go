package sessionsql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/sessionsql"
)

func newSession(t testing.TB, db *dbutil.DB, user string) sessions.ID {
	t.Helper()
	s, _, err := sessions.NewStore(db).Resolve(context.Background(), sessions.CLIKey(user, "main"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// A table made with Exec is read with Query, on one replica's handle and
// on another's; a session's database is its own.
func TestExecAndQueryAcrossReplicas(t *testing.T) {
	dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
		ctx := context.Background()
		writer, reader := sessionsql.NewStore(a, sessionsql.Limits{}), sessionsql.NewStore(b, sessionsql.Limits{})
		id, other := newSession(t, a, "u1"), newSession(t, a, "u2")
		out, err := writer.Exec(ctx, id, `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, n REAL);
			INSERT INTO notes (body, n) VALUES ('milk', 1.5), ('eggs | bread', NULL), ('two
lines', 3)`)
		if err != nil || !strings.HasPrefix(out, "OK: 3 row(s) changed") {
			t.Fatalf("exec: %q %v", out, err)
		}
		got, err := reader.Query(ctx, id, `SELECT body, n FROM notes ORDER BY id`)
		want := "| body | n |\n| --- | --- |\n| milk | 1.5 |\n| eggs \\| bread | NULL |\n| two\\nlines | 3 |\n(3 rows)"
		if err != nil || got != want {
			t.Fatalf("query on the other replica:\n%s\n%v\nwant:\n%s", got, err, want)
		}
		if _, err := reader.Query(ctx, other, `SELECT * FROM notes`); err == nil || !strings.Contains(err.Error(), "no such table") {
			t.Fatalf("another session's database: %v", err)
		}
		sc, err := reader.Schema(ctx, id)
		if err != nil || len(sc.Objects) != 1 || sc.Objects[0].Name != "notes" || !strings.Contains(sc.Objects[0].SQL, "CREATE TABLE notes") || sc.Bytes == 0 {
			t.Fatalf("schema: %+v %v", sc, err)
		}
		if sc, err := reader.Schema(ctx, other); err != nil || len(sc.Objects) != 0 || sc.Bytes != 0 {
			t.Fatalf("an empty session's schema: %+v %v", sc, err)
		}
		if _, err := writer.Exec(ctx, "01900000-0000-7000-8000-000000000000", `CREATE TABLE x (a)`); !errors.Is(err, sessionsql.ErrNotFound) {
			t.Fatalf("a session that does not exist: %v", err)
		}
	})
}

// Each limit refuses with an error naming it, and a refused call keeps
// nothing.
func TestLimits(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s := sessionsql.NewStore(db, sessionsql.Limits{MaxBytes: 64 << 10, MaxRows: 3, Timeout: 300 * time.Millisecond})
		id := newSession(t, db, "u")
		if _, err := s.Exec(ctx, id, `CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('a'), ('b'), ('c'), ('d'), ('e')`); err != nil {
			t.Fatal(err)
		}
		count := func() string {
			t.Helper()
			out, err := s.Query(ctx, id, `SELECT count(*) AS n FROM t`)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if out, err := s.Query(ctx, id, `SELECT v FROM t ORDER BY v`); err != nil ||
			!strings.Contains(out, "| c |") || strings.Contains(out, "| d |") || !strings.Contains(out, "(5 rows; the first 3 shown, sessions.sql.max_rows") {
			t.Fatalf("rows past max_rows: %q %v", out, err)
		}
		for _, tc := range []struct {
			name, sql string
			is        error
			says      string
		}{
			{"size", `INSERT INTO t VALUES (hex(randomblob(70000)))`, sessionsql.ErrFull, "sessions.sql.max_bytes"},
			{"size, recursively", `WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200) INSERT INTO t SELECT hex(randomblob(1000)) FROM r`, sessionsql.ErrFull, "sessions.sql.max_bytes"},
			{"time", `WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) INSERT INTO t SELECT i FROM r WHERE i < 0`, sessionsql.ErrTimeout, "sessions.sql.statement_timeout"},
			{"attach", `ATTACH DATABASE '/tmp/other.db' AS other`, nil, "ATTACH is not allowed here"},
			{"attach in lower case after a comment", `/* hi */ attach 'x.db' as x`, nil, "ATTACH is not allowed here"},
			{"pragma", `PRAGMA max_page_count = 1000000`, nil, "PRAGMA is not allowed here"},
			{"vacuum into", `VACUUM INTO '/tmp/copy.db'`, nil, "VACUUM is not allowed here"},
			{"extension", `SELECT load_extension('/tmp/x.so')`, nil, "LOAD_EXTENSION is not allowed here"},
			{"one bad statement of two", `INSERT INTO t VALUES ('f'); INSERT INTO nowhere VALUES (1)`, nil, "no such table: nowhere"},
			{"nothing", `  `, nil, "no SQL given"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.Exec(ctx, id, tc.sql)
				if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("%v, want an error saying %q", err, tc.says)
				}
				if got := count(); !strings.Contains(got, "| 5 |") {
					t.Fatalf("after a refused call: %s, want the 5 rows as they were", got)
				}
			})
		}
		// Words that are refused as statements are data in quotes.
		if _, err := s.Exec(ctx, id, `INSERT INTO t VALUES ('ATTACH and PRAGMA are only words here'); -- VACUUM`); err != nil {
			t.Fatalf("refused words in a string and a comment: %v", err)
		}
		if _, err := s.Query(ctx, id, `DELETE FROM t`); err == nil || !strings.Contains(err.Error(), "sql_query only reads") {
			t.Fatalf("a write through sql_query: %v", err)
		}
		if got := count(); !strings.Contains(got, "| 6 |") {
			t.Fatalf("count %s", got)
		}
	})
}

// A branch gets a copy of its parent's database: what either writes after
// stays its own.
func TestCopyForABranch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s := sessionsql.NewStore(db, sessionsql.Limits{})
		parent, branch := newSession(t, db, "p"), newSession(t, db, "b")
		if _, err := s.Exec(ctx, parent, `CREATE TABLE t (v); INSERT INTO t VALUES ('shared')`); err != nil {
			t.Fatal(err)
		}
		if err := sessionsql.CopyIn(ctx, db.Write(), parent, branch); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(ctx, branch, `INSERT INTO t VALUES ('branch only')`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(ctx, parent, `INSERT INTO t VALUES ('parent only')`); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[sessions.ID]string{parent: "shared,parent only", branch: "shared,branch only"} {
			out, err := s.Query(ctx, id, `SELECT group_concat(v) AS vs FROM (SELECT v FROM t ORDER BY rowid)`)
			if err != nil || !strings.Contains(out, "| "+want+" |") {
				t.Fatalf("session %s: %q %v, want %s", id, out, err, want)
			}
		}
		// Deleted with its session.
		if err := sessions.NewStore(db).Delete(ctx, branch); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Size(ctx, branch); err != nil || n != 0 {
			t.Fatalf("a deleted session's database: %d bytes, %v", n, err)
		}
	})
}
