package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"

	"github.com/parleyd/parley/internal/sleep"
	"github.com/parleyd/parley/sessions"
)

// Answered reports whether a turn already answered the user message id in
// session sid, and with what: the turn's final text, or "" when a later
// message of the same turn (a batch, or one steered in) took the reply.
// Recovery asks before running a message again, so a crash between a
// stored reply and its record never makes a second reply.
func (r *Runner) Answered(ctx context.Context, sid sessions.ID, id sessions.MessageID) (string, bool, error) {
	m, ok, err := r.answer(ctx, sid, id, false)
	if m == nil {
		return "", ok, err
	}
	return m.Content, ok, err
}

func (r *Runner) answer(ctx context.Context, sid sessions.ID, id sessions.MessageID, throughLater bool) (*sessions.Message, bool, error) {
	msgs, err := r.opts.Store.Messages(ctx, sid, sessions.MessagesOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("read session %s for message %s's answer: %w", sid, id, err)
	}
	m, ok := answerTo(msgs, id, throughLater)
	return m, ok, nil
}

// resume starts a run's next try after the database failed under the
// last one: it finalizes what that try left (orphaned tool calls) and, if
// the try stored its reply, ends the run with it, publishing the run's
// start and finish for those following it. done reports that the run is
// over; err is a database error (the caller waits and tries again) when
// not.
func (r *Runner) resume(ctx context.Context, req Request) (res Result, done bool, err error) {
	id := req.Session.ID
	if _, err := r.RepairOrphans(ctx, id); err != nil {
		return Result{}, !dbutil.Unavailable(err), err
	}
	// The reply of a turn that took steered messages follows them: it is
	// still this input's answer.
	m, ok, err := r.answer(ctx, id, req.Inputs[len(req.Inputs)-1].ID, true)
	if err != nil || !ok {
		return Result{}, err != nil && !dbutil.Unavailable(err), err
	}
	ids := runIDs(req.Inputs)
	r.publish(id, EventTurnStarted, TurnStarted{AgentID: req.Agent.ID, RunIDs: ids})
	r.publish(id, EventTurnFinished, TurnFinished{RunIDs: ids, Reply: m})
	r.statuses.set(id, Status{State: StateIdle})
	if m != nil {
		res.Reply = m.Content
	}
	return res, true, nil
}

// waitForStore waits before the next try of a turn the database failed
// under, backing off up to StoreRetry; false means ctx ended first.
func (r *Runner) waitForStore(ctx context.Context, tries int) bool {
	limit := cmp.Or(r.opts.StoreRetry, 2*time.Second)
	delay := min(100*time.Millisecond<<min(tries-1, 6), limit)
	return sleep.For(ctx, delay) == nil
}

// answerTo finds, in a session's live context, the answer of the turn that
// stored the user message id: the reply that names it (PartAnswers), side
// turns and summaries left out. The message is nil when a later message
// of the same turn took the reply, unless throughLater: then the reply is
// the turn's, whoever took it. A reply that names other messages is a
// later turn's (a newer message run while this one waited, say): it does
// not answer this one.
//
// A reply stored before replies named their messages is read as before:
// the first final assistant message after the message, a later user
// message before it meaning a later message of the same turn took it.
func answerTo(msgs []sessions.Message, id sessions.MessageID, throughLater bool) (*sessions.Message, bool) {
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
			answers, named := answersOf(m)
			if !named {
				if later && !throughLater {
					return nil, true
				}
				return &msgs[j], true
			}
			k := slices.Index(answers, string(id))
			switch {
			case k < 0:
				continue // a later turn's reply
			case k < len(answers)-1 && !throughLater:
				return nil, true
			}
			return &msgs[j], true
		}
	}
	return nil, false
}

// answersOf is the ids of the messages reply m names (PartAnswers); named
// is false for a reply that names none.
func answersOf(m sessions.Message) (ids []string, named bool) {
	for _, p := range m.Parts {
		if p.Type == PartAnswers {
			return strings.Fields(p.Name), true
		}
	}
	return nil, false
}
