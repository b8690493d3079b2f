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
	m, ok, err := r.answer(ctx, sid, id)
	if m == nil {
		return "", ok, err
	}
	return m.Content, ok, err
}

func (r *Runner) answer(ctx context.Context, sid sessions.ID, id sessions.MessageID) (*sessions.Message, bool, error) {
	msgs, err := r.opts.Store.Messages(ctx, sid, sessions.MessagesOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("read session %s for message %s's answer: %w", sid, id, err)
	}
	m, ok := answerTo(msgs, id)
	return m, ok, nil
}

// resume ends a Request.Resume run with the reply its last try stored, if
// it did, publishing the run's start and finish for those following it.
func (r *Runner) resume(ctx context.Context, req Request) (Result, bool, error) {
	m, ok, err := r.answer(ctx, req.Session.ID, req.Inputs[len(req.Inputs)-1].ID)
	if err != nil || !ok {
		return Result{}, false, err
	}
	ids := runIDs(req.Inputs)
	r.publish(req.Session.ID, EventTurnStarted, TurnStarted{AgentID: req.Agent.ID, RunIDs: ids})
	r.publish(req.Session.ID, EventTurnFinished, TurnFinished{RunIDs: ids, Reply: m})
	r.statuses.set(req.Session.ID, Status{State: StateIdle})
	res := Result{}
	if m != nil {
		res.Reply = m.Content
	}
	return res, true, nil
}

// answerTo finds, in a session's live context, the answer of the turn that
// stored the user message id: the first final assistant message after it
// (one that asks for no tools), side turns and summaries left out. The
// message is nil when a later message of the same turn took the reply.
func answerTo(msgs []sessions.Message, id sessions.MessageID) (*sessions.Message, bool) {
	i := slices.IndexFunc(msgs, func(m sessions.Message) bool { return m.ID == id })
	if i < 0 {
		return nil, false
	}
	later := false
	for j := i + 1; j < len(msgs); j++ {
		switch m := msgs[j]; {
		case m.Summary || m.Role == sessions.RoleSystem || sideTurn(m):
		case m.Role == sessions.RoleUser && !m.Synthetic:
			later = true
		case m.Role == sessions.RoleAssistant && len(m.ToolCalls) == 0:
			if later {
				return nil, true
			}
			return &msgs[j], true
		}
	}
	return nil, false
}
