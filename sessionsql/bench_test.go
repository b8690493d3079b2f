package sessionsql_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessionsql"
)

// What a call costs with the database at each size: it is read whole, and
// a write stores it whole. go test -run '^$' -bench . ./sessionsql
func BenchmarkCall(b *testing.B) {
	for _, kib := range []int{16, 1024} {
		db := dbtest.SQLite(b)
		s := sessionsql.NewStore(db, sessionsql.Limits{})
		id := newSession(b, db, "u")
		ctx := context.Background()
		if _, err := s.Exec(ctx, id, fmt.Sprintf(`CREATE TABLE t (v TEXT);
			WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < %d) INSERT INTO t SELECT hex(randomblob(512)) FROM r`, kib)); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("query/%dKiB", kib), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Query(ctx, id, `SELECT count(*) FROM t`); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("exec/%dKiB", kib), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Exec(ctx, id, `UPDATE t SET v = v WHERE rowid = 1`); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
