package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// Queue operations.
const (
	opUpsert = "upsert"
	opDelete = "delete"
)

const (
	dueQueueQuery = `SELECT item_id, op, generation, attempts FROM memory_index_queue
	WHERE next_attempt_at <= $1 ORDER BY next_attempt_at, item_id LIMIT $2`

	nextDueQueueQuery = `SELECT min(next_attempt_at) FROM memory_index_queue`

	// Only the generation that was pushed is done; a newer write stays queued.
	doneQueueQuery = `DELETE FROM memory_index_queue WHERE item_id = $1 AND generation = $2`

	retryQueueQuery = `UPDATE memory_index_queue SET attempts = attempts + 1, next_attempt_at = $3, last_error = $4
	WHERE item_id = $1 AND generation = $2`

	pendingQueueQuery = `SELECT count(*) FROM memory_index_queue`
)

// Indexer pushes queued index writes (memory_index_queue) to the Store's
// index, retrying each failed one with exponential backoff, so writes made
// while an external index is down reach it once it is back. Pushes are
// idempotent, so replicas may each run one.
type Indexer struct {
	store      *Store
	log        *slog.Logger
	now        func() time.Time
	minBackoff time.Duration
	maxBackoff time.Duration
	poll       time.Duration
	batch      int
}

// IndexerOption configures an Indexer.
type IndexerOption func(*Indexer)

// WithIndexerClock replaces the store's clock, for tests.
func WithIndexerClock(now func() time.Time) IndexerOption { return func(x *Indexer) { x.now = now } }

// WithIndexerLogger sets the logger (default: the store's).
func WithIndexerLogger(log *slog.Logger) IndexerOption { return func(x *Indexer) { x.log = log } }

// WithBackoff sets the first retry delay and the cap it doubles up to
// (default 1s and 5m).
func WithBackoff(first, limit time.Duration) IndexerOption {
	return func(x *Indexer) { x.minBackoff, x.maxBackoff = first, limit }
}

// WithPollInterval sets how often Run looks for work it was not told about,
// such as rows another replica queued (default 30s).
func WithPollInterval(d time.Duration) IndexerOption { return func(x *Indexer) { x.poll = d } }

// NewIndexer returns an Indexer for store's queue and index.
func NewIndexer(store *Store, opts ...IndexerOption) *Indexer {
	x := &Indexer{store: store, log: store.log, now: store.now, minBackoff: time.Second,
		maxBackoff: 5 * time.Minute, poll: 30 * time.Second, batch: 100}
	for _, o := range opts {
		o(x)
	}
	x.minBackoff = max(x.minBackoff, time.Millisecond)
	x.maxBackoff = max(x.maxBackoff, x.minBackoff)
	x.poll = max(x.poll, x.minBackoff)
	return x
}

// Run pushes queued writes as they come until ctx ends, then returns nil.
// A write through the Store wakes it at once; failed pushes wait out their
// backoff; rows queued elsewhere are found by polling.
func (x *Indexer) Run(ctx context.Context) error {
	// An index in the database is written in each item's own transaction,
	// so nothing is queued for it; rows an external index left behind are
	// pushed at the first poll, not among the reads of a start.
	first := time.Duration(0)
	if !x.store.queued() {
		first = x.poll
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	// emptied is the database's mark before a pass that left the queue
	// empty: on a SQLite file this process holds, a poll with nothing
	// written since finds it empty still, and an idle daemon leaves the
	// file alone.
	emptied := dbutil.NoMark
	for {
		kicked := false
		select {
		case <-ctx.Done():
			return nil
		case <-x.store.kick:
			kicked = true
		case <-timer.C:
		}
		if !kicked && x.store.db.Unchanged(emptied) {
			timer.Reset(x.poll)
			continue
		}
		mark := x.store.db.Mark()
		_, err := x.Flush(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait, empty := x.nextWait(ctx)
		emptied = dbutil.NoMark
		if err != nil {
			x.log.WarnContext(ctx, "memory index push failed", "index", x.store.index.Name(), "error", err)
			wait = max(wait, x.minBackoff) // a failing database must not spin the loop
		} else if empty {
			emptied = mark
		}
		timer.Reset(wait)
	}
}

// nextWait is how long until the earliest queued row is due, at most poll;
// empty says no row is queued.
func (x *Indexer) nextWait(ctx context.Context) (wait time.Duration, empty bool) {
	var due sql.NullInt64
	if err := x.store.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, nextDueQueueQuery).Scan(&due)
	}); err != nil {
		return x.poll, false
	}
	if !due.Valid {
		return x.poll, true
	}
	return min(max(dbutil.Time(due.Int64).Sub(x.now()), 0), x.poll), false
}

