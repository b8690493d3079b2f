package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

const (
	// Only an active session: one reset or archived meanwhile is left as is.
	archiveSessionQuery = `UPDATE sessions SET status = 'archived', archived_at = $2, updated_at = $2, reset_reason = $3,
	revision = revision + 1
	WHERE id = $1 AND status = 'active'`

	// Only an archived session, and only while its conversation has no
	// other active one (the unique index would refuse it too).
	unarchiveSessionQuery = `UPDATE sessions SET status = 'active', archived_at = NULL, updated_at = $2, reset_reason = '',
	last_active_at = $2, revision = revision + 1
	WHERE id = $1 AND status = 'archived'`

	// The oldest archived sessions archived before $1, a batch at a time.
	prunableSessionsQuery = `SELECT id FROM sessions
	WHERE status = 'archived' AND archived_at IS NOT NULL AND archived_at < $1
	ORDER BY archived_at, id LIMIT %d`

	// What a batch's sessions hold, counted before they go (their
	// messages, archive rows, rewinds and callbacks go with them: the
	// foreign keys cascade).
	countLiveMessagesQuery     = `SELECT count(*) FROM messages WHERE session_id IN (%s)`
	countArchivedMessagesQuery = `SELECT count(*) FROM message_archive WHERE session_id IN (%s)`

	// Still archived: a session is never deleted while active.
	deleteArchivedSessionsQuery = `DELETE FROM sessions WHERE status = 'archived' AND id IN (%s)`
)

// ReasonFinished archives a session whose one run ended: a cron fire's or a
// webhook delivery's.
const ReasonFinished = "finished"

// Archive archives an active session, for reason, leaving it readable
// (sessions ls --status archived, the API); it reports whether the session
// was active. Its key's next message starts a new session.
func (s *SQLStore) Archive(ctx context.Context, id ID, reason string) (bool, error) {
	now := s.now()
	var n int64
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		res, err := tx.ExecContext(ctx, archiveSessionQuery, string(id), dbutil.Millis(now), reason)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionArchived, Session: id, Reason: reason, At: now})
	})
	s.actives.forget(id)
	if err != nil {
		return false, fmt.Errorf("archive session %s: %w", id, err)
	}
	return n > 0, nil
}

// Unarchive makes an archived session active again, as it was, so its
// conversation goes on in it: its key's next message joins it. A session
// already active is left as it is. It fails with ErrConflict, changing
// nothing, while its conversation has another active session (a newer
// one, begun after it was archived): archive that one first. A chat's
// idle or daily reset may archive it again at its next message, as it
// would any session that old.
func (s *SQLStore) Unarchive(ctx context.Context, id ID) (Session, error) {
	now := s.now()
	var out Session
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		cur, err := sessionByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if cur.Status == StatusActive {
			out = cur
			return nil
		}
		switch other, err := active(ctx, tx, cur.Key); {
		case err == nil:
			return fmt.Errorf("%w: its conversation has another active session, %s; archive that one first", ErrConflict, other.ID)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if _, err := tx.ExecContext(ctx, unarchiveSessionQuery, string(id), dbutil.Millis(now)); err != nil {
			return err
		}
		if err := s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionUnarchived, Session: id, Key: cur.Key, At: now}); err != nil {
			return err
		}
		out, err = sessionByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("unarchive session %s: %w", id, err)
	}
	return out, nil
}

// PruneResult is what PruneArchived deleted.
type PruneResult struct {
	Sessions int64 `json:"sessions"`
	// Messages are the sessions' messages, live and archived by compaction.
	Messages int64 `json:"messages"`
}

// pruneBatch is how many sessions PruneArchived deletes per transaction.
const pruneBatch = 200

// PruneArchived deletes the sessions archived before before, with their
// messages, compaction archives, rewinds and reply callbacks, a batch per
// transaction, and says how many it deleted. An active session is never
// deleted, however old.
func (s *SQLStore) PruneArchived(ctx context.Context, before time.Time) (PruneResult, error) {
	var total PruneResult
	for {
		var ids []ID
		var got PruneResult
		err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
			rows, err := tx.QueryContext(ctx, fmt.Sprintf(prunableSessionsQuery, pruneBatch), dbutil.Millis(before))
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, ID(id))
			}
			rows.Close()
			if err := rows.Err(); err != nil || len(ids) == 0 {
				return err
			}
			in, args := placeholders(ids)
			var live, archived int64
			if err := tx.QueryRowContext(ctx, fmt.Sprintf(countLiveMessagesQuery, in), args...).Scan(&live); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, fmt.Sprintf(countArchivedMessagesQuery, in), args...).Scan(&archived); err != nil {
				return err
			}
			if err := s.runDeleteHooks(ctx, tx, ids); err != nil {
				return err
			}
			for _, id := range ids {
				if err := s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionDeleted, Session: id, Reason: "pruned", At: s.now()}); err != nil {
					return err
				}
			}
			res, err := tx.ExecContext(ctx, fmt.Sprintf(deleteArchivedSessionsQuery, in), args...)
			if err != nil {
				return err
			}
			got.Sessions, err = res.RowsAffected()
			got.Messages = live + archived
			return err
		})
		if err != nil {
			return total, fmt.Errorf("prune sessions archived before %s: %w", before.UTC().Format(time.RFC3339), err)
		}
		for _, id := range ids {
			s.history.drop(id)
			s.actives.forget(id)
			s.actives.forgetChildren(id)
			s.bus.Publish(events.Event{Type: EventSessionDeleted, SessionID: string(id), At: s.now(), Data: SessionDeleted{ID: id}})
		}
		total.Sessions += got.Sessions
		total.Messages += got.Messages
		if len(ids) < pruneBatch {
			return total, nil
		}
	}
}

// placeholders is "$1, $2, ..." for ids, and ids as arguments.
func placeholders(ids []ID) (string, []any) {
	marks := make([]string, len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		marks[i], args[i] = "$"+strconv.Itoa(i+1), string(id)
	}
	return strings.Join(marks, ", "), args
}

// pruneEvery is how often PruneLoop deletes the sessions archived past
// their age.
const pruneEvery = time.Hour

// PruneLoop deletes the sessions archived longer ago than age says
// (sessions.prune_archived_after; 0: keep them), at once and then every
// hour, until ctx ends. age is read at each pass, so a reload turns
// pruning on, off or changes it.
func (s *SQLStore) PruneLoop(ctx context.Context, age func() time.Duration, log *slog.Logger) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if age := age(); age > 0 {
			before := time.Now().Add(-age)
			res, err := s.PruneArchived(ctx, before)
			switch {
			case err != nil && ctx.Err() == nil:
				log.WarnContext(ctx, "prune archived sessions; the next pass tries again", "error", err)
			case res.Sessions > 0:
				log.InfoContext(ctx, "archived sessions pruned", "sessions", res.Sessions, "messages", res.Messages,
					"archived_before", before.UTC())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
