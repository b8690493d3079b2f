package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

// Store keeps sessions and their messages.
type Store interface {
	// Resolve returns the active session for key, creating it when there is
	// none, or archiving it and creating a new one when policy says it is
	// stale. isNew reports whether the returned session was just created.
	Resolve(ctx context.Context, key Key, policy Policy) (s Session, isNew bool, err error)
	// Reset archives key's active session, if any, and starts a new one.
	Reset(ctx context.Context, key Key) (Session, error)
	// Active returns key's active session, or ErrNotFound.
	Active(ctx context.Context, key Key) (Session, error)
	// Session returns a session, active or archived, by id.
	Session(ctx context.Context, id ID) (Session, error)
	// List pages through sessions, newest first.
	List(ctx context.Context, opts ListOptions) (Page, error)
	// Rename sets a session's title.
	Rename(ctx context.Context, id ID, title string) error
	// Delete removes a session and all its messages, archived ones included.
	Delete(ctx context.Context, id ID) error
	// Append adds a message at the end of a session's log and updates the
	// session's rollups in the same transaction.
	Append(ctx context.Context, id ID, m Message) (Message, error)
	// AppendWith is Append that also runs also in the append's
	// transaction, once m is stored: what also writes commits with the
	// message, or neither does, and its error fails the append. A caller
	// records there what must not outlive or predate the message (a
	// turn's outcome with its reply), in one durable write.
	AppendWith(ctx context.Context, id ID, m Message, also AppendHook) (Message, error)
	// Messages returns the live context, or with opts the full history.
	// The messages may be shared with other readers (the store's cache):
	// copy one before changing it.
	Messages(ctx context.Context, id ID, opts MessagesOptions) ([]Message, error)
}

// SQLStore is the Store on SQLite or PostgreSQL.
type SQLStore struct {
	db  *dbutil.DB
	bus *events.Bus
	log *slog.Logger
	now func() time.Time
	// history caches recent live context reads; nil when turned off.
	history *historyCache
	// uncachedReads counts live context reads made with the cache off.
	uncachedReads atomic.Int64
	// actives remembers conversations' active sessions; nil when off.
	actives *activeCache
	// appendHooks run in each Append's transaction.
	appendHooks []AppendHook
	// deleteHooks run in each delete's transaction.
	deleteHooks []DeleteHook
	// lifecycleHooks run in each lifecycle change's transaction.
	lifecycleHooks []LifecycleHook
	// beforeAppendHooks run before a user message's append.
	beforeAppendHooks []BeforeAppendHook
	// soleWriter: see WithSoleWriter.
	soleWriter bool
}

var _ Store = (*SQLStore)(nil)

// Option configures a SQLStore.
type Option func(*SQLStore)

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(s *SQLStore) { s.now = now } }

// WithBus publishes lifecycle events on bus.
func WithBus(bus *events.Bus) Option { return func(s *SQLStore) { s.bus = bus } }

// WithLogger sets the logger.
func WithLogger(log *slog.Logger) Option { return func(s *SQLStore) { s.log = log } }

// NewStore returns a Store on a migrated database.
func NewStore(db *dbutil.DB, opts ...Option) *SQLStore {
	s := &SQLStore{db: db, now: time.Now, log: slog.New(slog.DiscardHandler), history: newHistoryCache(DefaultHistoryCache),
		actives: newActiveCache(DefaultActiveCache)}
	for _, o := range opts {
		o(s)
	}
	return s
}

const sessionColumns = `id, user_id, workspace_id, agent_id, surface, surface_id, status, title,
	parent_id, parent_message_id, metadata, reset_reason, last_active_at, archived_at, created_at,
	updated_at, message_count, last_seq, token_count, prompt_tokens, completion_tokens,
	reasoning_tokens, cache_read, cache_write, cost_usd, compaction_summary`

const (
	activeSessionQuery = `SELECT ` + sessionColumns + ` FROM sessions
	WHERE surface = $1 AND surface_id = $2 AND agent_id = $3 AND user_id = $4 AND workspace_id = $5
	AND status = 'active'`

	sessionByIDQuery = `SELECT ` + sessionColumns + ` FROM sessions WHERE id = $1`

	insertSessionQuery = `INSERT INTO sessions
	(id, user_id, workspace_id, agent_id, surface, surface_id, status, last_active_at, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $7, $7)
	ON CONFLICT DO NOTHING`

	// Archives only if nobody touched the session since it was judged stale.
	archiveStaleSessionQuery = `UPDATE sessions SET status = 'archived', archived_at = $3, updated_at = $3, reset_reason = $4,
	revision = revision + 1
	WHERE id = $1 AND status = 'active' AND last_active_at = $2`

	archiveActiveSessionQuery = `UPDATE sessions SET status = 'archived', archived_at = $6, updated_at = $6, reset_reason = $7,
	revision = revision + 1
	WHERE surface = $1 AND surface_id = $2 AND agent_id = $3 AND user_id = $4 AND workspace_id = $5
	AND status = 'active'
	RETURNING ` + sessionColumns
)