type queuedWrite struct {
	itemID     ItemID
	op         string
	generation int64
	attempts   int64
}

// Flush pushes every queued write that is due now and returns how many it
// pushed. A write that fails is rescheduled after its backoff, and the error
// says which write failed and when it is retried. When the index is
// unavailable Flush stops there, since the rest would fail too; any other
// failure (a document the index refuses) does not hold up the others.
func (x *Indexer) Flush(ctx context.Context) (int, error) {
	pushed := 0
	var failed error
	for {
		batch, err := x.due(ctx)
		if err != nil {
			return pushed, fmt.Errorf("read the memory index queue: %w", err)
		}
		for _, w := range batch {
			if err := x.push(ctx, w); err != nil {
				if ctx.Err() != nil {
					return pushed, ctx.Err()
				}
				err = x.retryLater(ctx, w, err)
				if errors.Is(err, ErrIndexUnavailable) {
					return pushed, err
				}
				if failed == nil {
					failed = err
				}
				continue
			}
			if _, err := x.store.db.Write().ExecContext(ctx, doneQueueQuery, string(w.itemID), w.generation); err != nil {
				return pushed, fmt.Errorf("mark memory %s indexed: %w", w.itemID, err)
			}
			pushed++
		}
		if len(batch) < x.batch {
			return pushed, failed
		}
	}
}

func (x *Indexer) due(ctx context.Context) ([]queuedWrite, error) {
	return dbutil.ViewQuery(ctx, x.store.db, dueQueueQuery, func(r dbutil.Scanner) (queuedWrite, error) {
		var w queuedWrite
		return w, r.Scan(&w.itemID, &w.op, &w.generation, &w.attempts)
	}, dbutil.Millis(x.now()), x.batch)
}

// push sends one write. An upsert sends the item as it is now; an item gone
// meanwhile is deleted instead.
func (x *Indexer) push(ctx context.Context, w queuedWrite) error {
	if w.op == opUpsert {
		it, err := scanItem(x.store.db.Read().QueryRowContext(ctx, itemAnyScopeQuery, string(w.itemID)))
		switch {
		case err == nil:
			return x.store.index.Upsert(ctx, it.doc())
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("load memory %s: %w", w.itemID, err)
		}
	}
	return x.store.index.Delete(ctx, w.itemID)
}

func (x *Indexer) retryLater(ctx context.Context, w queuedWrite, cause error) error {
	wait := x.backoff(w.attempts)
	next := x.now().Add(wait)
	if _, err := x.store.db.Write().ExecContext(ctx, retryQueueQuery, string(w.itemID), w.generation,
		dbutil.Millis(next), cause.Error()); err != nil {
		return errors.Join(cause, fmt.Errorf("reschedule memory %s: %w", w.itemID, err))
	}
	return fmt.Errorf("%s memory %s (attempt %d; next try in %s): %w", w.op, w.itemID, w.attempts+1, wait, cause)
}

// backoff is the wait after a write's attempts-th consecutive failure:
// minBackoff doubled per earlier failure, at most maxBackoff.
func (x *Indexer) backoff(attempts int64) time.Duration {
	d := x.minBackoff
	for i := int64(0); i < attempts && d < x.maxBackoff; i++ {
		d *= 2
	}
	return min(d, x.maxBackoff)
}

// Pending is how many index writes are queued, due or not.
func (x *Indexer) Pending(ctx context.Context) (int, error) {
	var n int
	if err := x.store.db.Read().QueryRowContext(ctx, pendingQueueQuery).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the memory index queue: %w", err)
	}
	return n, nil
}
