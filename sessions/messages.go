package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

const messageColumns = `id, session_id, seq, role, content, parts, tool_calls, tool_call_id, model, usage,
	synthetic, summary, hidden_at, token_estimate, created_at`

const (
	// Claims the next seq and adds the message to the rollups in one step.
	bumpSessionQuery = `UPDATE sessions SET
	last_seq = last_seq + 1, message_count = message_count + 1, token_count = token_count + $2,
	prompt_tokens = prompt_tokens + $3, completion_tokens = completion_tokens + $4,
	reasoning_tokens = reasoning_tokens + $5, cache_read = cache_read + $6, cache_write = cache_write + $7,
	cost_usd = cost_usd + $8, last_active_at = $9, updated_at = $9
	WHERE id = $1
	RETURNING last_seq`

	insertMessageQuery = `INSERT INTO messages (` + messageColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`

	// The live context: visible messages from the latest visible summary on.
	liveMessagesQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND hidden_at IS NULL AND seq >= COALESCE(
		(SELECT MAX(seq) FROM messages WHERE session_id = $1 AND summary = TRUE AND hidden_at IS NULL), 0)
	ORDER BY seq`

	historyMessagesQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL)
	ORDER BY seq`

	fullHistoryMessagesQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL)
	UNION ALL
	SELECT ` + messageColumns + `, archived_at, compaction_id FROM message_archive
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL)
	ORDER BY seq`

	sessionExistsQuery = `SELECT 1 FROM sessions WHERE id = $1`
)

// MessagesOptions chooses between the live context and the full history.
type MessagesOptions struct {
	// History returns every message of the session, not only the live
	// context (the latest summary and what follows it).
	History bool
	// Archived adds messages that compaction moved to the archive (implies History).
	Archived bool
	// Hidden adds rewound (hidden) messages (implies History).
	Hidden bool
}

// Append implements Store.
func (s *SQLStore) Append(ctx context.Context, id ID, m Message) (Message, error) {
	if !m.Role.Valid() {
		return Message{}, fmt.Errorf("%w: role %q; use user, assistant, system or tool", ErrInvalidMessage, m.Role)
	}
	mid, err := newID()
	if err != nil {
		return Message{}, err
	}
	parts, err := nullJSON(m.Parts, len(m.Parts) > 0)
	if err != nil {
		return Message{}, fmt.Errorf("%w: parts: %v", ErrInvalidMessage, err)
	}
	calls, err := nullJSON(m.ToolCalls, len(m.ToolCalls) > 0)
	if err != nil {
		return Message{}, fmt.Errorf("%w: tool calls: %v", ErrInvalidMessage, err)
	}
	usageJSON, err := nullJSON(m.Usage, m.Usage != nil)
	if err != nil {
		return Message{}, fmt.Errorf("%w: usage: %v", ErrInvalidMessage, err)
	}
	if m.TokenEstimate <= 0 {
		m.TokenEstimate = m.estimate()
	}
	var u Usage
	if m.Usage != nil {
		u = *m.Usage
	}
	now := s.now()
	m.ID, m.SessionID, m.CreatedAt = MessageID(mid), id, dbutil.Time(dbutil.Millis(now))
	m.ArchivedAt, m.CompactionID = time.Time{}, ""

	err = s.db.Tx(ctx, func(tx dbutil.Querier) error {
		err := tx.QueryRowContext(ctx, bumpSessionQuery, id, m.TokenEstimate, u.Input, u.Output, u.Reasoning,
			u.CacheRead, u.CacheWrite, u.CostUSD, dbutil.Millis(now)).Scan(&m.Seq)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("append message to session %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("append message to session %s: %w", id, err)
		}
		_, err = tx.ExecContext(ctx, insertMessageQuery, m.ID, id, m.Seq, m.Role, m.Content, parts, calls,
			m.ToolCallID, m.Model, usageJSON, m.Synthetic, m.Summary, dbutil.NullMillis(m.HiddenAt),
			m.TokenEstimate, dbutil.Millis(now))
		if err != nil {
			return fmt.Errorf("append message to session %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return Message{}, err
	}
	s.bus.Publish(events.Event{Type: EventMessageAppended, SessionID: string(id), At: now, Data: MessageAppended{m}})
	return m, nil
}

func nullJSON(v any, present bool) (sql.NullString, error) {
	if !present {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// Messages implements Store.
func (s *SQLStore) Messages(ctx context.Context, id ID, opts MessagesOptions) ([]Message, error) {
	var rows *sql.Rows
	var err error
	r := s.db.Read()
	switch {
	case opts.Archived:
		rows, err = r.QueryContext(ctx, fullHistoryMessagesQuery, id, opts.Hidden)
	case opts.History || opts.Hidden:
		rows, err = r.QueryContext(ctx, historyMessagesQuery, id, opts.Hidden)
	default:
		rows, err = r.QueryContext(ctx, liveMessagesQuery, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read messages of session %s: %w", id, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("read messages of session %s: %w", id, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read messages of session %s: %w", id, err)
	}
	if len(out) == 0 {
		// An empty log and a missing session look alike; tell them apart.
		var one int
		err := r.QueryRowContext(ctx, sessionExistsQuery, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read session %s: %w", id, err)
		}
	}
	return out, nil
}

func scanMessage(r rowScanner) (Message, error) {
	var (
		m                       Message
		parts, calls, usageJSON sql.NullString
		hidden, archived        sql.NullInt64
		created                 int64
	)
	err := r.Scan(&m.ID, &m.SessionID, &m.Seq, &m.Role, &m.Content, &parts, &calls, &m.ToolCallID, &m.Model,
		&usageJSON, &m.Synthetic, &m.Summary, &hidden, &m.TokenEstimate, &created, &archived, &m.CompactionID)
	if err != nil {
		return Message{}, err
	}
	if parts.Valid {
		if err := json.Unmarshal([]byte(parts.String), &m.Parts); err != nil {
			return Message{}, fmt.Errorf("message %s parts: %w", m.ID, err)
		}
	}
	if calls.Valid {
		if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
			return Message{}, fmt.Errorf("message %s tool calls: %w", m.ID, err)
		}
	}
	if usageJSON.Valid {
		m.Usage = new(Usage)
		if err := json.Unmarshal([]byte(usageJSON.String), m.Usage); err != nil {
			return Message{}, fmt.Errorf("message %s usage: %w", m.ID, err)
		}
	}
	m.HiddenAt, m.ArchivedAt, m.CreatedAt = dbutil.NullTime(hidden), dbutil.NullTime(archived), dbutil.Time(created)
	return m, nil
}
