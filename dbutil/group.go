package dbutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

var errDBClosed = errors.New("database is closed")

// Group commit for SQLite. Every write transaction waits for an fsync, and
// SQLite has one writer, so under load transactions queue behind each
// other's fsyncs. The writer goroutine instead takes every transaction
// waiting at that moment and runs them in one SQLite transaction, each in
// a savepoint of its own: one that fails is rolled back alone, and one
// fsync makes the whole batch durable. A caller's Tx returns only after
// that commit. With no queue there is no wait: a lone transaction commits
// at once.

// maxBatch caps how many transactions share one commit.
const maxBatch = 1024

type txRequest struct {
	ctx  context.Context
	fn   func(Querier) error
	done chan error
}

// startWriter starts the group-commit goroutine; Close stops it.
func (d *DB) startWriter() {
	d.txs = make(chan *txRequest, maxBatch)
	d.writerMu = new(sync.RWMutex)
	d.stopWriter = make(chan struct{})
	d.writerDone = make(chan struct{})
	go d.writerLoop()
}

func (d *DB) writerLoop() {
	defer close(d.writerDone)
	batch := make([]*txRequest, 0, maxBatch)
	for {
		select {
		case <-d.stopWriter:
			// Close holds the lock, so nothing more is queued: fail what is.
			for {
				select {
				case r := <-d.txs:
					r.done <- errDBClosed
				default:
					return
				}
			}
		case r := <-d.txs:
			batch = append(batch[:0], r)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-d.txs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		start := time.Now()
		d.runBatch(batch)
		d.writerBusy.Add(int64(time.Since(start)))
		// The commit just woke its callers, and many queue their next
		// transaction at once (a turn's next write, a channel's next
		// message). Letting them run first puts those in the next batch,
		// not the one after: fewer commits and fewer pages written per
		// transaction under load. With nothing else to run it returns at
		// once.
		runtime.Gosched()
	}
}

// groupTx queues fn for the writer goroutine and waits for its commit.
func (d *DB) groupTx(ctx context.Context, fn func(Querier) error) error {
	r := &txRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	d.writerMu.RLock()
	if d.writerClosed {
		d.writerMu.RUnlock()
		return errDBClosed
	}
	select {
	case d.txs <- r:
		d.writerMu.RUnlock()
	case <-ctx.Done():
		d.writerMu.RUnlock()
		return ctx.Err()
	}
	// Once queued, wait for the outcome even if ctx ends: fn may be running.
	return <-r.done
}

func (d *DB) runBatch(batch []*txRequest) {
	fail := func(err error) {
		for _, r := range batch {
			r.done <- err
		}
	}
	tx, err := d.write.BeginTx(context.Background(), nil)
	if err != nil {
		fail(fmt.Errorf("begin transaction: %w", err))
		return
	}
	var missed []string
	// detach: a caller's cancel must not interrupt the shared transaction.
	// Savepoints go through the statement cache like any statement.
	q := querier{db: d.write, cache: d.writeStmts, tx: tx, missed: &missed, detach: true, bound: map[string]*sql.Stmt{}}
	bg := context.Background()
	results := make([]error, len(batch))
	// Each transaction of a batch runs in its own savepoint, so a failure
	// rolls back alone. Alone in its batch, a transaction needs none: on
	// failure the whole transaction is rolled back.
	shared := batch
	if len(batch) == 1 {
		shared = nil
		r := batch[0]
		err := r.ctx.Err()
		if err == nil {
			err = callTx(r.fn, q)
		}
		if err != nil {
			_ = tx.Rollback()
			r.done <- err
			return
		}
	}
	for i, r := range shared {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if _, err := q.ExecContext(bg, "SAVEPOINT parley_tx"); err != nil {
			results[i] = fmt.Errorf("begin transaction: %w", err)
			continue
		}
		err := callTx(r.fn, q)
		if err != nil {
			if _, rbErr := q.ExecContext(bg, "ROLLBACK TO SAVEPOINT parley_tx"); rbErr != nil {
				// The batch can't be trusted any more: undo all of it.
				_ = tx.Rollback()
				fail(fmt.Errorf("roll back a failed transaction: %w (after: %v)", rbErr, err))
				return
			}
		}
		if _, relErr := q.ExecContext(bg, "RELEASE SAVEPOINT parley_tx"); relErr != nil {
			_ = tx.Rollback()
			fail(fmt.Errorf("release savepoint: %w", relErr))
			return
		}
		results[i] = err
	}
	commitStart := time.Now()
	err = tx.Commit()
	d.commitWait.Add(int64(time.Since(commitStart)))
	if err != nil {
		fail(fmt.Errorf("commit transaction: %w", err))
		return
	}
	d.transactions.Add(int64(len(batch)))
	d.commits.Add(1)
	for _, q := range missed {
		_, _ = d.writeStmts.get(context.Background(), d.write, q)
	}
	for i, r := range batch {
		r.done <- results[i]
	}
}

// callTx runs fn, turning a panic into an error so one bad transaction
// can't take the writer down with the batch.
func callTx(fn func(Querier) error, q Querier) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transaction panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(q)
}
