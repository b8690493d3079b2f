// Package dbutil opens parley's database (embedded SQLite or PostgreSQL) and
// provides the small transaction and dialect helpers the domain stores share.
// Code above the stores never imports a driver; it sees only *DB.
package dbutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// Dialect names the SQL engine behind a DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Options says which database to open and how.
type Options struct {
	// URL is a postgres:// or postgresql:// URL, or a SQLite file path
	// (optionally prefixed with "file:" or "sqlite:").
	URL string
	// Synchronous is SQLite's synchronous level: "full" (default) or "normal".
	Synchronous string
	// BusyTimeout is how long SQLite waits for a lock held by another
	// process before giving up. Default DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxConns caps the PostgreSQL pool. Default DefaultMaxConns.
	MaxConns int
	// ReadConns is the number of SQLite reader connections. Default 4.
	ReadConns int
	// StuckAfter bounds, on PostgreSQL, how long a connection's
	// transaction may sit idle (idle_in_transaction_session_timeout) and
	// how long a statement waits for a lock (lock_timeout): a replica
	// paused inside a transaction loses it, and holds up no other one for
	// longer. Set on each connection unless database.url sets them.
	// Default DefaultStuckAfter.
	StuckAfter time.Duration
}

// DefaultStuckAfter is Options.StuckAfter's default.
const DefaultStuckAfter = 10 * time.Second

// DB is an open database. On SQLite, writes go through one connection (the
// single writer WAL wants) and reads through a small pool of read-only
// connections, so readers never wait for a writer. On PostgreSQL both are
// the same pool.
type DB struct {
	Dialect Dialect
	write   *sql.DB
	read    *sql.DB
	pool    *pgxpool.Pool
	// priority is Priority's handle, opened on first use.
	priorityMu     sync.Mutex
	priority       *sql.DB
	priorityPool   *pgxpool.Pool
	priorityClosed bool
	path           string

	readStmts, writeStmts *stmtCache

	// SQLite's group commit (group.go); nil channels on PostgreSQL.
	txs                    chan *txRequest
	stopWriter, writerDone chan struct{}
	writerMu               *sync.RWMutex
	writerClosed           bool
	acks                   chan ackRequest
	// syncWAL, when set, makes group commit's batches durable (group.go);
	// wal is the file it syncs, closed when the writer stops.
	syncWAL atomic.Pointer[func() error]
	wal     *walSyncer
	// SQLite's reader goroutines (view.go); nil on PostgreSQL.
	views         chan *viewRequest
	stopReaders   chan struct{}
	readersDone   *sync.WaitGroup
	readersMu     *sync.RWMutex
	readersClosed bool
	// observer, when set, hears of every wait on the database.
	observer atomic.Pointer[Observer]
	// transactions counts write transactions, batched or not; commits,
	// the commits they took (on SQLite, one a batch).
	transactions, commits atomic.Int64
	// syncs counts the fsyncs group commit made (see syncWAL).
	syncs atomic.Int64
	// checkpointWake wakes the checkpointer (checkpoint.go); checkpoints
	// counts the checkpoints it ran.
	checkpointWake chan struct{}
	checkpoints    atomic.Int64
	// checkpointFailures counts the checkpoints that failed.
	checkpointFailures atomic.Int64
	// broken is the failed fsync of the log after which no write can be
	// promised durable until parley restarts (see ackLoop).
	broken atomic.Pointer[syncError]
	// writerBusy and commitWait are the SQLite writer's time in batches and,
	// of that, in commits (the fsync): how close it is to its limit.
	writerBusy, commitWait atomic.Int64
	// holdsFile: see HoldsFile.
	holdsFile atomic.Bool
	// fence, when set, guards every write of a replica (see SetFence).
	fence atomic.Pointer[Fence]
	// readConns is how many SQLite reader connections may stay open.
	readConns int
}

// Transactions is how many write transactions (durable appends) this DB
// committed; on SQLite several may share one commit (see group.go).
func (d *DB) Transactions() int64 { return d.transactions.Load() }

