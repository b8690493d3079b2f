package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

// Backlog is the outbox as an operator sees it: what waits to be sent and
// what failed for good.
type Backlog struct {
	Pending int `json:"pending"`
	// OldestPending is when the oldest pending reply was queued; zero with
	// none.
	OldestPending time.Time `json:"oldest_pending,omitzero"`
	Failed        int       `json:"failed"`
}

const backlogQuery = `SELECT
	COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0),
	COALESCE(MIN(CASE WHEN status = 'pending' THEN created_at END), 0),
	COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0)
	FROM outbox WHERE status <> 'sent'`

// Backlog counts the outbox's pending and failed replies.
func (s *Store) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var oldest int64
	if err := s.db.Reader().QueryRowContext(ctx, backlogQuery).Scan(&b.Pending, &oldest, &b.Failed); err != nil {
		return Backlog{}, fmt.Errorf("count the outbox backlog: %w", err)
	}
	if oldest > 0 {
		b.OldestPending = dbutil.Time(oldest)
	}
	return b, nil
}

// Unsent is a reply that is waiting or failed for good, as an operator
// sees it.
type Unsent struct {
	ID        string
	Adapter   adapters.ID
	ChatID    string
	Text      string
	Status    string // pending or failed
	Attempts  int
	LastError string
	CreatedAt time.Time
	NextAt    time.Time // the next attempt, for a pending one
}

const unsentQuery = `SELECT id, adapter, chat_id, text, status, attempts, last_error, created_at, next_attempt_at
	FROM outbox WHERE status = $1 ORDER BY created_at DESC LIMIT $2`

// Unsent lists the newest replies with status (pending or failed), at
// most limit.
func (s *Store) Unsent(ctx context.Context, status string, limit int) ([]Unsent, error) {
	out, err := dbutil.ViewQuery(ctx, s.db, unsentQuery, func(r dbutil.Scanner) (Unsent, error) {
		var u Unsent
		var adapter string
		var created, next int64
		err := r.Scan(&u.ID, &adapter, &u.ChatID, &u.Text, &u.Status, &u.Attempts, &u.LastError, &created, &next)
		u.Adapter, u.CreatedAt, u.NextAt = adapters.ID(adapter), dbutil.Time(created), dbutil.Time(next)
		return u, err
	}, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s replies: %w", status, err)
	}
	return out, nil
}

// ErrNotFailed is Retry's error for a reply that isn't failed.
var ErrNotFailed = errors.New("no failed reply has that id")

const retryQuery = `UPDATE outbox SET status = 'pending', attempts = 0, last_error = '', next_attempt_at = $2, lease_until = 0
	WHERE id = $1 AND status = 'failed'`

// Retry makes a failed reply pending again, due now: an operator's retry
// once the cause (a blocked bot, a wrong chat) is fixed.
func (s *Store) Retry(ctx context.Context, id string) error {
	res, err := s.db.Write().ExecContext(ctx, retryQuery, id, dbutil.Millis(s.now()))
	if err != nil {
		return fmt.Errorf("retry reply %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: %s", ErrNotFailed, id)
	}
	return nil
}

const denyPairingQuery = `DELETE FROM pairing_requests WHERE code = $1 AND approved_at IS NULL`

// DenyPairing drops a waiting pairing request: its sender stays out (and a
// new message of theirs asks again).
func (s *Store) DenyPairing(ctx context.Context, code string) error {
	code = strings.ToUpper(strings.Join(strings.Fields(code), ""))
	res, err := s.db.Write().ExecContext(ctx, denyPairingQuery, code)
	if err != nil {
		return fmt.Errorf("deny pairing %s: %w", code, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: no waiting pairing request has code %q", ErrPairingNotFound, code)
	}
	return nil
}
