package memory

import (
	"context"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// With the built-in index nothing is queued, so a starting indexer reads
// nothing until its first poll; a row an external index left in the queue
// is still pushed (to the built-in index, which has it already) and
// dropped at that poll.
func TestBuiltinIndexerReadsNothingAtStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		poll time.Duration
	}{
		{"before the first poll", time.Hour},
		{"at the first poll", 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			db, c := dbtest.SQLite(t), newClock()
			s := builtinStore(t, db, c)
			it := mustWrite(t, s, alice, "left queued by an external index")
			if _, err := db.Write().ExecContext(ctx, enqueueQuery, string(it.ID), opUpsert, dbutil.Millis(c.Now())); err != nil {
				t.Fatal(err)
			}
			reads := dbtest.CountReads(db)
			x := NewIndexer(s, WithIndexerClock(c.Now), WithBackoff(time.Millisecond, time.Second), WithPollInterval(tc.poll))
			done := make(chan error, 1)
			go func() { done <- x.Run(ctx) }()
			defer func() {
				cancel()
				<-done
			}()
			if tc.poll == time.Hour {
				if n := dbtest.IdleReads(reads, 100*time.Millisecond); n != 0 || reads.Load() != 0 {
					t.Fatalf("a starting indexer of the built-in index read the database %d times", reads.Load())
				}
				return
			}
			waitFor(t, "the queued row to be dropped at the first poll", func() bool { n, _ := x.Pending(ctx); return n == 0 })
		})
	}
}
