package cron

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/dbutil"
)

const forgetRunsQuery = `UPDATE cron_runs SET result = '' WHERE session_id IN (%s)`

// ForgetSessions removes the results that run receipts keep of deleted
// sessions (a receipt stays, with its status and times). It is a
// sessions.DeleteHook, run in the transaction that deletes them.
func ForgetSessions(ctx context.Context, q dbutil.Querier, in string, args []any) error {
	if _, err := q.ExecContext(ctx, fmt.Sprintf(forgetRunsQuery, in), args...); err != nil {
		return fmt.Errorf("forget deleted sessions' cron results: %w", err)
	}
	return nil
}
