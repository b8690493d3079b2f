package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyd/parley/dbutil"
)

const (
	sessionSummariesQuery = `SELECT id FROM memory_items WHERE kind = 'summary' AND source_session_id IN (%s)`

	deleteSessionSummariesQuery = `DELETE FROM memory_items WHERE kind = 'summary' AND source_session_id IN (%s)`
)

// ForgetSessions removes deleted sessions' compaction summaries from
// memory and, through the index queue, from an external index; the
// memories a person's agent wrote outlive the session they were written
// in. It is a sessions.DeleteHook, run in the transaction that deletes
// the sessions.
func (s *Store) ForgetSessions(ctx context.Context, q dbutil.Querier, in string, args []any) error {
	if err := forgetSessions(ctx, q, in, args, s.queued(), s.now()); err != nil {
		return err
	}
	s.afterWrite()
	return nil
}

// ForgetSessions is Store.ForgetSessions for a process that runs no
// Store (the CLI's sessions delete and prune): external says whether the
// configured index is outside the database (memory.index: typesense), so
// the daemon's indexer deletes the summaries there.
func ForgetSessions(external bool) func(ctx context.Context, q dbutil.Querier, in string, args []any) error {
	return func(ctx context.Context, q dbutil.Querier, in string, args []any) error {
		return forgetSessions(ctx, q, in, args, external, time.Now())
	}
}

func forgetSessions(ctx context.Context, q dbutil.Querier, in string, args []any, external bool, now time.Time) error {
	if external {
		rows, err := q.QueryContext(ctx, fmt.Sprintf(sessionSummariesQuery, in), args...)
		if err != nil {
			return fmt.Errorf("find deleted sessions' summaries: %w", err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := q.ExecContext(ctx, enqueueQuery, id, opDelete, dbutil.Millis(now)); err != nil {
				return fmt.Errorf("queue deleting summary %s from the index: %w", id, err)
			}
		}
	}
	if _, err := q.ExecContext(ctx, fmt.Sprintf(deleteSessionSummariesQuery, in), args...); err != nil {
		return fmt.Errorf("forget deleted sessions' summaries: %w", err)
	}
	return nil
}
