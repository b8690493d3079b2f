package dbutil

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"modernc.org/sqlite"
)

var errDBClosed = errors.New("database is closed")

// Group commit for SQLite. Every write transaction waits for an fsync, and
// SQLite has one writer, so under load transactions queue behind each
// other's fsyncs. The writer goroutine instead takes every transaction
// waiting at that moment and runs them in one SQLite transaction, each in
// a savepoint of its own: one that fails is rolled back alone, and one
// fsync makes the whole batch durable. A caller's Tx returns only after
// that commit is durable. With no queue there is no wait: a lone
// transaction commits at once.
//
// The writer hands each committed batch to a second goroutine, the acker,
// and goes on to the next batch (after a yield, see writerLoop):
//   - With synchronous "full" (the default) a batch commits without an
//     fsync (SQLite's synchronous=NORMAL, for the batch only: see hold)
//     and the acker fsyncs the log, then answers the callers. The fsync
//     of one batch overlaps the statements of the next, and one fsync
//     covers every batch committed while the last one ran. A transaction
//     is answered only once its commit is on disk, as with synchronous=FULL; what
//     differs is that a reader may see a commit for the few hundred
//     microseconds before it is. Whatever parley does outside the database
//     (a reply sent, a platform told a message arrived) follows a write's
//     answer, never a read alone, so nothing outside can depend on a commit
//     a power cut could take back.
//   - Waking hundreds of callers is work too: the Go scheduler queues each
//     one on the waker's CPU, so when the writer woke them it then waited
//     behind them for its CPU. The acker wakes them instead.

// maxBatch caps how many transactions share one commit. It also bounds how
// long the writer runs a batch (about 10 ms at a loaded transaction's cost)
// and how many callers each commit wakes at once: a writer that runs batch
// after batch for tens of milliseconds is forced off its CPU by Go's
// scheduler and then waits behind the callers the acker woke
// (docs/benchmarks.md has the runs that chose it).
const maxBatch = 256

// queueLen is how many transactions can wait for the writer before a
// caller's Tx blocks to queue.
const queueLen = 1024

type txRequest struct {
	ctx context.Context
	fn  func(Querier) error
	// single says fn runs exactly one statement (a write on the write
	// handle): SQLite undoes a failed statement's changes itself, so in a
	// shared batch it needs no savepoint of its own.
	single bool
	done   chan error
}

// ackRequest is one batch's outcome, on its way to its callers.
type ackRequest struct {
	reqs    []*txRequest
	results []error
	// committed: the batch's commit went through and awaits the fsync.
	committed bool
	// wrote: the commit added pages to the log. One that added none (its
	// writes all changed nothing: a reclaim with nothing to take back, a
	// lease already current) has nothing to make durable, and no fsync is
	// made for it.
	wrote bool
}

// startWriter starts the group-commit goroutines; Close stops them. With
// wal set, each batch commits without an fsync of its own and the acker
// makes each commit durable, syncing wal, before it answers.
func (d *DB) startWriter(wal *walSyncer) {
	d.txs = make(chan *txRequest, queueLen)
	d.acks = make(chan ackRequest, maxBatch)
	if wal != nil {
		d.wal = wal
		sync := wal.sync
		d.syncWAL.Store(&sync)
	}
	d.writerMu = new(sync.RWMutex)
	d.stopWriter = make(chan struct{})
	d.writerDone = make(chan struct{})
	d.checkpointWake = make(chan struct{}, 1)
	ackerDone, checkpointerDone := make(chan struct{}), make(chan struct{})
	go d.ackLoop(ackerDone)
	go d.checkpointLoop(d.checkpointWake, checkpointerDone)
	go d.writerLoop(ackerDone, checkpointerDone)
}

func (d *DB) writerLoop(ackerDone, checkpointerDone chan struct{}) {
	defer close(d.writerDone)
	// The acker answers every batch committed before the writer stops.
	defer func() { close(d.acks); <-ackerDone }()
	defer func() { close(d.checkpointWake); <-checkpointerDone }()
	batch := make([]*txRequest, 0, maxBatch)
	var logged int64 // pages added to the log since the last checkpoint asked for
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
		if logged += d.runBatch(batch); logged >= checkpointEvery {
			logged = 0
			select {
			case d.checkpointWake <- struct{}{}:
			default: // one is under way
			}
		}
		d.writerBusy.Add(int64(time.Since(start)))
		// Callers the acker woke queue their next transaction at once (a
		// turn's next write, a channel's next message). Letting them run
		// first puts those in the next batch, not the one after: fewer
		// commits, fsyncs and pages written per transaction when the
		// writer is not saturated. With nothing else to run it returns at
		// once. With transactions already waiting the writer is saturated
		// and goes straight on: a yield then would put it behind every
		// runnable caller (Gosched queues it globally) and leave it idle.
		if len(d.txs) == 0 {
			runtime.Gosched()
		}
	}
}

// syncError is a failed fsync of the SQLite log: the disk could not take
// the write (an I/O error, a full disk), as SQLite's own SQLITE_IOERR says
// when it fsyncs, so Unavailable counts it as the database's.
type syncError struct{ err error }

func (e *syncError) Error() string {
	if errors.Is(e.err, errFsync) {
		return "commit transaction: an fsync of the SQLite log failed, so no commit since can be promised durable (" + e.err.Error() +
			"); check the disk (full? failing?) and restart parley"
	}
	return "commit transaction: make it durable: " + e.err.Error()
}

func (e *syncError) Unwrap() error { return e.err }

