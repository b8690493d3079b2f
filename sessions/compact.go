package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/dbutil"
)

// ErrCompactionConflict means the live context changed between planning a
// compaction and committing it (another compaction or a rewind ran), so the
// summary no longer matches what it would replace. Nothing was changed.
var ErrCompactionConflict = errors.New("the session's messages changed while it was being compacted")

const (
	compactSessionQuery = `SELECT token_count FROM sessions WHERE id = $1`

	countSummarizedQuery = `SELECT count(*) FROM messages WHERE session_id = $1 AND seq <= $2 AND hidden_at IS NULL`

	archiveThroughQuery = `INSERT INTO message_archive (` + messageColumns + `, archived_at, compaction_id)
	SELECT ` + messageColumns + `, $3, $4 FROM messages WHERE session_id = $1 AND seq <= $2`

	deleteThroughQuery = `DELETE FROM messages WHERE session_id = $1 AND seq <= $2`

	archiveOneQuery = `INSERT INTO message_archive (` + messageColumns + `, archived_at, compaction_id)
	SELECT ` + messageColumns + `, $4, $5 FROM messages WHERE session_id = $1 AND id = $2 AND seq > $3`

	deleteOneQuery = `DELETE FROM messages WHERE session_id = $1 AND id = $2 AND seq > $3`

	// The token count is recomputed from what stays live, rather than
	// adjusted, so it can't drift.
	compactedSessionQuery = `UPDATE sessions SET compaction_summary = $2, message_count = message_count + 1,
	token_count = (SELECT CAST(COALESCE(SUM(token_estimate), 0) AS BIGINT) FROM messages WHERE session_id = $1 AND hidden_at IS NULL),
	prompt_tokens = prompt_tokens + $3, completion_tokens = completion_tokens + $4,
	reasoning_tokens = reasoning_tokens + $5, cache_read = cache_read + $6, cache_write = cache_write + $7,
	cost_usd = cost_usd + $8, updated_at = $9, revision = revision + 1
	WHERE id = $1
	RETURNING token_count`
)

// CompactInput is one compaction: which live messages a summary replaces,
// and the summary.
type CompactInput struct {
	// Through is the seq of the last message the summary covers. Every
	// message with a seq up to it (hidden ones too) moves to the archive, and
	// the summary takes this seq, so it sorts before the messages kept.
	Through int64
	// Expect is how many visible messages with a seq up to Through the
	// summary was written from. If the log no longer holds exactly that
	// many, Compact fails with ErrCompactionConflict and changes nothing.
	Expect int
	// Also names further live messages, after Through, to archive with the
	// summarized ones: the memory flush's synthetic messages, which are
	// compaction's own work and no part of the conversation.
	Also []MessageID
	// Summary is the summary text; it becomes a system message with the
	// summary flag, and the session's compaction_summary.
	Summary string
	// Model and Usage are the summarizer's; the usage joins the rollups.
	Model string
	Usage *Usage
	// Tx, if set, runs inside the same transaction once the summary message
	// is stored (compaction indexes the summary there, so it is never lost).
	// Its error rolls the whole compaction back.
	Tx func(ctx context.Context, q dbutil.Querier, summary Message) error
}

// CompactResult is what a compaction did.
type CompactResult struct {
	// Summary is the inserted summary message. Its ID is the compaction id
	// recorded on every message it archived.
	Summary Message
	// Archived counts the messages moved to message_archive.
	Archived int
	// TokensBefore and TokensAfter are the session's token_count rollup.
	TokensBefore, TokensAfter int64
}

// Compact replaces the start of a session's live context with a summary, in
// one transaction: it moves the summarized messages (and in.Also) to
// message_archive, stamped with archived_at and the compaction id, inserts
// the summary, sets compaction_summary and recomputes the token count. Nothing
// is deleted, and a failure at any point leaves the session as it was.
func (s *SQLStore) Compact(ctx context.Context, id ID, in CompactInput) (CompactResult, error) {
	summary := strings.TrimSpace(cleanText(in.Summary))
	if summary == "" {
		return CompactResult{}, fmt.Errorf("%w: a compaction needs a summary", ErrInvalidMessage)
	}
	if in.Through < 1 || in.Expect < 1 {
		return CompactResult{}, fmt.Errorf("%w: a compaction must cover at least one message", ErrInvalidMessage)
	}
	mid, err := newID()
	if err != nil {
		return CompactResult{}, err
	}
	now := s.now()
	m := Message{ID: MessageID(mid), SessionID: id, Seq: in.Through, Role: RoleSystem, Content: summary,
		Model: cleanText(in.Model), Usage: in.Usage, Summary: true, CreatedAt: dbutil.Time(dbutil.Millis(now))}
	m.TokenEstimate = m.estimate()
	usageJSON, err := nullJSON(m.Usage, m.Usage != nil)
	if err != nil {
		return CompactResult{}, fmt.Errorf("%w: usage: %v", ErrInvalidMessage, err)
	}
	var u Usage
	if in.Usage != nil {
		u = *in.Usage
	}

	var res CompactResult
	err = s.db.Tx(ctx, func(tx dbutil.Querier) error {
		res = CompactResult{}
		err := tx.QueryRowContext(ctx, compactSessionQuery, id).Scan(&res.TokensBefore)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, countSummarizedQuery, id, in.Through).Scan(&n); err != nil {
			return err
		}
		if n != in.Expect {
			return fmt.Errorf("%w: %d messages up to seq %d, and the summary covers %d", ErrCompactionConflict, n, in.Through, in.Expect)
		}
		at := dbutil.Millis(now)
		if _, err := tx.ExecContext(ctx, archiveThroughQuery, id, in.Through, at, m.ID); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, deleteThroughQuery, id, in.Through)
		if err != nil {
			return err
		}
		moved, err := r.RowsAffected()
		if err != nil {
			return err
		}
		res.Archived = int(moved)
		for _, extra := range in.Also {
			if _, err := tx.ExecContext(ctx, archiveOneQuery, id, extra, in.Through, at, m.ID); err != nil {
				return err
			}
			r, err := tx.ExecContext(ctx, deleteOneQuery, id, extra, in.Through)
			if err != nil {
				return err
			}
			if n, err := r.RowsAffected(); err != nil {
				return err
			} else if n != 1 {
				return fmt.Errorf("%w: message %s is no longer live after seq %d", ErrCompactionConflict, extra, in.Through)
			}
			res.Archived++
		}
		if _, err := tx.ExecContext(ctx, insertMessageQuery, m.ID, id, m.Seq, m.Role, m.Content, nil, nil, "",
			m.Model, usageJSON, false, true, nil, m.TokenEstimate, at, nil); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, compactedSessionQuery, id, summary, u.Input, u.Output, u.Reasoning,
			u.CacheRead, u.CacheWrite, u.CostUSD, at).Scan(&res.TokensAfter); err != nil {
			return err
		}
		if in.Tx != nil {
			if err := in.Tx(ctx, tx, m); err != nil {
				return err
			}
		}
		return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionCompacted, Session: id, At: now,
			Compacted: &CompactedInfo{Archived: res.Archived, Through: in.Through, SummaryID: m.ID, TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter}})
	})
	s.history.drop(id)
	s.actives.forget(id) // its token count changed
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact session %s: %w", id, err)
	}
	res.Summary = m
	return res, nil
}
