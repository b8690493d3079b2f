package kv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

const (
	// lockSessionQuery finds the session; on PostgreSQL it also locks its
	// row (lockSuffix), so two sets in one session count its usage one
	// after the other. SQLite's single writer already does.
	lockSessionQuery = `SELECT id FROM sessions WHERE id = $1`
	lockSuffix       = ` FOR UPDATE`

	usageExceptQuery = `SELECT count(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_kv
	WHERE session_id = $1 AND key <> $2`

	usageQuery = `SELECT count(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_kv WHERE session_id = $1`

	upsertItemQuery = `INSERT INTO session_kv (session_id, key, value, size, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $5)
	ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, size = excluded.size, updated_at = excluded.updated_at
	RETURNING created_at`

	itemQuery = `SELECT value, size, created_at, updated_at FROM session_kv WHERE session_id = $1 AND key = $2`

	deleteItemQuery = `DELETE FROM session_kv WHERE session_id = $1 AND key = $2`

	// The prefix is compared by its length in characters (both engines'
	// substr counts characters), so no LIKE escaping is needed.
	listItemsQuery = `SELECT key, size, created_at, updated_at FROM session_kv
	WHERE session_id = $1 AND key > $2 AND substr(key, 1, $3) = $4 ORDER BY key LIMIT $5`

	listItemsWithValuesQuery = `SELECT key, size, created_at, updated_at, value FROM session_kv
	WHERE session_id = $1 AND key > $2 AND substr(key, 1, $3) = $4 ORDER BY key LIMIT $5`
)

// Store keeps session storage in the database. It is safe for concurrent
// use.
type Store struct {
	db     *dbutil.DB
	limits atomic.Pointer[Limits]
	log    *slog.Logger
	now    func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithLimits sets the limits; zero fields keep their defaults.
func WithLimits(l Limits) Option { return func(s *Store) { s.SetLimits(l) } }

// WithLogger sets the logger the tools log store failures to.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithClock sets the clock.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// NewStore returns the store on db.
func NewStore(db *dbutil.DB, opts ...Option) *Store {
	s := &Store{db: db, log: slog.New(slog.DiscardHandler), now: time.Now}
	s.SetLimits(DefaultLimits)
	for _, o := range opts {
		o(s)
	}
	return s
}

// Limits are the store's limits.
func (s *Store) Limits() Limits { return *s.limits.Load() }

// SetLimits changes the limits from the next call on (a config reload);
// zero fields take their defaults. What is stored stays, even over a
// lowered limit: only new values are refused.
func (s *Store) SetLimits(l Limits) {
	l = l.withDefaults()
	s.limits.Store(&l)
}

// Get returns the value under key in the session, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id sessions.ID, key string) (Item, error) {
	if err := CheckKey(key); err != nil {
		return Item{}, err
	}
	var (
		value      string
		it         = Item{Key: key}
		created, u int64
	)
	err := s.db.Read().QueryRowContext(ctx, itemQuery, string(id), key).Scan(&value, &it.Size, &created, &u)
	if errors.Is(err, sql.ErrNoRows) {
		return Item{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	if err != nil {
		return Item{}, fmt.Errorf("read key %q of session %s: %w", key, id, err)
	}
	it.Value, it.CreatedAt, it.UpdatedAt = &value, dbutil.Time(created), dbutil.Time(u)
	return it, nil
}

// Set stores value under key in the session, replacing what was there, and
// returns the item and the session's usage after it. A value over the
// per-value limit, or one that would take the session over its bytes or
// keys, is refused (ErrValueTooLarge, ErrSessionFull) with an error that
// names the limit, and nothing changes.
func (s *Store) Set(ctx context.Context, id sessions.ID, key, value string) (Item, Usage, error) {
	if err := CheckKey(key); err != nil {
		return Item{}, Usage{}, err
	}
	if err := checkValue(value); err != nil {
		return Item{}, Usage{}, err
	}
	lim := s.Limits()
	if n := len(value); n > lim.MaxValueBytes {
		return Item{}, Usage{}, fmt.Errorf("%w: the value is %d bytes and the limit per value is %d bytes (sessions.kv.max_value_bytes); store less, or split it under several keys",
			ErrValueTooLarge, n, lim.MaxValueBytes)
	}
	size := itemSize(key, value)
	now := dbutil.Millis(s.now())
	it := Item{Key: key, Value: &value, Size: size, UpdatedAt: dbutil.Time(now)}
	usage := Usage{Limits: lim}
	lock := lockSessionQuery
	if s.db.Dialect == dbutil.Postgres {
		lock += lockSuffix
	}
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var found string
		if err := q.QueryRowContext(ctx, lock, string(id)).Scan(&found); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNoSession, id)
		} else if err != nil {
			return err
		}
		var others int
		var otherBytes int64
		if err := q.QueryRowContext(ctx, usageExceptQuery, string(id), key).Scan(&others, &otherBytes); err != nil {
			return err
		}
		if others+1 > lim.MaxKeys {
			return fmt.Errorf("%w: this session stores %d keys and the limit is %d (sessions.kv.max_keys); delete keys it no longer needs (kv_delete)",
				ErrSessionFull, others, lim.MaxKeys)
		}
		if total := otherBytes + size; total > int64(lim.MaxSessionBytes) {
			return fmt.Errorf("%w: with %q (%d bytes) this session's storage would hold %d bytes and the limit is %d bytes (sessions.kv.max_session_bytes); delete keys it no longer needs (kv_list shows their sizes)",
				ErrSessionFull, key, size, total, lim.MaxSessionBytes)
		}
		var created int64
		if err := q.QueryRowContext(ctx, upsertItemQuery, string(id), key, value, size, now).Scan(&created); err != nil {
			return err
		}
		it.CreatedAt = dbutil.Time(created)
		usage.Keys, usage.Bytes = others+1, otherBytes+size
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrSessionFull) || errors.Is(err, ErrNoSession) {
			return Item{}, Usage{}, err
		}
		return Item{}, Usage{}, fmt.Errorf("store key %q of session %s: %w", key, id, err)
	}
	return it, usage, nil
}

