package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

const (
	setEphemeralQuery = `UPDATE sessions SET ephemeral = $2, revision = revision + 1 WHERE id = $1`

	branchRollupQuery = `UPDATE sessions SET last_seq = $2, message_count = $2, token_count = $3,
	prompt_tokens = $4, completion_tokens = $5, reasoning_tokens = $6, cache_read = $7, cache_write = $8,
	cost_usd = $9, compaction_summary = $10, revision = revision + 1
	WHERE id = $1`
)

// BranchOptions is what a branch starts with beyond its parent's history.
type BranchOptions struct {
	// Metadata is merged over the parent's metadata. "ephemeral": true
	// marks a sidecar branch, left out of listings unless asked for.
	Metadata json.RawMessage
	// Also, if set, runs in the branch's transaction once the branch is
	// made (the session's files copied to it, say): its error undoes the
	// branch.
	Also func(ctx context.Context, q dbutil.Querier, parent, branch ID) error
}

// Branch starts a new session from session id's conversation up to and
// including message from: copies of every visible live message up to it,
// with new ids, and rollups recomputed from the copies. The branch is an
// API session of the same user, agent and workspace, with parent_id and
// parent_message_id set. The fork point must be a visible live message.
func (s *SQLStore) Branch(ctx context.Context, id ID, from MessageID, opts BranchOptions) (Session, error) {
	var patch map[string]json.RawMessage
	if len(opts.Metadata) > 0 && string(opts.Metadata) != "null" {
		if err := json.Unmarshal(opts.Metadata, &patch); err != nil || patch == nil {
			return Session{}, ErrInvalidMetadata
		}
	}
	now := s.now()
	var created Session
	err := s.db.Tx(ctx, func(tx dbutil.Querier) error {
		parent, err := sessionByID(ctx, tx, id)
		if err != nil {
			return err
		}
		fork, err := scanMessage(tx.QueryRowContext(ctx, sessionMessageQuery, from, id))
		if errors.Is(err, sql.ErrNoRows) {
			if _, aerr := scanMessage(tx.QueryRowContext(ctx, archivedMessageQuery, from, id)); aerr == nil {
				return fmt.Errorf("%w: message %s was compacted; rewind to bring it back before branching from it", ErrInvalidMessage, from)
			}
			return fmt.Errorf("message %s in session %s: %w", from, id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if !fork.HiddenAt.IsZero() {
			return fmt.Errorf("%w: message %s is hidden by a rewind", ErrInvalidMessage, from)
		}
		live, err := readMessages(ctx, tx, id, MessagesOptions{})
		if err != nil {
			return err
		}

		metaJSON, err := json.Marshal(patchMetadata(parent.Metadata, patch))
		if err != nil {
			return err
		}
		u, err := uuid.NewV7()
		if err != nil {
			return err
		}
		key := Key{UserID: parent.Key.UserID, Surface: SurfaceAPI, SurfaceID: u.String(), AgentID: parent.Key.AgentID,
			WorkspaceID: parent.Key.WorkspaceID}
		created, err = insertSessionWith(ctx, tx, key, parent.Title, string(metaJSON), parent.ID, fork.ID, now)
		if err != nil {
			return err
		}
		if ephemeral(metaJSON) {
			if _, err := tx.ExecContext(ctx, setEphemeralQuery, created.ID, true); err != nil {
				return err
			}
		}
		var (
			seq     int64
			r       Rollup
			summary string
		)
		for _, m := range live {
			if m.Seq > fork.Seq {
				break
			}
			mid, err := newID()
			if err != nil {
				return err
			}
			seq++
			parts, _ := nullJSON(m.Parts, len(m.Parts) > 0)
			calls, _ := nullJSON(m.ToolCalls, len(m.ToolCalls) > 0)
			usageJSON, _ := nullJSON(m.Usage, m.Usage != nil)
			if _, err := tx.ExecContext(ctx, insertMessageQuery, mid, created.ID, seq, m.Role, m.Content, parts, calls,
				m.ToolCallID, m.Model, usageJSON, m.Synthetic, m.Summary, nil, m.TokenEstimate,
				dbutil.Millis(m.CreatedAt), nullMetadata(m.Metadata)); err != nil {
				return fmt.Errorf("copy message %s: %w", m.ID, err)
			}
			r.TokenCount += m.TokenEstimate
			if m.Usage != nil {
				r.PromptTokens += m.Usage.Input
				r.CompletionTokens += m.Usage.Output
				r.ReasoningTokens += m.Usage.Reasoning
				r.CacheRead += m.Usage.CacheRead
				r.CacheWrite += m.Usage.CacheWrite
				r.CostUSD += m.Usage.CostUSD
			}
			if m.Summary {
				summary = m.Content
			}
		}
		if _, err := tx.ExecContext(ctx, branchRollupQuery, created.ID, seq, r.TokenCount, r.PromptTokens,
			r.CompletionTokens, r.ReasoningTokens, r.CacheRead, r.CacheWrite, r.CostUSD, summary); err != nil {
			return err
		}
		if opts.Also != nil {
			if err := opts.Also(ctx, tx, parent.ID, created.ID); err != nil {
				return err
			}
		}
		created, err = scanSession(tx.QueryRowContext(ctx, sessionByIDQuery, created.ID))
		if err != nil {
			return err
		}
		return s.lifecycle(ctx, tx, Lifecycle{Type: EventSessionCreated, Session: created.ID, Key: created.Key, At: now})
	})
	if err != nil {
		return Session{}, fmt.Errorf("branch session %s: %w", id, err)
	}
	s.bus.Publish(events.Event{Type: EventSessionCreated, SessionID: string(created.ID), At: now, Data: SessionCreated{created}})
	return created, nil
}

// ephemeral reports whether metadata marks a sidecar session.
func ephemeral(meta []byte) bool {
	var v struct {
		Ephemeral bool `json:"ephemeral"`
	}
	return json.Unmarshal(meta, &v) == nil && v.Ephemeral
}
