package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/sessions"
)

const (
	// defaultListLimit and defaultReadLimit are list_sessions' and
	// read_session's page sizes when the client names none.
	defaultListLimit = 20
	defaultReadLimit = 50
	// maxReadLimit caps read_session's messages.
	maxReadLimit = 500
)

// ListInput is list_sessions' arguments.
type ListInput struct {
	Agent   string `json:"agent,omitempty" jsonschema:"only this agent's sessions"`
	Status  string `json:"status,omitempty" jsonschema:"active or archived; default: both"`
	Surface string `json:"surface,omitempty" jsonschema:"only sessions on this surface, e.g. mcp, telegram, discord, cli, api, cron, webhook"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many sessions, newest first: 1 to 200; default 20"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page, for the page after it"`
}

// ListOutput is list_sessions' result.
type ListOutput struct {
	Sessions   []SessionInfo `json:"sessions"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// SessionInfo is one session as the tools show it.
type SessionInfo struct {
	ID           string `json:"id"`
	Key          string `json:"key"`
	Agent        string `json:"agent"`
	User         string `json:"user,omitempty"`
	Status       string `json:"status"`
	Title        string `json:"title,omitempty"`
	MessageCount int64  `json:"message_count"`
	TokenCount   int64  `json:"token_count"`
	CreatedAt    string `json:"created_at"`
	LastActiveAt string `json:"last_active_at"`
	ArchivedAt   string `json:"archived_at,omitempty"`
	ResetReason  string `json:"reset_reason,omitempty"`
}

func sessionInfo(s sessions.Session) SessionInfo {
	return SessionInfo{ID: string(s.ID), Key: s.Key.String(), Agent: s.Key.AgentID, User: s.Key.UserID, Status: string(s.Status),
		Title: s.Title, MessageCount: s.MessageCount, TokenCount: s.Rollup.TokenCount,
		CreatedAt: stamp(s.CreatedAt), LastActiveAt: stamp(s.LastActiveAt), ArchivedAt: stamp(s.ArchivedAt), ResetReason: s.ResetReason}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (s *server) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	if err := checkText("agent", in.Agent, "status", in.Status, "surface", in.Surface, "cursor", in.Cursor); err != nil {
		return nil, ListOutput{}, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultListLimit
	}
	if limit < 1 || limit > sessions.MaxPageSize {
		return nil, ListOutput{}, fmt.Errorf("limit %d is out of range; use 1 to %d", in.Limit, sessions.MaxPageSize)
	}
	status := sessions.Status(strings.ToLower(strings.TrimSpace(in.Status)))
	switch status {
	case "", sessions.StatusActive, sessions.StatusArchived:
	default:
		return nil, ListOutput{}, fmt.Errorf("status %q is not a session status; use active or archived, or leave it out for both", in.Status)
	}
	page, err := s.opts.Sessions.List(ctx, sessions.ListOptions{Limit: limit, Cursor: strings.TrimSpace(in.Cursor), Status: status,
		Surface: strings.TrimSpace(in.Surface), AgentID: strings.TrimSpace(in.Agent)})
	switch {
	case errors.Is(err, sessions.ErrBadCursor):
		return nil, ListOutput{}, fmt.Errorf("cursor %q is not one list_sessions gave; pass its next_cursor unchanged, or none for the first page", in.Cursor)
	case err != nil:
		s.opts.Log.WarnContext(ctx, "mcp list_sessions", "error", err)
		return nil, ListOutput{}, errors.New("the sessions couldn't be read (parley's log says why); try again")
	}
	out := ListOutput{Sessions: make([]SessionInfo, len(page.Sessions)), NextCursor: page.Next}
	for i, sess := range page.Sessions {
		out.Sessions[i] = sessionInfo(sess)
	}
	return nil, out, nil
}

// ReadInput is read_session's arguments.
type ReadInput struct {
	SessionID string `json:"session_id" jsonschema:"the session's id, as list_sessions or send_message gave it"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many of the latest messages: 1 to 500; default 50"`
	Archived  bool   `json:"archived,omitempty" jsonschema:"also the older messages compaction archived (summarized away)"`
}

// ReadOutput is read_session's result.
type ReadOutput struct {
	Session  SessionInfo   `json:"session"`
	Messages []MessageInfo `json:"messages"`
	// Earlier is how many earlier messages the limit left out.
	Earlier int `json:"earlier,omitempty"`
}

// MessageInfo is one message as read_session shows it.
type MessageInfo struct {
	Seq        int64          `json:"seq"`
	Role       string         `json:"role"`
	Content    string         `json:"content,omitempty"`
	ToolCalls  []ToolCallInfo `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Model      string         `json:"model,omitempty"`
	Summary    bool           `json:"summary,omitempty"`
	Archived   bool           `json:"archived,omitempty"`
	CreatedAt  string         `json:"created_at"`
}

// ToolCallInfo is a tool call the model made, its arguments as JSON text.
type ToolCallInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func (s *server) read(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	id := strings.TrimSpace(in.SessionID)
	if _, err := uuid.Parse(id); err != nil || checkText("session_id", id) != nil {
		return nil, ReadOutput{}, fmt.Errorf("session_id %q is not a session id; list_sessions gives each session's id", in.SessionID)
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultReadLimit
	}
	if limit < 1 || limit > maxReadLimit {
		return nil, ReadOutput{}, fmt.Errorf("limit %d is out of range; use 1 to %d", in.Limit, maxReadLimit)
	}
	sess, err := s.opts.Sessions.Session(ctx, sessions.ID(id))
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		return nil, ReadOutput{}, fmt.Errorf("no session has the id %s; list_sessions gives each session's id", id)
	case err != nil:
		s.opts.Log.WarnContext(ctx, "mcp read_session", "session_id", id, "error", err)
		return nil, ReadOutput{}, errors.New("the session couldn't be read (parley's log says why); try again")
	}
	msgs, err := s.opts.Sessions.Messages(ctx, sess.ID, sessions.MessagesOptions{Archived: in.Archived})
	if err != nil {
		s.opts.Log.WarnContext(ctx, "mcp read_session", "session_id", id, "error", err)
		return nil, ReadOutput{}, errors.New("the session's messages couldn't be read (parley's log says why); try again")
	}
	out := ReadOutput{Session: sessionInfo(sess)}
	if len(msgs) > limit {
		out.Earlier = len(msgs) - limit
		msgs = msgs[len(msgs)-limit:]
	}
	out.Messages = make([]MessageInfo, len(msgs))
	for i, m := range msgs {
		mi := MessageInfo{Seq: m.Seq, Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, Model: m.Model,
			Summary: m.Summary, Archived: m.Archived(), CreatedAt: stamp(m.CreatedAt)}
		for _, c := range m.ToolCalls {
			mi.ToolCalls = append(mi.ToolCalls, ToolCallInfo{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
		}
		out.Messages[i] = mi
	}
	return nil, out, nil
}
