package dbutil

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"
)

// Querier runs queries on a handle or inside a transaction. The store code
// takes one, so the same function serves both.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *Row
}

// Row is sql.Row whose error, a bare transport error included, is marked
// as the database's (see Unavailable).
type Row struct{ row *sql.Row }

// Scan is sql.Row.Scan.
func (r *Row) Scan(dest ...any) error { return fromDB(r.row.Scan(dest...)) }

// Err is sql.Row.Err.
func (r *Row) Err() error { return fromDB(r.row.Err()) }

// querier prepares each query once per handle on SQLite, where parsing is a
// large share of a lookup's cost. On PostgreSQL (cache is nil) pgx already
// keeps a per-connection statement cache, so queries go straight through.
type querier struct {
	db    *sql.DB
	cache *stmtCache
	tx    *sql.Tx
	// missed collects queries a transaction ran unprepared: the SQLite
	// writer has one connection, which the transaction holds, so they are
	// prepared after it ends.
	missed *[]string
	// owner, on the write handle, lets a single write join a group commit.
	owner *DB
	// detach runs statements without the caller's cancellation, inside a
	// transaction other callers share.
	detach bool
	// bound, in a group commit's transaction, holds each statement bound
	// to it once: the batch's transactions run the same few statements
	// (two savepoint statements each), and binding one per run cost an
	// allocation and a registration with the transaction every time.
	bound map[string]*sql.Stmt
}

func (q querier) count() {
	if q.owner != nil { // a statement on the write handle commits on its own
		q.owner.transactions.Add(1)
		q.owner.commits.Add(1)
	}
}

func (q querier) stmt(ctx context.Context, query string) *sql.Stmt {
	if q.cache == nil {
		return nil
	}
	if q.tx != nil {
		if st, ok := q.bound[query]; ok {
			return st
		}
		st := q.cache.lookup(query)
		if st == nil {
			*q.missed = append(*q.missed, query)
			return nil
		}
		st = q.tx.StmtContext(ctx, st)
		if q.bound != nil {
			q.bound[query] = st
		}
		return st
	}
	st, err := q.cache.get(ctx, q.db, query)
	if err != nil {
		return nil // the unprepared call below reports the same error
	}
	return st
}

func (q querier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if q.detach {
		ctx = context.WithoutCancel(ctx)
	}
	if q.tx == nil && q.owner != nil && q.owner.txs != nil {
		var res sql.Result
		err := q.owner.tx(ctx, func(tq Querier) error {
			r, err := tq.ExecContext(ctx, query, args...)
			if err == nil {
				res = settle(r)
			}
			return err
		}, true)
		return res, err
	}
	q.count()
	if q.tx == nil && q.owner != nil {
		if f := q.owner.fence.Load(); f != nil {
			if err := (*f).Alive(); err != nil {
				return nil, err
			}
		}
		if o := q.owner.observer.Load(); o != nil {
			defer observe(*o, OpWrite, time.Now())
		}
	}
	var res sql.Result
	var err error
	if st := q.stmt(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else if q.tx != nil {
		res, err = q.tx.ExecContext(ctx, query, args...)
	} else {
		res, err = q.db.ExecContext(ctx, query, args...)
	}
	return res, fromDB(err)
}

func (q querier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if q.detach {
		ctx = context.WithoutCancel(ctx)
	}
	q.count()
	var rows *sql.Rows
	var err error
	if st := q.stmt(ctx, query); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else if q.tx != nil {
		rows, err = q.tx.QueryContext(ctx, query, args...)
	} else {
		rows, err = q.db.QueryContext(ctx, query, args...)
	}
	return rows, fromDB(err)
}

func (q querier) QueryRowContext(ctx context.Context, query string, args ...any) *Row {
	if q.detach {
		ctx = context.WithoutCancel(ctx)
	}
	q.count()
	if st := q.stmt(ctx, query); st != nil {
		return &Row{st.QueryRowContext(ctx, args...)}
	}
	if q.tx != nil {
		return &Row{q.tx.QueryRowContext(ctx, query, args...)}
	}
	return &Row{q.db.QueryRowContext(ctx, query, args...)}
}

// settled is a statement's result read on the writer goroutine, inside its
// transaction. A database/sql result read later locks the connection it
// ran on: the writer's one connection, which the writer holds while it
// runs the next batch. A caller blocked there is one the writer must then
// wait for (the mutex hands the lock over in turn), and under load that
// caller waits for a CPU behind hundreds of runnable goroutines: the
// writer stalled for milliseconds at a time.
type settled struct {
	id, rows       int64
	idErr, rowsErr error
}

func settle(r sql.Result) sql.Result {
	var s settled
	s.id, s.idErr = r.LastInsertId()
	s.rows, s.rowsErr = r.RowsAffected()
	return s
}

func (s settled) LastInsertId() (int64, error) { return s.id, s.idErr }
func (s settled) RowsAffected() (int64, error) { return s.rows, s.rowsErr }

// stmtCache holds prepared statements for one handle.
type stmtCache struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	if st := c.lookup(query); st != nil {
		return st, nil
	}
	// Prepare without the lock: on the SQLite writer it waits for the one
	// connection, whose transaction may itself be looking up a statement.
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok {
		st.Close()
		return prev, nil
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*sql.Stmt)
	}
	c.stmts[query] = st
	return st, nil
}

func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

func (c *stmtCache) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	c.stmts = nil
	return errors.Join(errs...)
}

// Scanner is a row to scan: *sql.Rows in Query's loop.
type Scanner interface {
	Scan(dest ...any) error
}

// Query runs query on q and reads every row with scan, in order: the one
// loop for reading a list, so no caller forgets rows.Err or Close.
func Query[T any](ctx context.Context, q Querier, query string, scan func(Scanner) (T, error), args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ViewQuery is Query in a read-only view of d (see DB.View).
func ViewQuery[T any](ctx context.Context, d *DB, query string, scan func(Scanner) (T, error), args ...any) ([]T, error) {
	var out []T
	err := d.View(ctx, func(q Querier) (err error) {
		out, err = Query(ctx, q, query, scan, args...)
		return err
	})
	return out, err
}

// ViewRow reads the row query returns with scan, in a read-only view of d
// (see DB.View); no row is sql.ErrNoRows.
func ViewRow[T any](ctx context.Context, d *DB, query string, scan func(Scanner) (T, error), args ...any) (T, error) {
	var v T
	err := d.View(ctx, func(q Querier) (err error) {
		v, err = scan(q.QueryRowContext(ctx, query, args...))
		return err
	})
	return v, err
}