func scanSession(r dbutil.Scanner) (Session, error) {
	var (
		s                   Session
		parentID, parentMsg sql.NullString
		metadata            string
		lastActive, created int64
		updated             int64
		archived            sql.NullInt64
	)
	err := r.Scan(&s.ID, &s.Key.UserID, &s.Key.WorkspaceID, &s.Key.AgentID, &s.Key.Surface, &s.Key.SurfaceID,
		&s.Status, &s.Title, &parentID, &parentMsg, &metadata, &s.ResetReason, &lastActive, &archived, &created,
		&updated, &s.MessageCount, &s.LastSeq, &s.Rollup.TokenCount, &s.Rollup.PromptTokens,
		&s.Rollup.CompletionTokens, &s.Rollup.ReasoningTokens, &s.Rollup.CacheRead, &s.Rollup.CacheWrite,
		&s.Rollup.CostUSD, &s.CompactionSummary)
	if err != nil {
		return Session{}, err
	}
	s.ParentID, s.ParentMessageID = ID(parentID.String), MessageID(parentMsg.String)
	s.Metadata = []byte(metadata)
	s.LastActiveAt, s.CreatedAt, s.UpdatedAt = dbutil.Time(lastActive), dbutil.Time(created), dbutil.Time(updated)
	s.ArchivedAt = dbutil.NullTime(archived)
	return s, nil
}

func newID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return u.String(), nil
}

func keyArgs(k Key) []any {
	return []any{k.Surface, k.SurfaceID, k.AgentID, k.UserID, k.WorkspaceID}
}

func active(ctx context.Context, q dbutil.Querier, key Key) (Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, activeSessionQuery, keyArgs(key)...))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("active session %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("read active session %s: %w", key, err)
	}
	return s, nil
}

// Active returns key's active session, or ErrNotFound.
func (s *SQLStore) Active(ctx context.Context, key Key) (Session, error) {
	if err := key.Validate(); err != nil {
		return Session{}, err
	}
	return s.active(ctx, key, false)
}

// active reads key's active session on a reader, or on the writer, which
// sees a concurrent resolve's commit at once.
func (s *SQLStore) active(ctx context.Context, key Key, fromWriter bool) (Session, error) {
	if fromWriter {
		return active(ctx, s.db.Write(), key)
	}
	if sess, ok := s.cachedActive(ctx, key); ok {
		return sess, nil
	}
	var sess Session
	var rev int64
	var err error
	if verr := s.db.View(ctx, func(q dbutil.Querier) error {
		sess, rev, err = activeAt(ctx, q, key)
		return nil
	}); verr != nil {
		return Session{}, verr
	}
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("active session %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("read active session %s: %w", key, err)
	}
	s.actives.put(sess, rev)
	sess.Metadata = append([]byte(nil), sess.Metadata...)
	return sess, nil
}

// Resolve implements Store.
func (s *SQLStore) Resolve(ctx context.Context, key Key, policy Policy) (Session, bool, error) {
	if err := key.Validate(); err != nil {
		return Session{}, false, err
	}
	// Each pass either returns or lost a race to a concurrent resolve, whose
	// result the next pass reads. A handful of passes is plenty.
	fromWriter := false
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := s.active(ctx, key, fromWriter)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Session{}, false, err
		}
		now := s.now()
		if err == nil {
			reason, stale := policy.Stale(cur.LastActiveAt, now)
			if !stale {
				return cur, false, nil
			}
			created, ok, err := s.replace(ctx, cur, reason, now)
			if err != nil {
				return Session{}, false, err
			}
			if ok {
				s.log.InfoContext(ctx, "session reset", "session_key", key.String(), "agent_id", key.AgentID,
					"reason", reason, "old_session_id", cur.ID, "session_id", created.ID)
				return created, true, nil
			}
		} else {
			created, ok, err := s.create(ctx, key, now)
			if err != nil {
				return Session{}, false, err
			}
			if ok {
				return created, true, nil
			}
		}
		// Lost a race: read our own writes' winner from the writer.
		fromWriter = true
	}
	return Session{}, false, fmt.Errorf("resolve session %s: too much contention, try again", key)
}

// create inserts a new active session for key; ok is false when another
// one appeared first.
func (s *SQLStore) create(ctx context.Context, key Key, now time.Time) (Session, bool, error) {
	var created Session
	var ok bool
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		var err error
		created, ok, err = insertSession(ctx, tx, key, now)
		if err != nil || !ok {
			return err
		}
		return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionCreated, Session: created.ID, Key: key, At: now})
	})
	if err != nil || !ok {
		return Session{}, false, err
	}
	s.rememberNew(created)
	s.bus.Publish(events.Event{Type: EventSessionCreated, SessionID: string(created.ID), At: now, Data: SessionCreated{created}})
	return created, true, nil
}

