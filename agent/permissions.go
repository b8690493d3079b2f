package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// Asker asks the person a turn answers whether a tool call may run, when
// a permission rule says ask: the channel shows the question (buttons,
// or a numbered list) and Ask returns the answer. It returns ctx's error
// when ctx ends first: the ask timed out, or the turn was stopped. The
// daemon gives each turn the Asker of its channel.
type Asker interface {
	Ask(ctx context.Context, q permissions.Question) (permissions.Answer, error)
}

// Events of a turn's permission questions.
const (
	EventPermissionRequested events.Type = "permission.requested" // Data: PermissionRequested
	EventPermissionResolved  events.Type = "permission.resolved"  // Data: PermissionResolved
)

// PermissionRequested is the data of a permission.requested event: a
// question waiting for its answer, which the API takes at POST
// /v1/sessions/{id}/permissions/{request_id}.
type PermissionRequested struct {
	RequestID string
	Tool      string
	Arguments string
	Choices   []permissions.Answer
	// User is who is asked.
	User    string
	Why     string
	Expires time.Time
}

// PermissionResolved is the data of a permission.resolved event.
type PermissionResolved struct {
	RequestID string
	// Answer is the answer given, or "timeout" or "cancelled".
	Answer string
}

// asking is a turn's side of its permission questions: the status shows
// waiting_for_permission while any is open.
type asking struct {
	mu   sync.Mutex
	open int
}

// origin is who stands behind the turn's tool calls: its person and
// Asker, or what it inherited from a parent turn.
func (t *turn) origin() permissions.Origin {
	if t.req.inherited != nil {
		return *t.req.inherited
	}
	// A session keyed without a user is a group's, shared by its members.
	o := permissions.Origin{User: t.req.User, Unattended: t.req.Unattended, Group: t.req.Session.Key.UserID == ""}
	if o.User == "" {
		o.User = userOf(t.req.Session.Key)
	}
	if t.req.Asker != nil {
		o.Ask = t.ask
	}
	return o
}

// ask puts a question through the turn's Asker, with the session's status
// at waiting_for_permission and the question and its outcome on the bus.
func (t *turn) ask(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
	t.asking.mu.Lock()
	t.asking.open++
	t.r.statuses.update(t.id, func(s *Status) {
		s.State, s.Attempt, s.Message = StateWaitingForPermission, 0, "asking whether "+q.Tool+" may run"
	})
	t.asking.mu.Unlock()
	t.publish(EventPermissionRequested, PermissionRequested{RequestID: q.ID, Tool: q.Tool, Arguments: string(q.Arguments),
		Choices: q.Choices, User: q.User, Why: q.Why, Expires: q.Expires})

	a, err := t.req.Asker.Ask(ctx, q)

	outcome := string(a)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome = "timeout"
	case err != nil:
		outcome = "cancelled"
	}
	t.publish(EventPermissionResolved, PermissionResolved{RequestID: q.ID, Answer: outcome})
	t.asking.mu.Lock()
	t.asking.open--
	if t.asking.open == 0 {
		t.r.statuses.update(t.id, func(s *Status) {
			if s.State == StateWaitingForPermission {
				s.State, s.Message = StateBusy, ""
			}
		})
	}
	t.asking.mu.Unlock()
	return a, err
}

// userOf is "<surface>:<user id>" of a session's own user, "" in a group.
func userOf(k sessions.Key) string {
	if k.UserID == "" {
		return ""
	}
	return k.Surface + ":" + k.UserID
}
