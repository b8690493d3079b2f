package turns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// APIAdapterID is the channel of messages sent through the HTTP API.
const APIAdapterID = "api"

// APIRunner is what the HTTP API runs through: messages, status, abort,
// reset, compaction.
func (b *Bridge) APIRunner() APIRunner { return APIRunner{b} }

// APIPermissions takes the HTTP API's answers to permission questions.
func (b *Bridge) APIPermissions() APIPermissions { return APIPermissions{b} }

// Sink is what the channels deliver to, through the bridge.
func (b *Bridge) Sink() Sink { return Sink{b} }

// APIChannel is the "api" channel: messages sent through the HTTP API enter
// the gateway like any channel's, and their replies need no sending (the
// client reads them from the session and its event stream).
type APIChannel struct{}

func (APIChannel) Start(ctx context.Context, _ adapters.Sink) error { <-ctx.Done(); return nil }

// Source declares the API as a source: its caller follows the run and
// reads the reply (nothing is queued), and answers permission questions
// through the API.
func (APIChannel) Source() adapters.Source {
	return adapters.Source{Name: "api", Replies: adapters.RepliesToCaller, Asks: adapters.AskCaller}
}

func (APIChannel) Send(_ context.Context, out adapters.Outbound) (adapters.Sent, error) {
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

// commandRefusal is the API's answer to a chat command sent as a message:
// its answer would go to the chat, which over the API is nowhere, so it
// names the route that does the command's work (for /help, every route).
func commandRefusal(c commands.Command) error {
	route := c.Route
	if route == "" {
		route = "each command has a route: " + commands.Routes()
	}
	return fmt.Errorf("%w: /%s is a chat command; over the API, %s", api.ErrInvalid, c.Name, route)
}

// APIRunner drives runs for the API through the gateway and the agent.
type APIRunner struct{ b *Bridge }

var _ api.Runner = APIRunner{}

func (r APIRunner) Send(ctx context.Context, req api.SendRequest) (string, error) {
	s, err := r.b.sessions.Session(ctx, req.SessionID)
	if err != nil {
		return "", err
	}
	if c, ok := commands.Parse(req.Content); ok {
		return "", commandRefusal(c)
	}
	if req.IfIdle && r.b.o.Gateway.Busy(s.Key) {
		return "", fmt.Errorf("session %s: %w", s.ID, api.ErrBusy)
	}
	id := uuid.Must(uuid.NewV7()).String()
	// A session without a user is keyed like a group's; its sender is "api".
	// What the client sends is what is stored: no sender's name before it.
	user := s.Key.UserID
	if user == "" {
		user = "api"
	}
	in := adapters.Inbound{Adapter: APIAdapterID, Surface: s.Key.Surface, ChatID: s.Key.SurfaceID, UserID: user,
		Group: s.Key.UserID == "", AgentID: s.Key.AgentID, MessageID: id, Text: req.Content, Files: req.Files, Model: req.Model, ReasoningEffort: req.ReasoningEffort,
		Workspace: s.Key.WorkspaceID, Time: time.Now(), Unattributed: true}
	if err := r.b.o.Gateway.Submit(ctx, in); err != nil {
		switch {
		case errors.Is(err, adapters.ErrInvalidInbound):
			return "", fmt.Errorf("%w: %v", api.ErrInvalid, err)
		case errors.Is(err, gateway.ErrQueueFull):
			return "", fmt.Errorf("%w: %v", api.ErrQueueFull, err)
		}
		return "", err
	}
	return id, nil
}

func (r APIRunner) Status(id sessions.ID) api.Status { return r.b.runner.Status(id) }

func (r APIRunner) Abort(id sessions.ID) bool {
	s, err := r.b.sessions.Session(context.Background(), id)
	if err != nil {
		return false
	}
	return r.b.o.Gateway.Abort(s.Key)
}

func (r APIRunner) Reset(ctx context.Context, key sessions.Key) (sessions.Session, error) {
	if !r.b.o.Gateway.Abort(key) && r.b.o.AbortElsewhere != nil {
		r.b.o.AbortElsewhere(ctx, key)
	}
	return r.b.sessions.Reset(ctx, key)
}

func (r APIRunner) Compact(ctx context.Context, id sessions.ID) (api.CompactResult, error) {
	s, err := r.b.sessions.Session(ctx, id)
	if err != nil {
		return api.CompactResult{}, err
	}
	a, ok := r.b.cfg().Agent(s.Key.AgentID)
	if !ok {
		return api.CompactResult{}, fmt.Errorf("%w: the session's agent %q is not configured", api.ErrRejected, s.Key.AgentID)
	}
	res, err := r.b.runner.Compact(ctx, s, AgentConfig(a, s.Key))
	switch {
	case errors.Is(err, agent.ErrBusy):
		return api.CompactResult{}, fmt.Errorf("%w: %v", api.ErrBusy, err)
	case err != nil && res.Skipped != "":
		return api.CompactResult{}, fmt.Errorf("%w: nothing to compact: %s", api.ErrRejected, res.Skipped)
	case err != nil:
		return api.CompactResult{}, err
	}
	return api.CompactResult{Compacted: res.Compacted, Skipped: res.Skipped, SummaryID: string(res.SummaryID),
		Summarized: res.Summarized, Archived: res.Archived, TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter}, nil
}

// APIPermissions answers questions for the API's route.
type APIPermissions struct{ b *Bridge }

var _ api.Permissions = APIPermissions{}

func (a APIPermissions) Answer(_ context.Context, id sessions.ID, requestID, answer string) (string, error) {
	ans, err := permissions.ParseAnswer(answer)
	if err != nil {
		return "", fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	q, ok := a.b.desk.Question(requestID)
	if !ok || q.SessionID != string(id) {
		return "", fmt.Errorf("%w: no permission request %q waits in session %s (answered, expired, or never asked)", sessions.ErrNotFound, requestID, id)
	}
	switch _, err := a.b.desk.Answer(requestID, "", ans); {
	case errors.Is(err, permissions.ErrNotOffered):
		return "", fmt.Errorf("%w: %q is not offered for this request; answer with one of its choices", api.ErrInvalid, answer)
	case errors.Is(err, permissions.ErrNoRequest):
		return "", fmt.Errorf("%w: permission request %q was answered or expired meanwhile", sessions.ErrNotFound, requestID)
	case err != nil:
		return "", err
	}
	return q.Tool, nil
}

// Sink is what the channels deliver to: the gateway, with the
// answers to permission questions taken out on the way, a press on a
// question's button or a numbered reply to its list.
type Sink struct{ b *Bridge }

var (
	_ adapters.Sink      = Sink{}
	_ adapters.PressSink = Sink{}
)

// Deliver takes a numbered reply to a question waiting in the chat for
// its sender as the answer; anything else goes to the gateway.
func (s Sink) Deliver(ctx context.Context, in adapters.Inbound) error {
	if s.b.desk != nil && s.b.desk.Waiting() > 0 {
		place := permissions.Place{Adapter: string(in.Adapter), Chat: in.ChatID}
		if q, a, ok := s.b.desk.AnswerNumber(place, in.Surface+":"+in.UserID, in.Text); ok {
			s.b.log.InfoContext(ctx, "permission answered", "adapter", in.Adapter, "chat_id", in.ChatID, "tool", q.Tool, "answer", a, "request_id", q.ID)
			return nil
		}
	}
	return s.b.o.Gateway.Deliver(ctx, in)
}

// DeliverWith is the gateway's, for the webhooks' record.
func (s Sink) DeliverWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) error {
	return s.b.o.Gateway.DeliverWith(ctx, in, also)
}

// Press answers the question whose button was pressed, if the presser is
// the person asked; the note says what happened.
func (s Sink) Press(ctx context.Context, p adapters.Press) string {
	if note, ok := s.b.o.Gateway.Press(ctx, p); ok {
		return note // a command's button (/model, /think)
	}
	rest, ok := strings.CutPrefix(p.Data, PressPrefix)
	id, answer, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "This button no longer does anything."
	}
	q, err := s.b.desk.Answer(id, p.Surface+":"+p.UserID, permissions.Answer(answer))
	switch {
	case errors.Is(err, permissions.ErrNotYours):
		return "Only the person who was asked can answer this."
	case errors.Is(err, permissions.ErrNoRequest):
		return "This question was already answered, or it expired."
	case err != nil:
		return "That answer isn't offered for this question."
	}
	s.b.log.InfoContext(ctx, "permission answered", "adapter", p.Adapter, "chat_id", p.ChatID, "tool", q.Tool, "answer", answer, "request_id", id)
	return permissions.Answer(answer).Done()
}