func insertSession(ctx context.Context, tx dbutil.Querier, key Key, now time.Time) (Session, bool, error) {
	id, err := newID()
	if err != nil {
		return Session{}, false, err
	}
	res, err := tx.ExecContext(ctx, insertSessionQuery, id, key.UserID, key.WorkspaceID, key.AgentID, key.Surface,
		key.SurfaceID, dbutil.Millis(now))
	if err != nil {
		return Session{}, false, fmt.Errorf("create session %s: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return Session{}, false, err
	}
	created, err := scanSession(tx.QueryRowContext(ctx, sessionByIDQuery, id))
	if err != nil {
		return Session{}, false, fmt.Errorf("read new session %s: %w", key, err)
	}
	return created, true, nil
}

// rememberNew caches a session insertSession just committed: a new row
// is at revision 0, with no messages. A cron run's or a webhook delivery's
// session is a single turn, so its history is not kept.
func (s *SQLStore) rememberNew(created Session) {
	c := created
	c.Metadata = append([]byte(nil), created.Metadata...)
	s.actives.put(c, 0)
	if created.Key.Surface != SurfaceCron && created.Key.Surface != SurfaceWebhook {
		s.history.seed(created.ID, stamp{updated: dbutil.Millis(created.UpdatedAt)})
	}
}

// replace archives a stale session and creates its successor in one
// transaction; ok is false when the session changed under us.
func (s *SQLStore) replace(ctx context.Context, old Session, reason string, now time.Time) (Session, bool, error) {
	var created Session
	var ok bool
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		res, err := tx.ExecContext(ctx, archiveStaleSessionQuery, old.ID, dbutil.Millis(old.LastActiveAt),
			dbutil.Millis(now), reason)
		if err != nil {
			return fmt.Errorf("archive session %s: %w", old.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		created, ok, err = insertSession(ctx, tx, old.Key, now)
		if err != nil || !ok {
			return err
		}
		return s.resetLifecycle(ctx, tx, old.ID, created, reason, now)
	})
	if err != nil || !ok {
		return Session{}, false, err
	}
	s.actives.forget(old.ID)
	s.rememberNew(created)
	at := dbutil.Time(dbutil.Millis(now))
	old.Status, old.ArchivedAt, old.UpdatedAt, old.ResetReason = StatusArchived, at, at, reason
	s.bus.Publish(events.Event{Type: EventSessionReset, SessionID: string(created.ID), At: now,
		Data: SessionReset{Old: old, New: created, Reason: reason}})
	return created, true, nil
}

// resetLifecycle tells the lifecycle hooks of a reset: old archived, and
// created in its place.
func (s *SQLStore) resetLifecycle(ctx context.Context, tx dbutil.Querier, old ID, created Session, reason string, now time.Time) error {
	if err := s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionArchived, Session: old, Key: created.Key, Reason: reason, At: now}); err != nil {
		return err
	}
	return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionReset, Session: created.ID, Key: created.Key, Old: old, Reason: reason, At: now})
}

// Reset implements Store.
func (s *SQLStore) Reset(ctx context.Context, key Key) (Session, error) {
	if err := key.Validate(); err != nil {
		return Session{}, err
	}
	now := s.now()
	var (
		old     Session
		created Session
		ok      bool
	)
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		args := append(keyArgs(key), dbutil.Millis(now), ReasonManual)
		var err error
		old, err = scanSession(tx.QueryRowContext(ctx, archiveActiveSessionQuery, args...))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("archive session %s: %w", key, err)
		}
		created, ok, err = insertSession(ctx, tx, key, now)
		if err != nil {
			return err
		}
		if !ok {
			// A concurrent reset or resolve created the successor first.
			created, err = active(ctx, tx, key)
			return err
		}
		if old.ID == "" {
			return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionCreated, Session: created.ID, Key: key, At: now})
		}
		return s.resetLifecycle(ctx, tx, old.ID, created, ReasonManual, now)
	})
	if err != nil {
		return Session{}, err
	}
	if old.ID != "" {
		s.actives.forget(old.ID)
	}
	switch {
	case old.ID != "":
		s.log.InfoContext(ctx, "session reset", "session_key", key.String(), "agent_id", key.AgentID,
			"reason", ReasonManual, "old_session_id", old.ID, "session_id", created.ID)
		s.bus.Publish(events.Event{Type: EventSessionReset, SessionID: string(created.ID), At: now,
			Data: SessionReset{Old: old, New: created, Reason: ReasonManual}})
	case ok:
		s.bus.Publish(events.Event{Type: EventSessionCreated, SessionID: string(created.ID), At: now, Data: SessionCreated{created}})
	}
	return created, nil
}