// Commits is how many commits those transactions took: as many on
// PostgreSQL, one a batch on SQLite.
func (d *DB) Commits() int64 { return d.commits.Load() }

// Mark is a mark of the database's state for a poller that found nothing
// to do: Unchanged later says whether anything has been written since.
// Only a SQLite file this process holds (HoldsFile) can say; elsewhere
// (PostgreSQL, shared by replicas) the mark is NoMark and the poller looks.
type Mark int64

// NoMark is the mark of a database other processes may write.
const NoMark Mark = -1

// Mark is the database's state now: the count of write transactions made
// through this DB, which on a SQLite file this process holds are all of
// them.
func (d *DB) Mark() Mark {
	if d.Dialect != SQLite || !d.holdsFile.Load() {
		return NoMark
	}
	return Mark(d.transactions.Load())
}

// Unchanged reports whether nothing was written since m was taken. It is
// false for NoMark.
func (d *DB) Unchanged(m Mark) bool { return m != NoMark && d.Mark() == m }

// HoldsFile records that this process holds the SQLite file's lock
// (LockSQLite), so it makes every write to it.
func (d *DB) HoldsFile() { d.holdsFile.Store(true) }

// WriterBusy is how long SQLite's writer goroutine has spent running batches
// of transactions, and of that how long in their commits (0 on PostgreSQL).
func (d *DB) WriterBusy() (busy, commit time.Duration) {
	return time.Duration(d.writerBusy.Load()), time.Duration(d.commitWait.Load())
}

// Broken is why no write to this database can be promised durable any
// more, or nil: an fsync of the SQLite log failed, and every write fails
// until parley restarts (see ackLoop). /readyz reports it.
func (d *DB) Broken() error {
	if e := d.broken.Load(); e != nil {
		return e
	}
	return nil
}

// Syncs is how many fsyncs of its log made SQLite's commits durable: one
// covers every commit made while the last one ran (0 on PostgreSQL, and
// with synchronous "normal").
func (d *DB) Syncs() int64 { return d.syncs.Load() }

// Open opens the database named by opts and checks that it answers.
func Open(ctx context.Context, opts Options) (*DB, error) {
	target, err := ParseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if target.Dialect == Postgres {
		return openPostgres(ctx, opts)
	}
	return openSQLite(ctx, target.Path, opts)
}

func openSQLite(ctx context.Context, path string, opts Options) (*DB, error) {
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("open sqlite: synchronous %q is not supported; use full or normal", opts.Synchronous)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, dataDirMode); err != nil {
			return nil, fmt.Errorf("open sqlite: create the directory of database.url: %w", err)
		}
	}
	// Created 0600 here, the WAL and shared-memory files take its mode.
	inWAL := false
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, dataFileMode); err == nil {
		inWAL = walHeader(f)
		f.Close()
	}
	tightenModes(path)
	base := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()),
			"foreign_keys(1)",
			"journal_mode(WAL)",
			"synchronous(" + sync + ")",
		},
	}.Encode()
	// With "full", group commit's batches commit without an fsync and its
	// acker fsyncs the log before any caller hears of a commit (group.go):
	// what FULL promises, with the fsync off the writer's path.
	var wal *walSyncer
	if sync == "FULL" {
		wal = &walSyncer{path: path + "-wal"}
	}

	// The writer keeps its temporary files in memory: group commit runs
	// each transaction in a savepoint, whose sub-journal (the pages it
	// changed, for a rollback to it) otherwise spills to a file past 64
	// KiB and then stays one for the rest of the batch, a write(2) for
	// every page every later transaction of the batch touches. It is
	// never needed after a crash, and holds one savepoint's pages at most.
	//
	// Its automatic checkpoints are a backstop: checkpoint.go runs them
	// off the writer.
	write, err := sql.Open("sqlite", base+"&_txlock=immediate&_pragma=temp_store(MEMORY)"+
		fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", writerCheckpointPages))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	read, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
	}
	n := opts.ReadConns
	if n <= 0 {
		n = 4
	}
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	read.SetConnMaxIdleTime(5 * time.Minute)
	// Each connection reads and parses the whole schema when it opens
	// (about a third of SQLite's share of a start). On a database that
	// is already in WAL mode, the first reader opens on another core
	// while the writer does: start-up's first reads (the schema version)
	// find it ready. Any other is left to the writer alone, which turns
	// it to WAL mode first: two connections switching it at once can
	// find it locked with no wait (TestOpenAnExistingRollbackJournalDatabase).
	var firstReader chan error
	if inWAL {
		firstReader = make(chan error, 1)
		go func() { firstReader <- read.PingContext(ctx) }()
	}
	err = write.PingContext(ctx)
	if firstReader != nil {
		if rerr := <-firstReader; err == nil && rerr != nil {
			err = fmt.Errorf("for reading: %w", rerr)
		}
	}
	if err != nil {
		read.Close()
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	d := &DB{Dialect: SQLite, write: write, read: read, path: path, readStmts: &stmtCache{}, writeStmts: &stmtCache{}, readConns: n}
	d.startWriter(wal)
	d.startReaders(n)
	return d, nil
}

