package sessions

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

const messageColumns = `id, session_id, seq, role, content, parts, tool_calls, tool_call_id, model, usage,
	synthetic, summary, hidden_at, token_estimate, created_at, metadata`

const (
	// Claims the next seq and adds the message to the rollups in one step.
	bumpSessionQuery = `UPDATE sessions SET
	last_seq = last_seq + 1, message_count = message_count + 1, token_count = token_count + $2,
	prompt_tokens = prompt_tokens + $3, completion_tokens = completion_tokens + $4,
	reasoning_tokens = reasoning_tokens + $5, cache_read = cache_read + $6, cache_write = cache_write + $7,
	cost_usd = cost_usd + $8, last_active_at = $9, updated_at = $9, revision = revision + 1
	WHERE id = $1
	RETURNING ` + stampColumns

	insertMessageQuery = `INSERT INTO messages (` + messageColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`

	// An append whose id is taken adds nothing, and says so.
	appendMessageQuery = insertMessageQuery + ` ON CONFLICT (id) DO NOTHING`

	// The live context is what is visible in messages: compaction moves what
	// it summarized to message_archive, and gives the summary the seq of the
	// last message it archived, so the summary sorts first.
	liveMessagesQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND hidden_at IS NULL
	ORDER BY seq`

	messageByIDQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages WHERE id = $1`

	historyMessagesQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL)
	ORDER BY seq`

	// An archived message sorts before a live one with the same seq (the
	// summary that replaced it), and, in the archive, before a summary
	// that took its seq.
	fullHistoryMessagesQuery = `SELECT ` + messageColumns + `, NULL, '', 1 AS live FROM messages
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL)
	UNION ALL
	SELECT ` + messageColumns + `, archived_at, compaction_id, 0 AS live FROM message_archive
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL)
	ORDER BY seq, live, summary`

	sessionExistsQuery = `SELECT 1 FROM sessions WHERE id = $1`

	// A page of the history: at most $6 messages after the position
	// ($3 seq, $4 live, $5 summary; see Position).
	pagedHistoryQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL) AND ` + afterPosition1 + `
	ORDER BY seq LIMIT $6`
	pagedFullHistoryQuery = `SELECT ` + messageColumns + `, NULL, '', 1 AS live FROM messages
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL) AND ` + afterPosition1 + `
	UNION ALL
	SELECT ` + messageColumns + `, archived_at, compaction_id, 0 AS live FROM message_archive
	WHERE session_id = $1 AND ($2 OR hidden_at IS NULL) AND ` + afterPosition0 + `
	ORDER BY seq, live, summary LIMIT $6`
	// afterPosition1 and afterPosition0 hold for a live and an archived
	// message past the position, a seek on the (session_id, seq) keys.
	// (seq >= $3 on its own lets PostgreSQL seek with it too.)
	afterPosition1 = `seq >= $3 AND (seq > $3 OR (1 > $4 OR (1 = $4 AND summary > $5)))`
	afterPosition0 = `seq >= $3 AND (seq > $3 OR (0 > $4 OR (0 = $4 AND summary > $5)))`

	// The unique (session_id, seq) index serves both: the subquery walks
	// back from the newest message to the $2-th last user message.
	recentMessagesQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND hidden_at IS NULL AND seq >= COALESCE((
		SELECT seq FROM messages WHERE session_id = $1 AND hidden_at IS NULL AND role = 'user'
		ORDER BY seq DESC LIMIT 1 OFFSET $2), 0)
	ORDER BY seq`

	// A summary sorts first in the live context (it takes the seq of the
	// last message it replaced).
	firstLiveMessageQuery = `SELECT ` + messageColumns + `, NULL, '' FROM messages
	WHERE session_id = $1 AND hidden_at IS NULL ORDER BY seq LIMIT 1`
)

// MessagesOptions chooses between the live context and the full history.
type MessagesOptions struct {
	// Archived adds the messages compaction moved to the archive.
	Archived bool
	// Hidden adds rewound (hidden) messages.
	Hidden bool
	// Turns, when above 0, reads only the live context's last Turns user
	// turns (from the Turns-th last user message on), plus its summary:
	// what a prompt with that history limit sends, read without touching
	// the rest. It applies to the live context only.
	Turns int
	// Limit, when above 0, pages the history: at most Limit messages,
	// those after After (from the start when After is nil). Turns and
	// AfterAppend don't apply to a page.
	Limit int
	After *Position
	// AfterAppend is the message the caller has just appended to the
	// session through this store, when it reads the live context as that
	// append left it: a turn reads its prompt so, right after storing the
	// user's message. When that append brought the store's cached copy up
	// to date (its commit showed nothing else had changed the session),
	// the copy is returned without reading the database again; otherwise
	// the read is as usual. Only the first such read after the append is
	// served from it.
	AfterAppend MessageID
}

