package dbutil

import "context"

// Checkpoints off the writer. SQLite copies the write-ahead log back into
// the database (a checkpoint) from whichever connection commits the page
// that takes the log past wal_autocheckpoint: with the default of 1,000
// pages, every few hundred turns the writer goroutine stopped to read
// those pages from the log, write them to the database and fsync both,
// while every transaction queued behind it. A turn writes more pages than a
// raw append, so it paid for more of them.
//
// The writer instead counts the pages its commits add to the log and,
// every checkpointEvery of them, wakes the checkpointer, which runs a
// PASSIVE checkpoint on a reader connection: it copies what is committed
// without taking the write lock, so the writer goes on committing
// meanwhile. The writer's own automatic checkpoint stays as a backstop at
// writerCheckpointPages. A log is only rewound from its start by a write
// that finds every page of it copied, which a checkpoint running beside a
// busy writer never leaves; the backstop, when it comes, finds little left
// to copy and rewinds it. So under a long burst the log file grows to
// about writerCheckpointPages pages (16 MiB at 4 KiB pages) before it is
// reused.
const (
	checkpointEvery       = 1000
	writerCheckpointPages = 4 * checkpointEvery
)

// checkpointLoop runs the checkpoints the writer asks for, until the writer
// closes wake.
func (d *DB) checkpointLoop(wake <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range wake {
		// A failed checkpoint (the database closing, a disk error) leaves
		// the pages for the next one or the backstop; it is counted for
		// the operator's metrics. A reader holding an old snapshot only
		// stops a checkpoint short, which is not a failure.
		if d.checkpoint(context.Background()) == nil {
			d.checkpoints.Add(1)
		} else {
			d.checkpointFailures.Add(1)
		}
	}
}

// checkpoint copies what the log holds committed into the database, as far
// as no reader still needs it, without blocking the writer.
func (d *DB) checkpoint(ctx context.Context) error {
	return d.View(ctx, func(q Querier) error {
		var busy, logPages, copied int64
		return q.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &copied)
	})
}

// CheckpointStats is how many checkpoints the checkpointer has run and how
// many failed (SQLite; both 0 on PostgreSQL).
func (d *DB) CheckpointStats() (ran, failed int64) {
	return d.checkpoints.Load(), d.checkpointFailures.Load()
}