// walHeader reports whether f is an SQLite database in WAL mode: its
// header's file format versions (bytes 18 and 19) are 2, which SQLite
// writes when the journal mode becomes WAL and which persists.
func walHeader(f *os.File) bool {
	var h [20]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return false
	}
	return string(h[:16]) == "SQLite format 3\x00" && h[18] == 2 && h[19] == 2
}

func openPostgres(ctx context.Context, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		// pgx's parse errors can quote the URL; never echo it.
		return nil, errors.New("open postgres: database.url is not a valid postgres URL; the form is postgres://user:password@host:5432/dbname?sslmode=disable")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(opts.MaxConns)
	} else {
		cfg.MaxConns = DefaultMaxConns
	}
	stuck := opts.StuckAfter
	if stuck <= 0 {
		stuck = DefaultStuckAfter
	}
	for _, name := range []string{"idle_in_transaction_session_timeout", "lock_timeout"} {
		if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
			cfg.ConnConfig.RuntimeParams[name] = strconv.FormatInt(stuck.Milliseconds(), 10)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", describe(cfg), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres %s: %w (is the server running and database.url right?)", describe(cfg), err)
	}
	db := stdlib.OpenDBFromPool(pool)
	return &DB{Dialect: Postgres, write: db, read: db, pool: pool}, nil
}

// describe names a Postgres target without its password.
func describe(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// Read is the querier for plain reads (read-only on SQLite).
func (d *DB) Read() Querier { return querier{db: d.read, cache: d.readStmts} }

// Write is the querier for single-statement writes outside a transaction.
func (d *DB) Write() Querier {
	return querier{db: d.write, cache: d.writeStmts, owner: d}
}

// Writer is the handle for writes and read-modify-write transactions.
func (d *DB) Writer() *sql.DB { return d.write }

// Priority is a handle for the few statements that must not wait behind
// the workload for a connection: a replica's heartbeat, which renews the
// lease every write of the replica depends on. On PostgreSQL it is a pool
// of one connection of its own, opened on first use (so a replica holds
// one connection more than database.max_conns); under a burst, the
// workload's transactions queue for the main pool's connections, and a
// heartbeat queued behind them for longer than the lease made the replica
// refuse its own writes (ErrLeaseLapsed) and its peers fence it. On SQLite
// it is the writer.
func (d *DB) Priority(ctx context.Context) (*sql.DB, error) {
	if d.pool == nil {
		return d.write, nil
	}
	d.priorityMu.Lock()
	defer d.priorityMu.Unlock()
	if d.priority != nil {
		return d.priority, nil
	}
	if d.priorityClosed {
		return nil, errDBClosed
	}
	cfg := d.pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open a connection for the heartbeat to postgres %s: %w", describe(cfg), err)
	}
	d.priorityPool, d.priority = pool, stdlib.OpenDBFromPool(pool)
	return d.priority, nil
}

