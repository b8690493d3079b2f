package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// ErrNothingToUnrewind means the session has no rewind left to undo.
var ErrNothingToUnrewind = errors.New("nothing to unrewind")

// stampedColumns lists messageColumns with hidden_at replaced by $3, for
// moving a row while stamping it.
const stampedColumns = `id, session_id, seq, role, content, parts, tool_calls, tool_call_id, model, usage,
	synthetic, summary, $3, token_estimate, created_at, metadata`

const (
	sessionMessageQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages WHERE id = $1 AND session_id = $2`

	archivedMessageQuery = `SELECT ` + messageColumns + `, archived_at, compaction_id FROM message_archive
	WHERE id = $1 AND session_id = $2`

	// A summary undone by a rewind goes to the archive, hidden, filed under
	// its own id.
	archiveSummaryQuery = `INSERT INTO message_archive (` + messageColumns + `, archived_at, compaction_id)
	SELECT ` + stampedColumns + `, $3, id FROM messages WHERE session_id = $1 AND id = $2`

	deleteLiveQuery = `DELETE FROM messages WHERE session_id = $1 AND id = $2`

	compactionRowsQuery = `SELECT id, archived_at FROM message_archive
	WHERE session_id = $1 AND compaction_id = $2 AND id <> $2 ORDER BY seq`

	unarchiveQuery = `INSERT INTO messages (` + messageColumns + `)
	SELECT ` + messageColumns + ` FROM message_archive WHERE session_id = $1 AND id = $2`

	deleteArchivedQuery = `DELETE FROM message_archive WHERE session_id = $1 AND id = $2`

	rearchiveQuery = `INSERT INTO message_archive (` + messageColumns + `, archived_at, compaction_id)
	SELECT ` + messageColumns + `, $3, $4 FROM messages WHERE session_id = $1 AND id = $2`

	unhideSummaryQuery = `INSERT INTO messages (` + messageColumns + `)
	SELECT id, session_id, seq, role, content, parts, tool_calls, tool_call_id, model, usage,
	synthetic, summary, NULL, token_estimate, created_at, metadata FROM message_archive WHERE session_id = $1 AND id = $2`

	hideAfterQuery = `UPDATE messages SET hidden_at = $3 WHERE session_id = $1 AND seq > $2 AND hidden_at IS NULL`

	// The first user message a rewind (its stamp) took back.
	firstTakenBackQuery = `SELECT metadata FROM messages WHERE session_id = $1 AND hidden_at = $2 AND role = 'user'
	ORDER BY seq LIMIT 1`

	unhideQuery = `UPDATE messages SET hidden_at = NULL WHERE session_id = $1 AND hidden_at = $2`

	latestSummaryQuery = `SELECT content FROM messages WHERE session_id = $1 AND summary = $2 AND hidden_at IS NULL
	ORDER BY seq DESC LIMIT 1`

	recomputeLiveQuery = `UPDATE sessions SET
	token_count = (SELECT CAST(COALESCE(SUM(token_estimate), 0) AS BIGINT) FROM messages WHERE session_id = $1 AND hidden_at IS NULL),
	compaction_summary = $2, updated_at = $3, revision = revision + 1
	WHERE id = $1`

	lastRewindStampQuery = `SELECT COALESCE(MAX(hidden_at), 0) FROM session_rewinds WHERE session_id = $1`

	insertRewindQuery = `INSERT INTO session_rewinds (id, session_id, message_id, hidden_at, last_seq, restored, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7)`

	// Stamps grow within a session (each is past the last), so the latest
	// rewind is the one with the latest stamp, whatever its id.
	latestRewindQuery = `SELECT id, hidden_at, last_seq, restored FROM session_rewinds
	WHERE session_id = $1 AND undone_at IS NULL ORDER BY hidden_at DESC LIMIT 1`

	rewindByKeyQuery = `SELECT message_id FROM session_rewinds WHERE session_id = $1 AND id = $2`

	undoRewindQuery = `UPDATE session_rewinds SET undone_at = $2 WHERE id = $1`
)

// restoredCompaction is a compaction a rewind undid: its summary's id, when
// it archived, and the messages it had archived.
type restoredCompaction struct {
	CompactionID MessageID   `json:"compaction_id"`
	ArchivedAt   int64       `json:"archived_at"`
	IDs          []MessageID `json:"ids"`
}

// RewindResult is what a rewind or unrewind changed.
type RewindResult struct {
	// Hidden counts the messages hidden (rewind) or shown again (unrewind).
	Hidden int `json:"hidden"`
	// Restored counts the compactions undone (rewind) or redone (unrewind).
	Restored int     `json:"restored"`
	Session  Session `json:"session"`
	// SnapshotID is the snapshot_id (metadata, from a message.user hook)
	// of the first user message a rewind took back: the host's world as it
	// was before that message, which it may restore.
	SnapshotID string `json:"snapshot_id,omitempty"`
}

// Rewind takes session id back to user message to: every message after it
// is hidden (hidden_at), so the next turn sees the conversation as if they
// had never happened. Nothing is deleted. If compaction archived the
// message, the compactions in the way are undone first: their messages come
// back into the live context and their summaries are hidden in the archive.
// Unrewind undoes the latest rewind.
func (s *SQLStore) Rewind(ctx context.Context, id ID, to MessageID) (RewindResult, error) {
	return s.rewind(ctx, id, to, false, "")
}

// RewindFrom is Rewind that hides user message from as well: the session
// goes back to before it was sent (/undo, /retry, an edit answered again).
// Unrewind undoes it as it undoes a rewind.
func (s *SQLStore) RewindFrom(ctx context.Context, id ID, from MessageID) (RewindResult, error) {
	return s.rewind(ctx, id, from, true, "")
}

// RewindFromOnce is RewindFrom made once under key (a chat command's or an
// edit's inbound id): a command run again after a crash finds its rewind
// made (RewoundBy) and doesn't take back a second exchange. A rewind
// already made under key fails with ErrConflict.
func (s *SQLStore) RewindFromOnce(ctx context.Context, id ID, from MessageID, key string) (RewindResult, error) {
	if key == "" {
		return RewindResult{}, fmt.Errorf("%w: a rewind made once needs a key", ErrInvalidMessage)
	}
	return s.rewind(ctx, id, from, true, key)
}

// RewoundBy returns the message the rewind made under key took back from
// (RewindFromOnce), hidden or not; ok is false when session id has no
// rewind under key.
func (s *SQLStore) RewoundBy(ctx context.Context, id ID, key string) (m Message, ok bool, err error) {
	var from MessageID
	err = s.db.Read().QueryRowContext(ctx, rewindByKeyQuery, id, rewindKey(id, key)).Scan(&from)
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, false, nil
	}
	if err == nil {
		m, err = scanMessage(s.db.Read().QueryRowContext(ctx, sessionMessageQuery, from, id))
		if errors.Is(err, sql.ErrNoRows) {
			m, err = scanMessage(s.db.Read().QueryRowContext(ctx, archivedMessageQuery, from, id))
		}
	}
	if err != nil {
		return Message{}, false, fmt.Errorf("session %s's rewind %s: %w", id, key, err)
	}
	return m, true, nil
}

// rewindKey is the id a rewind of session id made once under key is kept
// as: apart from the ids rewinds are given (newID), and from another
// session's under the same key.
func rewindKey(id ID, key string) string { return "once:" + string(id) + ":" + key }

func (s *SQLStore) rewind(ctx context.Context, id ID, to MessageID, inclusive bool, key string) (RewindResult, error) {
	var snapshot string
	res, err := s.changeLive(ctx, "rewind", id, func(tx dbutil.Querier, sess Session) (int, int, error) {
		if key != "" {
			var from MessageID
			err := tx.QueryRowContext(ctx, rewindByKeyQuery, id, rewindKey(id, key)).Scan(&from)
			if err == nil {
				return 0, 0, fmt.Errorf("%w: rewind %s was made already (from message %s)", ErrConflict, key, from)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return 0, 0, err
			}
		}
		var last int64
		if err := tx.QueryRowContext(ctx, lastRewindStampQuery, id).Scan(&last); err != nil {
			return 0, 0, err
		}
		// Each rewind's stamp is unique in its session, so unrewind finds
		// exactly the messages it hid.
		stamp := max(dbutil.Millis(s.now()), last+1)

		target, chain, err := locate(ctx, tx, id, to)
		if err != nil {
			return 0, 0, err
		}
		if target.Role != RoleUser {
			return 0, 0, fmt.Errorf("%w: rewind to message %s: it is a %s message; rewind to a user message", ErrInvalidMessage, to, target.Role)
		}
		if !target.HiddenAt.IsZero() {
			return 0, 0, fmt.Errorf("%w: message %s is hidden by an earlier rewind; unrewind first", ErrInvalidMessage, to)
		}
		var restored []restoredCompaction
		for _, cid := range chain {
			rc, err := undoCompaction(ctx, tx, id, cid, stamp)
			if err != nil {
				return 0, 0, err
			}
			restored = append(restored, rc)
		}
		after := target.Seq
		if inclusive {
			after--
		}
		n, err := execCount(ctx, tx, hideAfterQuery, id, after, stamp)
		if err != nil {
			return 0, 0, err
		}
		if n == 0 && len(restored) == 0 {
			return 0, 0, fmt.Errorf("%w: nothing follows message %s", ErrInvalidMessage, to)
		}
		rid := rewindKey(id, key)
		if key == "" {
			if rid, err = newID(); err != nil {
				return 0, 0, err
			}
		}
		restoredJSON, err := json.Marshal(restored)
		if err != nil {
			return 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, insertRewindQuery, rid, id, to, stamp, sess.LastSeq, string(restoredJSON),
			dbutil.Millis(s.now())); err != nil {
			return 0, 0, err
		}
		var meta sql.NullString
		if err := tx.QueryRowContext(ctx, firstTakenBackQuery, id, stamp).Scan(&meta); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, 0, err
		}
		var m struct {
			SnapshotID string `json:"snapshot_id"`
		}
		if meta.Valid && json.Unmarshal([]byte(meta.String), &m) == nil {
			snapshot = m.SnapshotID
		}
		return int(n), len(restored), nil
	})
	res.SnapshotID = snapshot
	return res, err
}

// changeLive runs change, a rewind or unrewind of session id that says how
// many messages and compactions it changed, in one transaction with the
// session's live totals recomputed after it. what names it in errors.
func (s *SQLStore) changeLive(ctx context.Context, what string, id ID, change func(tx dbutil.Querier, sess Session) (hidden, restored int, err error)) (RewindResult, error) {
	var res RewindResult
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		sess, err := sessionByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if res.Hidden, res.Restored, err = change(tx, sess); err != nil {
			return err
		}
		res.Session, err = recomputeLive(ctx, tx, id, s.now())
		return err
	})
	s.history.drop(id)
	s.actives.forget(id) // its token count changed
	if err != nil {
		return RewindResult{}, fmt.Errorf("%s session %s: %w", what, id, err)
	}
	return res, nil
}

// execCount runs query and returns how many rows it changed.
func execCount(ctx context.Context, tx dbutil.Querier, query string, args ...any) (int64, error) {
	r, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// locate finds message to in session id: live, or archived, with the
// compactions to undo to bring it back, outermost first.
func locate(ctx context.Context, tx dbutil.Querier, id ID, to MessageID) (Message, []MessageID, error) {
	m, err := scanMessage(tx.QueryRowContext(ctx, sessionMessageQuery, to, id))
	if err == nil {
		return m, nil, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Message{}, nil, err
	}
	m, err = scanMessage(tx.QueryRowContext(ctx, archivedMessageQuery, to, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, nil, fmt.Errorf("message %s in session %s: %w", to, id, ErrNotFound)
	}
	if err != nil {
		return Message{}, nil, err
	}
	if m.CompactionID == string(m.ID) {
		return Message{}, nil, fmt.Errorf("%w: message %s is a summary an earlier rewind hid", ErrInvalidMessage, to)
	}
	// Walk out through summaries that later compactions archived in turn.
	var chain []MessageID
	cid := MessageID(m.CompactionID)
	for range 1000 {
		chain = append([]MessageID{cid}, chain...)
		_, err := scanMessage(tx.QueryRowContext(ctx, sessionMessageQuery, cid, id))
		if err == nil {
			return m, chain, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Message{}, nil, err
		}
		sum, err := scanMessage(tx.QueryRowContext(ctx, archivedMessageQuery, cid, id))
		if err != nil {
			return Message{}, nil, fmt.Errorf("summary %s of message %s: %w", cid, to, err)
		}
		if sum.CompactionID == string(sum.ID) {
			return Message{}, nil, fmt.Errorf("%w: message %s belongs to a compaction an earlier rewind undid; unrewind first", ErrInvalidMessage, to)
		}
		cid = MessageID(sum.CompactionID)
	}
	return Message{}, nil, fmt.Errorf("%w: compaction chain of message %s too long", ErrInvalidMessage, to)
}

// undoCompaction moves compaction cid's messages back into the live log and
// its summary, hidden with stamp, into the archive.
func undoCompaction(ctx context.Context, tx dbutil.Querier, id ID, cid MessageID, stamp int64) (restoredCompaction, error) {
	rc := restoredCompaction{CompactionID: cid}
	rows, err := tx.QueryContext(ctx, compactionRowsQuery, id, cid)
	if err != nil {
		return rc, err
	}
	for rows.Next() {
		var mid MessageID
		if err := rows.Scan(&mid, &rc.ArchivedAt); err != nil {
			rows.Close()
			return rc, err
		}
		rc.IDs = append(rc.IDs, mid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rc, err
	}
	// The summary shares a seq with the last message it replaced: it
	// leaves the live log first.
	if _, err := tx.ExecContext(ctx, archiveSummaryQuery, id, cid, stamp); err != nil {
		return rc, fmt.Errorf("hide summary %s: %w", cid, err)
	}
	if _, err := tx.ExecContext(ctx, deleteLiveQuery, id, cid); err != nil {
		return rc, err
	}
	for _, mid := range rc.IDs {
		if _, err := tx.ExecContext(ctx, unarchiveQuery, id, mid); err != nil {
			return rc, fmt.Errorf("restore message %s: %w", mid, err)
		}
		if _, err := tx.ExecContext(ctx, deleteArchivedQuery, id, mid); err != nil {
			return rc, err
		}
	}
	return rc, nil
}

// Unrewind undoes session id's latest rewind: the messages it hid are shown
// again and the compactions it undid are redone. It fails with ErrConflict
// once the conversation went on after the rewind, and with
// ErrNothingToUnrewind when no rewind is left.
func (s *SQLStore) Unrewind(ctx context.Context, id ID) (RewindResult, error) {
	return s.changeLive(ctx, "unrewind", id, func(tx dbutil.Querier, sess Session) (int, int, error) {
		var (
			rid           string
			stamp, last   int64
			restoredJSON  string
			restoredComps []restoredCompaction
		)
		err := tx.QueryRowContext(ctx, latestRewindQuery, id).Scan(&rid, &stamp, &last, &restoredJSON)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, ErrNothingToUnrewind
		}
		if err != nil {
			return 0, 0, err
		}
		if sess.LastSeq != last {
			return 0, 0, fmt.Errorf("%w: the conversation went on after the rewind, so it can't be undone", ErrConflict)
		}
		if err := json.Unmarshal([]byte(restoredJSON), &restoredComps); err != nil {
			return 0, 0, fmt.Errorf("rewind %s: %w", rid, err)
		}
		n, err := execCount(ctx, tx, unhideQuery, id, stamp)
		if err != nil {
			return 0, 0, err
		}
		for i := len(restoredComps) - 1; i >= 0; i-- {
			if err := redoCompaction(ctx, tx, id, restoredComps[i]); err != nil {
				return 0, 0, err
			}
		}
		if _, err := tx.ExecContext(ctx, undoRewindQuery, rid, dbutil.Millis(s.now())); err != nil {
			return 0, 0, err
		}
		return int(n), len(restoredComps), nil
	})
}

// redoCompaction archives again the messages of a compaction a rewind
// undid, and brings its summary back into the live log.
func redoCompaction(ctx context.Context, tx dbutil.Querier, id ID, rc restoredCompaction) error {
	for _, mid := range rc.IDs {
		if _, err := tx.ExecContext(ctx, rearchiveQuery, id, mid, rc.ArchivedAt, rc.CompactionID); err != nil {
			return fmt.Errorf("archive message %s again: %w", mid, err)
		}
		if _, err := tx.ExecContext(ctx, deleteLiveQuery, id, mid); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, unhideSummaryQuery, id, rc.CompactionID); err != nil {
		return fmt.Errorf("restore summary %s: %w", rc.CompactionID, err)
	}
	if _, err := tx.ExecContext(ctx, deleteArchivedQuery, id, rc.CompactionID); err != nil {
		return err
	}
	return nil
}

// recomputeLive sets the token count and compaction summary from what is
// live now, and returns the session.
func recomputeLive(ctx context.Context, tx dbutil.Querier, id ID, now time.Time) (Session, error) {
	var summary string
	err := tx.QueryRowContext(ctx, latestSummaryQuery, id, true).Scan(&summary)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Session{}, err
	}
	if _, err := tx.ExecContext(ctx, recomputeLiveQuery, id, summary, dbutil.Millis(now)); err != nil {
		return Session{}, err
	}
	return scanSession(tx.QueryRowContext(ctx, sessionByIDQuery, id))
}
