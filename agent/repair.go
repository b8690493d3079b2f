package agent

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/sessions"
)

// AbortedByRestart is the result given to a tool call a crash left unanswered.
const AbortedByRestart = "error: aborted by restart"

// RepairOrphans finalizes a run a crash interrupted: every tool call in the
// session's live context without a result gets AbortedByRestart, so the
// history tells the truth and providers accept it. It returns how many
// results it added; running it again adds none.
func (r *Runner) RepairOrphans(ctx context.Context, id sessions.ID) (int, error) {
	msgs, err := r.opts.Store.Messages(ctx, id, sessions.MessagesOptions{})
	if err != nil {
		return 0, fmt.Errorf("read session %s to repair it: %w", id, err)
	}
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == sessions.RoleTool && m.ToolCallID != "" {
			answered[m.ToolCallID] = true
		}
	}
	added := 0
	for _, m := range msgs {
		if m.Role != sessions.RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			if c.ID == "" || answered[c.ID] {
				continue
			}
			if _, err := r.opts.Store.Append(ctx, id, sessions.Message{Role: sessions.RoleTool, ToolCallID: c.ID,
				Content: AbortedByRestart, Synthetic: true}); err != nil {
				return added, fmt.Errorf("finalize tool call %s in session %s: %w", c.ID, id, err)
			}
			answered[c.ID] = true
			added++
		}
	}
	return added, nil
}
