package gateway

import (
	"context"
	"fmt"
	"time"

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
