package sessions

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

// MaxPageSize is the largest page List returns.
const MaxPageSize = 200

const (
	// Newest first: ids are UUIDv7, so id order is creation order. Filters
	// are added only when set, so the planner can use sessions_status_id.
	listSessionsQuery = `SELECT ` + sessionColumns + ` FROM sessions`

	renameSessionQuery = `UPDATE sessions SET title = $2, updated_at = $3, revision = revision + 1 WHERE id = $1`

	deleteSessionQuery = `DELETE FROM sessions WHERE id = $1 RETURNING ` + sessionColumns
)

// ListOptions filters and pages a session listing.
type ListOptions struct {
	// Limit is the page size, 1 to MaxPageSize.
	Limit int
	// Cursor is the Next of the previous page; empty for the first page.
	Cursor  string
	Status  Status
	Surface string
	AgentID string
	// UserID keeps only sessions of this user.
	UserID string
	// Ephemeral adds sidecar sessions (metadata.ephemeral = true), which
	// are left out by default.
	Ephemeral bool
}

// Page is one page of sessions. Next is empty on the last page.
type Page struct {
	Sessions []Session `json:"sessions"`
	Next     string    `json:"next_cursor,omitempty"`
}

const cursorPrefix = "s1:"

func encodeCursor(id ID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + string(id)))
}

func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return "", ErrBadCursor
	}
	id := strings.TrimPrefix(string(b), cursorPrefix)
	if _, err := uuid.Parse(id); err != nil {
		return "", ErrBadCursor
	}
	return id, nil
}

// List implements Store.
func (s *SQLStore) List(ctx context.Context, opts ListOptions) (Page, error) {
	if opts.Limit < 1 || opts.Limit > MaxPageSize {
		return Page{}, fmt.Errorf("%w: %d; use 1 to %d", ErrBadLimit, opts.Limit, MaxPageSize)
	}
	after, err := decodeCursor(opts.Cursor)
	if err != nil {
		return Page{}, err
	}
	switch opts.Status {
	case "", StatusActive, StatusArchived:
	default:
		return Page{}, fmt.Errorf("unknown status %q: use active or archived", opts.Status)
	}
	// One extra row tells whether another page follows.
	var where []string
	var args []any
	for _, f := range []struct{ cond, v string }{
		{"id < ", after}, {"status = ", string(opts.Status)}, {"surface = ", opts.Surface}, {"agent_id = ", opts.AgentID},
		{"user_id = ", opts.UserID},
	} {
		if f.v != "" {
			args = append(args, f.v)
			where = append(where, fmt.Sprintf("%s$%d", f.cond, len(args)))
		}
	}
	if !opts.Ephemeral {
		args = append(args, false)
		where = append(where, fmt.Sprintf("ephemeral = $%d", len(args)))
	}
	q := listSessionsQuery
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, opts.Limit+1)
	q += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	var page Page
	page.Sessions, err = dbutil.ViewQuery(ctx, s.db, q, scanSession, args...)
	if err != nil {
		return Page{}, fmt.Errorf("list sessions: %w", err)
	}
	if len(page.Sessions) > opts.Limit {
		page.Sessions = page.Sessions[:opts.Limit]
		page.Next = encodeCursor(page.Sessions[opts.Limit-1].ID)
	}
	return page, nil
}

// sessionByID reads session id; a missing one is ErrNotFound.
func sessionByID(ctx context.Context, q dbutil.Querier, id ID) (Session, error) {
	sess, err := scanSession(q.QueryRowContext(ctx, sessionByIDQuery, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return sess, err
}

// Session implements Store.
func (s *SQLStore) Session(ctx context.Context, id ID) (Session, error) {
	sess, err := dbutil.ViewRow(ctx, s.db, sessionByIDQuery, scanSession, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session %s: %w", id, err)
	}
	return sess, nil
}

// Rename implements Store.
func (s *SQLStore) Rename(ctx context.Context, id ID, title string) error {
	res, err := s.db.Write().ExecContext(ctx, renameSessionQuery, id, title, dbutil.Millis(s.now()))
	s.actives.forget(id)
	if err != nil {
		return fmt.Errorf("rename session %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("rename session %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return nil
}

// Delete implements Store.
func (s *SQLStore) Delete(ctx context.Context, id ID) error {
	var sess Session
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		if err := s.runDeleteHooks(ctx, q, []ID{id}); err != nil {
			return err
		}
		var err error
		sess, err = scanSession(q.QueryRowContext(ctx, deleteSessionQuery, id))
		if err != nil {
			return err
		}
		return s.lifecycle(ctx, q, Lifecycle{Type: EventSessionDeleted, Session: id, Key: sess.Key, At: s.now()})
	})
	s.history.drop(id)
	s.actives.forget(id)
	s.actives.forgetChildren(id)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	s.bus.Publish(events.Event{Type: EventSessionDeleted, SessionID: string(id), At: s.now(),
		Data: SessionDeleted{ID: id, Key: sess.Key}})
	return nil
}

const activeInChatQuery = `SELECT ` + sessionColumns + ` FROM sessions
	WHERE surface = $1 AND surface_id = $2 AND status = 'active' ORDER BY id LIMIT 50`

// ActiveInChat lists the active sessions of one chat on a surface (a group
// has one per agent; a direct chat one per user and agent): where a note
// for the chat, such as a cron report, joins the conversation.
func (s *SQLStore) ActiveInChat(ctx context.Context, surface, chatID string) ([]Session, error) {
	out, err := dbutil.ViewQuery(ctx, s.db, activeInChatQuery, scanSession, surface, chatID)
	if err != nil {
		return nil, fmt.Errorf("sessions of chat %s:%s: %w", surface, chatID, err)
	}
	return out, nil
}