// Reader is the handle for plain reads. On SQLite it is read-only.
func (d *DB) Reader() *sql.DB { return d.read }

// Path is the SQLite file path, or "" on PostgreSQL.
func (d *DB) Path() string { return d.path }

// Close closes every handle. Call it once no transaction is running.
func (d *DB) Close() error {
	d.stopReaderLoops()
	if d.stopWriter != nil {
		d.writerMu.Lock()
		if !d.writerClosed {
			d.writerClosed = true
			close(d.stopWriter)
		}
		d.writerMu.Unlock()
		<-d.writerDone
	}
	errs := []error{d.readStmts.close(), d.writeStmts.close()} // nil caches close as no-ops
	if d.read != d.write {
		errs = append(errs, d.read.Close())
	}
	errs = append(errs, d.write.Close())
	d.priorityMu.Lock()
	d.priorityClosed = true
	if d.priority != nil {
		errs = append(errs, d.priority.Close())
		d.priorityPool.Close()
	}
	d.priorityMu.Unlock()
	if d.pool != nil {
		d.pool.Close()
	}
	return errors.Join(errs...)
}

// Tx runs fn in a write transaction, committing when it returns nil and
// rolling back otherwise. Keep fn short: never call a model inside it.
//
// On SQLite, transactions from concurrent callers share one commit (see
// group.go), so fn must not call Tx itself.
func (d *DB) Tx(ctx context.Context, fn func(q Querier) error) error {
	return d.tx(ctx, fn, false)
}

// tx is Tx; single says fn runs exactly one statement.
func (d *DB) tx(ctx context.Context, fn func(q Querier) error, single bool) error {
	if o := d.observer.Load(); o != nil {
		defer observe(*o, OpWrite, time.Now())
	}
	if d.txs != nil {
		return fromDB(d.groupTx(ctx, fn, single))
	}
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	var missed []string
	q := querier{db: d.write, cache: d.writeStmts, tx: tx, missed: &missed}
	if f := d.fence.Load(); f != nil {
		err = (*f).Check(ctx, q)
	}
	if err == nil {
		err = fn(q)
	}
	if err != nil {
		_ = tx.Rollback()
	} else if err = tx.Commit(); err != nil {
		err = fmt.Errorf("commit transaction: %w", err)
	} else {
		d.transactions.Add(1)
		d.commits.Add(1)
	}
	for _, q := range missed {
		_, _ = d.writeStmts.get(ctx, d.write, q) // best effort: unprepared works too
	}
	return fromDB(err)
}

// Op is the kind of database call an Observer hears of.
type Op string

const (
	// OpWrite is a write transaction, from queueing to durable commit.
	OpWrite Op = "write"
	// OpRead is a View.
	OpRead Op = "read"
)

// Observer hears of each write transaction and each View as it ends: what
// kind, when the caller started waiting and for how long. It runs on the
// caller's goroutine, so keep it short. Metrics and `parley bench` use it.
type Observer func(op Op, start time.Time, took time.Duration)

// Observe sets the observer (nil removes it).
func (d *DB) Observe(o Observer) {
	if o == nil {
		d.observer.Store(nil)
		return
	}
	d.observer.Store(&o)
}

func observe(o Observer, op Op, start time.Time) { o(op, start, time.Since(start)) }

// Millis converts a time to the stored form: integer Unix milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// Time converts stored Unix milliseconds back to a UTC time.
func Time(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// NullTime converts a nullable stored time; NULL becomes the zero time.
func NullTime(ms sql.NullInt64) time.Time {
	if !ms.Valid {
		return time.Time{}
	}
	return Time(ms.Int64)
}

// NullMillis is the stored form of an optional time: the zero time is NULL.
func NullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}
