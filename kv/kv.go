// Package kv is a session's own key/value storage: what an agent keeps for
// the rest of a conversation (a to-do list, a user's choices) with the
// kv_get, kv_set, kv_list and kv_delete tools, each call scoped to the
// session it runs in, and readable through the API.
package kv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// The limits of one session's storage.
const (
	MaxKeyBytes   = 128
	MaxValueBytes = 16 << 10
	MaxKeys       = 100
)

// ErrNotFound is a key the session doesn't have.
var ErrNotFound = errors.New("no such key")

// ErrLimit is a key, a value or a count past its limit.
var ErrLimit = errors.New("past the session storage's limit")

// Entry is one key and its value.
type Entry struct {
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Store keeps sessions' entries in parley's database.
type Store struct {
	db  *dbutil.DB
	now func() time.Time
}

// New returns a Store on db.
func New(db *dbutil.DB) *Store { return &Store{db: db, now: time.Now} }

// CheckKey says what is wrong with a key, or nil.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the key is empty", ErrLimit)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: the key is %d bytes, at most %d", ErrLimit, len(key), MaxKeyBytes)
	case !utf8.ValidString(key) || strings.ContainsAny(key, "\x00\n\r"):
		return fmt.Errorf("%w: the key must be one line of text", ErrLimit)
	}
	return nil
}

// Get returns the session's value of key.
func (s *Store) Get(ctx context.Context, id sessions.ID, key string) (Entry, error) {
	e := Entry{Key: key}
	var at int64
	err := s.db.Read().QueryRowContext(ctx, `SELECT value, updated_at FROM session_kv WHERE session_id = $1 AND key = $2`, string(id), key).Scan(&e.Value, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read %q: %w", key, err)
	}
	e.UpdatedAt = dbutil.Time(at)
	return e, nil
}

// Set stores value under key, refusing what is past the limits.
func (s *Store) Set(ctx context.Context, id sessions.ID, key, value string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("%w: the value is %d bytes, at most %d", ErrLimit, len(value), MaxValueBytes)
	}
	if !utf8.ValidString(value) || strings.ContainsRune(value, 0) {
		return fmt.Errorf("%w: the value must be text", ErrLimit)
	}
	return s.db.Tx(ctx, func(q dbutil.Querier) error {
		var n int
		var exists bool
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN key = $2 THEN 1 ELSE 0 END), 0) > 0 FROM session_kv WHERE session_id = $1`,
			string(id), key).Scan(&n, &exists); err != nil {
			return err
		}
		if !exists && n >= MaxKeys {
			return fmt.Errorf("%w: the session has %d keys, at most %d; delete one first", ErrLimit, n, MaxKeys)
		}
		_, err := q.ExecContext(ctx, `INSERT INTO session_kv (session_id, key, value, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			string(id), key, value, dbutil.Millis(s.now()))
		return err
	})
}

// Delete removes key; it says whether it was there.
func (s *Store) Delete(ctx context.Context, id sessions.ID, key string) (bool, error) {
	res, err := s.db.Write().ExecContext(ctx, `DELETE FROM session_kv WHERE session_id = $1 AND key = $2`, string(id), key)
	if err != nil {
		return false, fmt.Errorf("delete %q: %w", key, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// List returns the session's entries whose key starts with prefix, by key.
func (s *Store) List(ctx context.Context, id sessions.ID, prefix string) ([]Entry, error) {
	out, err := dbutil.Query(ctx, s.db.Read(), `SELECT key, value, updated_at FROM session_kv WHERE session_id = $1 ORDER BY key`,
		func(r dbutil.Scanner) (Entry, error) {
			var e Entry
			var at int64
			err := r.Scan(&e.Key, &e.Value, &at)
			e.UpdatedAt = dbutil.Time(at)
			return e, err
		}, string(id))
	if err != nil {
		return nil, fmt.Errorf("list the session's keys: %w", err)
	}
	kept := out[:0]
	for _, e := range out {
		if strings.HasPrefix(e.Key, prefix) {
			kept = append(kept, e)
		}
	}
	return kept, nil
}