// Append implements Store. A message that carries its own ID is appended
// at most once: a retry after an error whose commit in fact succeeded
// returns the stored message. Text is stored as valid UTF-8 without NUL
// bytes (invalid bytes become U+FFFD), the same on both engines. Appending
// to an archived session is allowed, so that a turn in flight when its
// session resets still records its reply beside its question.
func (s *SQLStore) Append(ctx context.Context, id ID, m Message) (Message, error) {
	return s.AppendWith(ctx, id, m, nil)
}

// AppendWith implements Store. A message appended before (its id taken)
// is returned as Append returns it, and also doesn't run.
func (s *SQLStore) AppendWith(ctx context.Context, id ID, m Message, also AppendHook) (Message, error) {
	if !m.Role.Valid() {
		return Message{}, fmt.Errorf("%w: role %q; use user, assistant, system or tool", ErrInvalidMessage, m.Role)
	}
	supplied := m.ID != ""
	if !supplied {
		mid, err := newID()
		if err != nil {
			return Message{}, err
		}
		m.ID = MessageID(mid)
	} else if _, err := uuid.Parse(string(m.ID)); err != nil {
		return Message{}, fmt.Errorf("%w: id %q is not a UUID", ErrInvalidMessage, m.ID)
	}
	if m.Role == RoleUser && !m.Synthetic {
		for _, hook := range s.beforeAppendHooks {
			hook(ctx, id, &m)
		}
	}
	m.Content, m.ToolCallID, m.Model = cleanText(m.Content), cleanText(m.ToolCallID), cleanText(m.Model)
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
	if err := checkMetadata(m.Metadata); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	meta := nullMetadata(m.Metadata)
	if m.TokenEstimate <= 0 {
		m.TokenEstimate = m.estimate()
	}
	var u Usage
	if m.Usage != nil {
		u = *m.Usage
	}
	now := s.now()
	m.SessionID, m.CreatedAt = id, dbutil.Time(dbutil.Millis(now))
	m.ArchivedAt, m.CompactionID = time.Time{}, ""

	var at stamp
	err = s.db.Tx(ctx, func(tx dbutil.Querier) error {
		var err error
		at, err = scanStamp(tx.QueryRowContext(ctx, bumpSessionQuery, id, m.TokenEstimate, u.Input, u.Output, u.Reasoning,
			u.CacheRead, u.CacheWrite, u.CostUSD, dbutil.Millis(now)))
		m.Seq = at.lastSeq
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("append message to session %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("append message to session %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, appendMessageQuery, m.ID, id, m.Seq, m.Role, m.Content, parts, calls,
			m.ToolCallID, m.Model, usageJSON, m.Synthetic, m.Summary, dbutil.NullMillis(m.HiddenAt),
			m.TokenEstimate, dbutil.Millis(now), meta)
		if err != nil {
			return fmt.Errorf("append message to session %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("append message to session %s: %w", id, err)
		} else if n == 0 {
			// The id is taken: undo the seq this claimed.
			return errAppended
		}
		for _, hook := range s.appendHooks {
			if err := hook(ctx, tx, m); err != nil {
				return fmt.Errorf("append message to session %s: %w", id, err)
			}
		}
		if also != nil {
			if err := also(ctx, tx, m); err != nil {
				return fmt.Errorf("append message to session %s: %w", id, err)
			}
		}
		return nil
	})
	if errors.Is(err, errAppended) {
		// Appended before (a retry whose commit had in fact succeeded):
		// the stored message, if it is this session's. The session may
		// have changed since that append, so a read after it is not one
		// the cache can answer.
		s.history.unmark(id)
		s.actives.forget(id) // that append changed the session unseen
		prev, err := s.messageByID(ctx, m.ID)
		if err != nil {
			return Message{}, fmt.Errorf("append message to session %s: %w", id, err)
		}
		if prev.SessionID != id {
			return Message{}, fmt.Errorf("%w: id %s belongs to another session", ErrInvalidMessage, m.ID)
		}
		return prev, nil
	}
	if err != nil {
		return Message{}, err
	}
	s.history.appended(id, m, at)
	s.actives.appended(id, at, m.TokenEstimate, u)
	s.bus.Publish(events.Event{Type: EventMessageAppended, SessionID: string(id), At: now, Data: MessageAppended{m}})
	return m, nil
}

// errAppended rolls back an append whose message id is already stored.
var errAppended = errors.New("message id already appended")

// messageByID reads a live message by id.
func (s *SQLStore) messageByID(ctx context.Context, mid MessageID) (Message, error) {
	return dbutil.ViewRow(ctx, s.db, messageByIDQuery, func(r dbutil.Scanner) (Message, error) { return scanMessage(r) }, mid)
}

// cleanText makes s storable on both engines: PostgreSQL refuses NUL bytes
// and invalid UTF-8, which SQLite would keep.
func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// nullMetadata is a message's metadata as its column holds it: NULL for
// none or an empty object.
func nullMetadata(raw json.RawMessage) sql.NullString {
	if s := strings.TrimSpace(string(raw)); s != "" && s != "null" && s != "{}" {
		return sql.NullString{String: s, Valid: true}
	}
	return sql.NullString{}
}

// checkMetadata says what is wrong with a message's metadata: it must be a
// JSON object, or nothing.
func checkMetadata(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	// An object is valid JSON that starts with a brace: checked without
	// decoding it; what fails is decoded, for the error's detail.
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '{' && json.Valid(raw) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("metadata must be a JSON object: %v", err)
	}
	return nil
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

// Position is a place in a session's history, in its order: by seq, an
// archived message before the live one sharing its seq (the summary that
// replaced it), and a message before a summary sharing its seq.
type Position struct {
	Seq      int64
	Archived bool
	Summary  bool
}

// PositionOf is m's place in its session's history.
func PositionOf(m Message) Position {
	return Position{Seq: m.Seq, Archived: m.Archived(), Summary: m.Summary}
}

// Messages implements Store.
func (s *SQLStore) Messages(ctx context.Context, id ID, opts MessagesOptions) ([]Message, error) {
	live := !opts.Archived && !opts.Hidden && opts.Limit <= 0
	if live && s.history == nil {
		s.uncachedReads.Add(1)
		live = false
	}
	if live && opts.AfterAppend != "" {
		if msgs, ok := s.history.afterAppend(id, opts.Turns, opts.AfterAppend); ok {
			s.history.hits.Add(1)
			return msgs, nil
		}
	}
	var out []Message
	err := s.db.View(ctx, func(r dbutil.Querier) error {
		var err error
		if live {
			out, err = s.readLive(ctx, r, id, opts.Turns)
		} else {
			out, err = readMessages(ctx, r, id, opts)
		}
		return err
	})
	return out, err
}

func readMessages(ctx context.Context, r dbutil.Querier, id ID, opts MessagesOptions) ([]Message, error) {
	var rows *sql.Rows
	var err error
	archived := false
	switch {
	case opts.Limit > 0:
		after := Position{Seq: -1} // before every message
		if opts.After != nil {
			after = *opts.After
		}
		live := 1
		if after.Archived {
			live = 0
		}
		query := pagedHistoryQuery
		if opts.Archived {
			query, archived = pagedFullHistoryQuery, true
		}
		rows, err = r.QueryContext(ctx, query, id, opts.Hidden, after.Seq, live, after.Summary, opts.Limit)
	case opts.Archived:
		rows, err = r.QueryContext(ctx, fullHistoryMessagesQuery, id, opts.Hidden)
		archived = true
	case opts.Turns > 0 && !opts.Hidden:
		return readRecent(ctx, r, id, opts.Turns)
	case opts.Hidden:
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
		var m Message
		var err error
		if archived {
			m, err = scanMessage(rows, new(int))
		} else {
			m, err = scanMessage(rows)
		}
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

// readRecent reads the live context's summary and last turns.
func readRecent(ctx context.Context, r dbutil.Querier, id ID, turns int) ([]Message, error) {
	rows, err := r.QueryContext(ctx, recentMessagesQuery, id, turns-1)
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
	rows.Close()
	first, err := scanMessage(r.QueryRowContext(ctx, firstLiveMessageQuery, id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var one int
		if err := r.QueryRowContext(ctx, sessionExistsQuery, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
		} else if err != nil {
			return nil, fmt.Errorf("read session %s: %w", id, err)
		}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read messages of session %s: %w", id, err)
	}
	if first.Summary && (len(out) == 0 || out[0].ID != first.ID) {
		out = append([]Message{first}, out...)
	}
	return out, nil
}

func scanMessage(r dbutil.Scanner, extra ...any) (Message, error) {
	var (
		m                       Message
		parts, calls, usageJSON sql.NullString
		meta                    sql.NullString
		hidden, archived        sql.NullInt64
		created                 int64
	)
	dest := []any{&m.ID, &m.SessionID, &m.Seq, &m.Role, &m.Content, &parts, &calls, &m.ToolCallID, &m.Model,
		&usageJSON, &m.Synthetic, &m.Summary, &hidden, &m.TokenEstimate, &created, &meta, &archived, &m.CompactionID}
	err := r.Scan(append(dest, extra...)...)
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
	if meta.Valid {
		m.Metadata = json.RawMessage(meta.String)
	}
	m.HiddenAt, m.ArchivedAt, m.CreatedAt = dbutil.NullTime(hidden), dbutil.NullTime(archived), dbutil.Time(created)
	return m, nil
}
