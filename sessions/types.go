// Package sessions owns conversations: the composite session key, resolve
// with idle and daily resets, the append-only message log with its token
// rollups, and the Store that keeps them in SQLite or PostgreSQL.
package sessions

import (
	"encoding/json"
	"time"
)

// ID identifies a session (a UUIDv7 string).
type ID string

// MessageID identifies a message (a UUIDv7 string).
type MessageID string

// Status is a session's lifecycle state.
type Status string

const (
	StatusActive   Status = "active"
	StatusArchived Status = "archived"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleUser, RoleAssistant, RoleSystem, RoleTool:
		return true
	}
	return false
}

// Reset reasons, recorded on the archived session.
const (
	ReasonIdle   = "idle"
	ReasonDaily  = "daily"
	ReasonManual = "manual"
)

// Session is one conversation with one agent on one surface.
type Session struct {
	ID                ID              `json:"id"`
	Key               Key             `json:"key"`
	Status            Status          `json:"status"`
	Title             string          `json:"title"`
	ParentID          ID              `json:"parent_id,omitempty"`
	ParentMessageID   MessageID       `json:"parent_message_id,omitempty"`
	Metadata          json.RawMessage `json:"metadata"`
	ResetReason       string          `json:"reset_reason,omitempty"`
	LastActiveAt      time.Time       `json:"last_active_at"`
	ArchivedAt        time.Time       `json:"archived_at,omitzero"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	MessageCount      int64           `json:"message_count"`
	LastSeq           int64           `json:"last_seq"`
	Rollup            Rollup          `json:"rollup"`
	CompactionSummary string          `json:"compaction_summary,omitempty"`
}

// Rollup is a session's running totals, kept in step with its messages.
type Rollup struct {
	// TokenCount estimates the tokens in the live context.
	TokenCount       int64   `json:"token_count"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	ReasoningTokens  int64   `json:"reasoning_tokens"`
	CacheRead        int64   `json:"cache_read"`
	CacheWrite       int64   `json:"cache_write"`
	CostUSD          float64 `json:"cost_usd"`
}

// Usage is what a provider reported for one model call. Input excludes the
// cache counts, so the five token counts add up without overlap.
type Usage struct {
	Input      int64   `json:"input"`
	Output     int64   `json:"output"`
	Reasoning  int64   `json:"reasoning,omitempty"`
	CacheRead  int64   `json:"cache_read,omitempty"`
	CacheWrite int64   `json:"cache_write,omitempty"`
	CostUSD    float64 `json:"cost_usd,omitempty"`
}

// Context is the context window the call used: every token it read or wrote.
func (u Usage) Context() int64 {
	return u.Input + u.Output + u.Reasoning + u.CacheRead + u.CacheWrite
}

// Part is one piece of a message's content beyond its plain text: an image,
// a file reference, a reasoning block.
type Part struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	URL       string          `json:"url,omitempty"`
	Name      string          `json:"name,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Message is one entry in a session's append-only log.
type Message struct {
	ID            MessageID  `json:"id"`
	SessionID     ID         `json:"session_id"`
	Seq           int64      `json:"seq"`
	Role          Role       `json:"role"`
	Content       string     `json:"content"`
	Parts         []Part     `json:"parts,omitempty"`
	ToolCalls     []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID    string     `json:"tool_call_id,omitempty"`
	Model         string     `json:"model,omitempty"`
	Usage         *Usage     `json:"usage,omitempty"`
	Synthetic     bool       `json:"synthetic,omitempty"`
	Summary       bool       `json:"summary,omitempty"`
	HiddenAt      time.Time  `json:"hidden_at,omitzero"`
	TokenEstimate int64      `json:"token_estimate"`
	CreatedAt     time.Time  `json:"created_at"`
	// Metadata is what is said about the message rather than in it, a
	// JSON object: an assistant message's system_prompt_digest (see
	// PromptDigest), a user message's snapshot_id.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Set only on messages read from the archive.
	ArchivedAt   time.Time `json:"archived_at,omitzero"`
	CompactionID string    `json:"compaction_id,omitempty"`
}

// Archived reports whether m was read from the archive.
func (m Message) Archived() bool { return !m.ArchivedAt.IsZero() }