// ackLoop answers the writer's batches in the order they ran: after one
// fsync of the log for every commit waiting, when the writer commits
// without one.
func (d *DB) ackLoop(done chan struct{}) {
	defer close(done)
	if d.wal != nil {
		defer d.wal.close()
	}
	var pending []ackRequest
	var failed *syncError // the first fsync that failed, if one did
	for a := range d.acks {
		pending = append(pending[:0], a)
	drain:
		for {
			select {
			case a, ok := <-d.acks:
				if !ok {
					break drain
				}
				pending = append(pending, a)
			default:
				break drain
			}
		}
		var syncErr error
		if sync := d.syncWAL.Load(); sync != nil && slices.ContainsFunc(pending, func(a ackRequest) bool { return a.committed }) {
			switch {
			case failed != nil:
				// Once an fsync failed, the kernel may have dropped
				// pages of the log it could not write and a later fsync
				// succeed all the same: the log may hold a hole, past
				// which recovery reads nothing. No later commit can be
				// promised durable until parley starts again.
				syncErr = failed
			case !slices.ContainsFunc(pending, func(a ackRequest) bool { return a.committed && a.wrote }):
				// Nothing new in the log: what these batches read was
				// made durable before an earlier batch was answered.
			default:
				d.syncs.Add(1)
				if err := (*sync)(); err != nil {
					// Committed, but maybe not on disk: the caller sees
					// an error and may retry, as after a lost commit
					// answer. Only a failed fsync itself (not, say, a
					// failure to open the log) can have lost pages.
					e := &syncError{err: err}
					if errors.Is(err, errFsync) {
						failed = e
						d.broken.Store(e)
					}
					syncErr = e
				}
			}
		}
		for _, a := range pending {
			for i, r := range a.reqs {
				err := a.results[i]
				if err == nil && a.committed && syncErr != nil {
					err = syncErr
				}
				r.done <- err
			}
		}
		clear(pending) // let the batches go
	}
}

// groupTx queues fn for the writer goroutine and waits for its commit.
func (d *DB) groupTx(ctx context.Context, fn func(Querier) error, single bool) error {
	r := &txRequest{ctx: ctx, fn: fn, single: single, done: make(chan error, 1)}
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

// runBatch runs batch in one commit and hands it to the acker; it returns
// how many pages the commit added to the log, as far as it could tell.
func (d *DB) runBatch(batch []*txRequest) (logged int64) {
	// The writer reuses batch; the acker gets a copy. When the batch
	// missed statements, the acker gets it only once they are prepared:
	// preparing takes the connection again after the batch let go of it,
	// and a caller that heard of its commit first could close the
	// connection (ShrinkMemory) just before the writer opened it again.
	// Otherwise the acker's fsync overlaps the writer letting go.
	var out *ackRequest
	wrote := true // unless the log's page count says otherwise
	answer := func(results []error, committed bool) {
		out = &ackRequest{reqs: slices.Clone(batch), results: results, committed: committed, wrote: wrote}
	}
	fail := func(err error) {
		results := make([]error, len(batch))
		for i := range results {
			results[i] = err
		}
		answer(results, false)
	}
	conn, release, err := d.hold(context.Background())
	if err != nil {
		fail(fmt.Errorf("begin transaction: %w", err))
		d.acks <- *out
		return
	}
	var missed []string
	defer func() {
		if len(missed) == 0 {
			d.acks <- *out
			release()
			return
		}
		release()
		for _, q := range missed {
			_, _ = d.writeStmts.get(context.Background(), d.write, q)
		}
		d.acks <- *out
	}()
	// What the commit adds to the log, for the checkpointer and the
	// acker: pages written before and after. When a count can't be read,
	// the batch counts as written.
	framesBefore, err := logPages(conn)
	counted := err == nil
	tx, err := conn.BeginTx(context.Background(), nil)
	if err != nil {
		fail(fmt.Errorf("begin transaction: %w", err))
		return
	}
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
			answer([]error{err}, false)
			return
		}
	}
	for i, r := range shared {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if r.single {
			// One statement is atomic on its own: a statement SQLite
			// refuses (a constraint, a type) leaves the transaction as it
			// was. Any other failure (I/O, a full disk, out of memory)
			// may have rolled the whole transaction back, so the batch
			// fails as when a savepoint can't be rolled back to.
			err := callTx(r.fn, q)
			if err != nil && !statementOnly(err) {
				_ = tx.Rollback()
				fail(err)
				return
			}
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
	if counted {
		if n, err := logPages(conn); err == nil {
			logged = n - framesBefore
			wrote = logged > 0
		}
	}
	answer(results, true)
	return logged
}

// hold takes the writer's one connection for a batch. When the acker syncs
// the log, the batch commits in NORMAL mode (no fsync of its own), and the
// connection is set back to FULL before it is let go: others write on it
// directly, outside group commit (the WhatsApp device store does), and no
// acker follows their commits.
func (d *DB) hold(ctx context.Context) (conn *sql.Conn, release func(), err error) {
	conn, err = d.write.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if d.syncWAL.Load() == nil {
		return conn, func() { conn.Close() }, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, func() {
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
			// Never hand on a connection that commits without an fsync:
			// drop it, and the next use opens another (at FULL).
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}, nil
}

// statementOnly reports whether err, from one statement inside a
// transaction, failed that statement alone: SQLite refused it (a
// constraint, a type mismatch, a value too big, a bad parameter, an error
// in the SQL) and undid what it had changed, or the statement never reached
// SQLite (an argument that could not be converted). SQLite's I/O, full
// disk, busy, out-of-memory, interrupt and corruption errors can roll back
// the whole transaction, so they are not.
func statementOnly(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return !Unavailable(err)
	}
	switch se.Code() & 0xff {
	case sqliteError, sqliteConstraint, sqliteMismatch, sqliteTooBig, sqliteRange:
		return true
	}
	return false
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
