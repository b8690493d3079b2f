package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/sessions"
)

// Event types of a run's permission questions.
const (
	// TypePermissionRequested: a tool call waits for an answer, which
	// POST /v1/sessions/{id}/permissions/{request_id} gives.
	TypePermissionRequested = "permission.requested"
	// TypePermissionResolved: the question was answered, timed out or
	// was cancelled.
	TypePermissionResolved = "permission.resolved"
)

// StateWaitingForPermission is a run waiting for a permission answer.
const StateWaitingForPermission = agent.StateWaitingForPermission

// PermissionRequestedData is the data of a permission.requested event.
type PermissionRequestedData struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
	// Arguments are the call's arguments as the model wrote them.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Choices are the answers offered: once, session, always, deny.
	Choices []string `json:"choices"`
	// User is who may answer in the chat; the API's token answers for
	// anyone.
	User      string    `json:"user,omitempty"`
	Why       string    `json:"why,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PermissionResolvedData is the data of a permission.resolved event.
type PermissionResolvedData struct {
	RequestID string `json:"request_id"`
	// Answer is once, session, always, deny, timeout or cancelled.
	Answer string `json:"answer"`
}

// Permissions takes the answers to runs' permission questions.
type Permissions interface {
	// Answer answers the question requestID of session id with answer
	// (once, session, always or deny) and returns the tool it was about.
	// A question that is not waiting in that session is
	// sessions.ErrNotFound; an answer not offered, ErrInvalid.
	Answer(ctx context.Context, id sessions.ID, requestID, answer string) (tool string, err error)
}

// PermissionAnswerRequest is the body of POST
// /v1/sessions/{id}/permissions/{request_id}.
type PermissionAnswerRequest struct {
	Answer string `json:"answer"`
}

// PermissionAnswerResponse answers it.
type PermissionAnswerResponse struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
	Answer    string `json:"answer"`
}

func (s *server) answerPermission(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Permissions == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "permission questions are not answered on this server")
	}
	var req PermissionAnswerRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	answer := strings.ToLower(strings.TrimSpace(req.Answer))
	if answer == "" {
		return badRequest("answer is required: once, session, always or deny")
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	id := r.PathValue("request_id")
	tool, err := s.opts.Permissions.Answer(r.Context(), sess.ID, id, answer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, PermissionAnswerResponse{RequestID: id, Tool: tool, Answer: answer})
	return nil
}

// permissionEvent is the SSE event of a permission question's request or
// outcome.
func permissionEvent(sessionID string, at time.Time, data any) (Event, bool) {
	switch d := data.(type) {
	case agent.PermissionRequested:
		choices := make([]string, len(d.Choices))
		for i, c := range d.Choices {
			choices[i] = string(c)
		}
		var args json.RawMessage
		if json.Valid([]byte(d.Arguments)) {
			args = json.RawMessage(d.Arguments)
		}
		return envelope(sessionID, TypePermissionRequested, at, PermissionRequestedData{RequestID: d.RequestID, Tool: d.Tool,
			Arguments: args, Choices: choices, User: d.User, Why: d.Why, ExpiresAt: d.Expires.UTC()}), true
	case agent.PermissionResolved:
		return envelope(sessionID, TypePermissionResolved, at, PermissionResolvedData{RequestID: d.RequestID, Answer: d.Answer}), true
	}
	return Event{}, false
}
