package gateway

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/dbutil"
)

const (
	// The row stays, so a platform delivering the message again is still
	// dropped as a duplicate; its text goes. One still waiting for its
	// turn is marked: its session is gone.
	forgetInboundQuery = `UPDATE inbound SET payload = '{}', error = '',
	status = CASE WHEN status = 'accepted' THEN 'marked' ELSE status END
	WHERE session_id IN (%s)`

	forgetOutboxQuery = `DELETE FROM outbox WHERE session_id IN (%[1]s) OR file_session_id IN (%[1]s)`
)

// ForgetSessions removes what the gateway keeps of deleted sessions' text:
// their messages' payloads and their replies, sent or not. It is a
// sessions.DeleteHook, run in the transaction that deletes them.
func ForgetSessions(ctx context.Context, q dbutil.Querier, in string, args []any) error {
	if _, err := q.ExecContext(ctx, fmt.Sprintf(forgetInboundQuery, in), args...); err != nil {
		return fmt.Errorf("forget deleted sessions' messages: %w", err)
	}
	if _, err := q.ExecContext(ctx, fmt.Sprintf(forgetOutboxQuery, in), args...); err != nil {
		return fmt.Errorf("forget deleted sessions' replies: %w", err)
	}
	return nil
}
