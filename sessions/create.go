package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

const (
	insertSessionWithQuery = `INSERT INTO sessions
	(id, user_id, workspace_id, agent_id, surface, surface_id, status, title, metadata, parent_id, parent_message_id,
	last_active_at, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $8, $9, $10, $11, $11, $11)
	ON CONFLICT DO NOTHING`

	updateSessionQuery = `UPDATE sessions SET title = $2, agent_id = $3, metadata = $4, updated_at = $5, ephemeral = $6,
	revision = revision + 1
	WHERE id = $1`
)

// CreateOptions is what a session made on request (through the API) starts
// with, beyond its key.
type CreateOptions struct {
	Title string
	// Metadata is a JSON object; empty means {}. Its "model" key is the
	// session's model override.
	Metadata        json.RawMessage
	ParentID        ID
	ParentMessageID MessageID
}

// Create starts a new active session for key, or fails with ErrConflict if
// key already has one. Unlike Resolve it never reuses a session.
func (s *SQLStore) Create(ctx context.Context, key Key, opts CreateOptions) (Session, error) {
	if err := key.Validate(); err != nil {
		return Session{}, err
	}
	meta, err := normalizeMetadata(opts.Metadata)
	if err != nil {
		return Session{}, err
	}
	var created Session
	err = s.db.Tx(ctx, func(tx dbutil.Querier) error {
		var err error
		created, err = insertSessionWith(ctx, tx, key, opts.Title, meta, opts.ParentID, opts.ParentMessageID, s.now())
		if err == nil && ephemeral([]byte(meta)) {
			_, err = tx.ExecContext(ctx, setEphemeralQuery, created.ID, true)
		}
		if err != nil {
			return err
		}
		return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionCreated, Session: created.ID, Key: key, At: created.CreatedAt})
	})
	if err != nil {
		return Session{}, err
	}
	s.bus.Publish(events.Event{Type: EventSessionCreated, SessionID: string(created.ID), At: created.CreatedAt,
		Data: SessionCreated{created}})
	return created, nil
}

func insertSessionWith(ctx context.Context, tx dbutil.Querier, key Key, title, meta string, parent ID,
	parentMsg MessageID, now time.Time) (Session, error) {
	id, err := newID()
	if err != nil {
		return Session{}, err
	}
	res, err := tx.ExecContext(ctx, insertSessionWithQuery, id, key.UserID, key.WorkspaceID, key.AgentID, key.Surface,
		key.SurfaceID, cleanText(title), meta, nullString(string(parent)), nullString(string(parentMsg)), dbutil.Millis(now))
	if err != nil {
		return Session{}, fmt.Errorf("create session %s: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Session{}, fmt.Errorf("create session %s: %w", key, err)
	} else if n == 0 {
		return Session{}, fmt.Errorf("create session %s: %w", key, ErrConflict)
	}
	created, err := scanSession(tx.QueryRowContext(ctx, sessionByIDQuery, id))
	if err != nil {
		return Session{}, fmt.Errorf("read new session %s: %w", key, err)
	}
	return created, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// normalizeMetadata checks that raw is a JSON object and returns it
// compacted; empty is {}.
func normalizeMetadata(raw json.RawMessage) (string, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return "{}", nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return "", ErrInvalidMetadata
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", ErrInvalidMetadata
	}
	return string(b), nil
}

// Update changes some of a session's settings; nil fields stay as they are.
type Update struct {
	Title *string
	// AgentID moves the session to another agent.
	AgentID *string
	// Model sets the session's model override (its "model" metadata key);
	// an empty string removes it.
	Model *string
	// Metadata is merged into the session's metadata, key by key; a key set
	// to null is removed.
	Metadata json.RawMessage
}

// patchMetadata is stored metadata with patch merged in, key by key; a
// key set to null is removed. Metadata that is not an object counts as
// empty.
func patchMetadata(stored json.RawMessage, patch map[string]json.RawMessage) map[string]json.RawMessage {
	meta := map[string]json.RawMessage{}
	if len(stored) > 0 {
		if err := json.Unmarshal(stored, &meta); err != nil || meta == nil {
			meta = map[string]json.RawMessage{}
		}
	}
	for k, v := range patch {
		if string(v) == "null" {
			delete(meta, k)
		} else {
			meta[k] = v
		}
	}
	return meta
}

// Update applies u to session id and returns the result. Moving an active
// session to an agent whose key already has an active session fails with
// ErrConflict.
func (s *SQLStore) Update(ctx context.Context, id ID, u Update) (Session, error) {
	var patch map[string]json.RawMessage
	if len(strings.TrimSpace(string(u.Metadata))) > 0 {
		if err := json.Unmarshal(u.Metadata, &patch); err != nil || patch == nil {
			return Session{}, ErrInvalidMetadata
		}
	}
	if u.AgentID != nil && strings.TrimSpace(*u.AgentID) == "" {
		return Session{}, fmt.Errorf("%w: agent_id missing", ErrInvalidKey)
	}
	var out Session
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		cur, err := sessionByID(ctx, tx, id)
		if errors.Is(err, ErrNotFound) {
			return err
		}
		if err != nil {
			return fmt.Errorf("read session %s: %w", id, err)
		}
		meta := patchMetadata(cur.Metadata, patch)
		if u.Model != nil {
			if m := strings.TrimSpace(*u.Model); m == "" {
				delete(meta, "model")
			} else {
				b, _ := json.Marshal(m)
				meta["model"] = b
			}
		}
		metaJSON, err := json.Marshal(meta)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidMetadata, err)
		}
		title, agentID := cur.Title, cur.Key.AgentID
		if u.Title != nil {
			title = cleanText(*u.Title)
		}
		if u.AgentID != nil && *u.AgentID != agentID {
			agentID = strings.TrimSpace(*u.AgentID)
			if cur.Status == StatusActive {
				k := cur.Key
				k.AgentID = agentID
				if _, err := active(ctx, tx, k); err == nil {
					return fmt.Errorf("move session %s to agent %s: %w", id, agentID, ErrConflict)
				} else if !errors.Is(err, ErrNotFound) {
					return err
				}
			}
		}
		if _, err := tx.ExecContext(ctx, updateSessionQuery, id, title, agentID, string(metaJSON),
			dbutil.Millis(s.now()), ephemeral(metaJSON)); err != nil {
			return fmt.Errorf("update session %s: %w", id, err)
		}
		out, err = scanSession(tx.QueryRowContext(ctx, sessionByIDQuery, id))
		if err != nil {
			return fmt.Errorf("read session %s: %w", id, err)
		}
		return nil
	})
	s.actives.forget(id)
	if err != nil {
		return Session{}, err
	}
	return out, nil
}
