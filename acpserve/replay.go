package acpserve

import (
	"context"
	"encoding/json"
	"net/url"

	acp "github.com/coder/acp-go-sdk"
)

// replayPage is how many messages each read of the history asks for.
const replayPage = 200

// storedMessage is what replay reads of a message.
type storedMessage struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	Content    string `json:"content"`
	Synthetic  bool   `json:"synthetic"`
	Summary    bool   `json:"summary"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"tool_calls"`
}

// replay sends the session's history, oldest first, as session/update
// notifications: each person's message a user_message_chunk, each reply an
// agent_message_chunk, each tool call a tool_call and its result a
// tool_call_update. What compaction archived is replayed too (the whole
// conversation, as it was said); rewound messages, summaries and parley's
// own notes are not.
func (a *agent) replay(ctx context.Context, id string) error {
	sid := acp.SessionId(id)
	path := "/v1/sessions/" + url.PathEscape(id) + "/messages?include_archived=true&limit=" + itoa(replayPage)
	for {
		var page struct {
			Messages []storedMessage `json:"messages"`
			Next     string          `json:"next_cursor"`
		}
		if err := a.call(ctx, "GET", path, nil, &page); err != nil {
			return a.apiError(ctx, "read session "+id+"'s messages", err)
		}
		for _, m := range page.Messages {
			for _, u := range replayed(m) {
				if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: u}); err != nil {
					return err
				}
			}
		}
		if page.Next == "" {
			return nil
		}
		path = "/v1/sessions/" + url.PathEscape(id) + "/messages?include_archived=true&limit=" + itoa(replayPage) + "&cursor=" + url.QueryEscape(page.Next)
	}
}

// replayed are the updates that tell one stored message again.
func replayed(m storedMessage) []acp.SessionUpdate {
	if m.Synthetic || m.Summary {
		return nil
	}
	var out []acp.SessionUpdate
	switch m.Role {
	case "user":
		if m.Content != "" {
			out = append(out, acp.UpdateUserMessageText(m.Content))
		}
	case "assistant":
		if m.Content != "" {
			out = append(out, acp.UpdateAgentMessageText(m.Content))
		}
		for _, c := range m.ToolCalls {
			opts := []acp.ToolCallStartOpt{acp.WithStartKind(acp.ToolKindOther), acp.WithStartStatus(acp.ToolCallStatusPending)}
			if raw := rawJSON(c.Arguments); raw != nil {
				opts = append(opts, acp.WithStartRawInput(raw))
			}
			out = append(out, acp.StartToolCall(acp.ToolCallId(c.ID), c.Name, opts...))
		}
	case "tool":
		if m.ToolCallID != "" {
			out = append(out, acp.UpdateToolCall(acp.ToolCallId(m.ToolCallID), acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
				acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(m.Content))})))
		}
	}
	return out
}
