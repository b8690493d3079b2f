package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parleyd/parley/dbutil"
)

const (
	// Hand an accepted message to the replica holding its session's lane,
	// if that replica is live: its fence lock, taken shared (as its own
	// writes take it, parley_fence), keeps it from being fenced until the
	// handover commits, so a fence takes the message over with the rest
	// of that replica's. No row of it is locked: its heartbeat never
	// waits for a handover (one paused by a frozen process).
	forwardLockQuery  = `SELECT pg_advisory_xact_lock_shared(1885434465, hashtext($1))`
	forwardCheckQuery = `SELECT 1 FROM replicas WHERE instance = $1 AND fenced_at IS NULL`
	// $4 is always 'accepted' (see finishInboundQuery).
	forwardQuery  = `UPDATE inbound SET owner = $2, lane = $3 WHERE id = $1 AND status = $4`
	forwardNotify = `SELECT pg_notify('parley_forward', $1)`

	// The messages other replicas handed to this one, in accept order.
	forwardedQuery = `SELECT i.id, i.payload, COALESCE(i.session_id, m.session_id, '')
	FROM inbound i LEFT JOIN messages m ON m.id = i.id
	WHERE i.owner = $1 AND i.status = 'accepted' AND i.lane IS NOT NULL
	ORDER BY i.received_at, i.id LIMIT $2`
)

// Forward hands the accepted message id to the replica holder, which
// holds its session's lane (hold), and tells it. ok is false if holder is
// no longer live: claim the lane again.
func (s *Store) Forward(ctx context.Context, id, hold, holder string) (ok bool, err error) {
	err = s.db.Tx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, forwardLockQuery, holder); err != nil {
			return err
		}
		var one int
		err := q.QueryRowContext(ctx, forwardCheckQuery, holder).Scan(&one)
		if afterForwardCheck != nil {
			afterForwardCheck()
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, forwardQuery, id, holder, hold, string(InboundAccepted)); err != nil {
			return err
		}
		ok = true
		_, err = q.ExecContext(ctx, forwardNotify, holder)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("hand message %s to replica %s: %w", id, holder, err)
	}
	return ok, nil
}

// afterForwardCheck, set by tests, runs inside Forward's transaction once
// the holder is found live: a process paused there.
var afterForwardCheck func()

// Forwarded lists the unanswered messages other replicas handed to this
// one, oldest first.
func (s *Store) Forwarded(ctx context.Context, limit int) ([]AcceptedInbound, error) {
	out, err := dbutil.Query(ctx, s.db.Read(), forwardedQuery, func(sc dbutil.Scanner) (AcceptedInbound, error) {
		var a AcceptedInbound
		var payload string
		if err := sc.Scan(&a.ID, &payload, &a.SessionID); err != nil {
			return a, err
		}
		return a, json.Unmarshal([]byte(payload), &a.Inbound)
	}, s.owner, limit)
	if err != nil {
		return nil, fmt.Errorf("list the messages handed to this replica: %w", err)
	}
	return out, nil
}
