package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/parleyd/parley/sessions"
)

// Answered reports whether a turn already answered the user message id in
// session sid, and with what: the turn's final text, or "" when a later
// message of the same turn (a batch, or one steered in) took the reply.
// Recovery asks before running a message again, so a crash between a
// stored reply and its record never makes a second reply.
func (r *Runner) Answered(ctx context.Context, sid sessions.ID, id sessions.MessageID) (string, bool, error) {
	msgs, err := r.opts.Store.Messages(ctx, sid, sessions.MessagesOptions{})
	if err != nil {
		return "", false, fmt.Errorf("read session %s for message %s's answer: %w", sid, id, err)
	}
	reply, ok := answerTo(msgs, id)
	return reply, ok, nil
}

// answerTo finds, in a session's live context, the answer of the turn that
// stored the user message id: the first final assistant message after it
// (one that asks for no tools), side turns and summaries left out.
func answerTo(msgs []sessions.Message, id sessions.MessageID) (string, bool) {
	i := slices.IndexFunc(msgs, func(m sessions.Message) bool { return m.ID == id })
	if i < 0 {
		return "", false
	}
	later := false
	for _, m := range msgs[i+1:] {
		switch {
		case m.Summary || m.Role == sessions.RoleSystem || sideTurn(m):
		case m.Role == sessions.RoleUser && !m.Synthetic:
			later = true
		case m.Role == sessions.RoleAssistant && len(m.ToolCalls) == 0:
			if later {
				return "", true
			}
			return m.Content, true
		}
	}
	return "", false
}