// Delete removes key from the session and reports whether it was there.
func (s *Store) Delete(ctx context.Context, id sessions.ID, key string) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, err
	}
	res, err := s.db.Write().ExecContext(ctx, deleteItemQuery, string(id), key)
	if err != nil {
		return false, fmt.Errorf("delete key %q of session %s: %w", key, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete key %q of session %s: %w", key, id, err)
	}
	return n > 0, nil
}

// Usage is what the session stores, against the limits.
func (s *Store) Usage(ctx context.Context, id sessions.ID) (Usage, error) {
	u := Usage{Limits: s.Limits()}
	if err := s.db.Read().QueryRowContext(ctx, usageQuery, string(id)).Scan(&u.Keys, &u.Bytes); err != nil {
		return Usage{}, fmt.Errorf("usage of session %s's storage: %w", id, err)
	}
	return u, nil
}

// ListOptions select a page of keys.
type ListOptions struct {
	// Prefix keeps the keys that start with it.
	Prefix string
	// Cursor is the Next of the previous page; empty for the first.
	Cursor string
	// Limit is the page size, 1 to MaxListLimit; 0 means 100.
	Limit int
	// Values includes each item's value.
	Values bool
}

// Page is one page of a session's keys, in byte order.
type Page struct {
	Items []Item `json:"items"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next_cursor,omitempty"`
}

// List pages through the session's keys in byte order.
func (s *Store) List(ctx context.Context, id sessions.ID, opts ListOptions) (Page, error) {
	after, err := decodeCursor(opts.Cursor)
	if err != nil {
		return Page{}, err
	}
	if opts.Prefix != "" && checkValue(opts.Prefix) != nil {
		return Page{}, fmt.Errorf("%w: the prefix is not UTF-8 text without NUL characters", ErrInvalidKey)
	}
	limit := opts.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > MaxListLimit {
		return Page{}, fmt.Errorf("list storage of session %s: a page holds 1 to %d keys, not %d", id, MaxListLimit, limit)
	}
	query := listItemsQuery
	if opts.Values {
		query = listItemsWithValuesQuery
	}
	items, err := dbutil.Query(ctx, s.db.Read(), query, func(r dbutil.Scanner) (Item, error) {
		var (
			it         Item
			created, u int64
			value      string
		)
		dest := []any{&it.Key, &it.Size, &created, &u}
		if opts.Values {
			dest = append(dest, &value)
		}
		if err := r.Scan(dest...); err != nil {
			return Item{}, err
		}
		it.CreatedAt, it.UpdatedAt = dbutil.Time(created), dbutil.Time(u)
		if opts.Values {
			it.Value = &value
		}
		return it, nil
	}, string(id), after, utf8.RuneCountInString(opts.Prefix), opts.Prefix, limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("list storage of session %s: %w", id, err)
	}
	page := Page{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.Next = encodeCursor(items[limit-1].Key)
	}
	if page.Items == nil {
		page.Items = []Item{}
	}
	return page, nil
}

// checkValue refuses what no engine stores alike: text that is not UTF-8,
// or that holds a NUL (PostgreSQL rejects both).
func checkValue(v string) error {
	switch {
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: the value is not valid UTF-8 text", ErrInvalidValue)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: the value holds a NUL character; store text without it", ErrInvalidValue)
	}
	return nil
}
