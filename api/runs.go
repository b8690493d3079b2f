package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/sessions"
)

// Status is a session's run state, as GET /v1/sessions/{id}/status returns
// it: {state: idle|busy|retrying|error, attempt?, message?, started_at?}.
type Status = agent.Status

// Run states.
const (
	StateIdle     = agent.StateIdle
	StateBusy     = agent.StateBusy
	StateRetrying = agent.StateRetrying
	StateError    = agent.StateError
)

// FileRef is a file sent with a message.
type FileRef = adapters.FileRef

// SendRequest is one message for a session's agent.
type SendRequest struct {
	SessionID sessions.ID
	Content   string
	// Model overrides the model for this message's run.
	Model string
	// ReasoningEffort overrides the agent's for this message's run.
	ReasoningEffort string
	Files           []FileRef
	// IfIdle refuses (ErrBusy) instead of queueing when the session is busy.
	IfIdle bool
}

// CompactResult is what a manual compaction did.
type CompactResult struct {
	Compacted    bool   `json:"compacted"`
	Skipped      string `json:"skipped,omitempty"`
	SummaryID    string `json:"summary_id,omitempty"`
	Summarized   int    `json:"summarized"`
	Archived     int    `json:"archived"`
	TokensBefore int64  `json:"tokens_before"`
	TokensAfter  int64  `json:"tokens_after"`
}

// Runner is what the daemon supplies to run agents: the gateway's lanes
// and the agent runner. Errors wrapping ErrBusy answer 409, ErrQueueFull
// 429, ErrRejected 422, ErrInvalid 400 and sessions.ErrNotFound 404.
type Runner interface {
	// Send queues a message on the session's lane, under the session's
	// queue mode, and returns the id of the run that will answer it: the
	// agent.Input of the message carries it as its RunID, so the run's
	// events, which reach the EventLog through Feed, carry it too.
	Send(ctx context.Context, req SendRequest) (runID string, err error)
	// Status is the session's run state.
	Status(id sessions.ID) Status
	// Abort stops the session's run, if any, keeping what it wrote so far.
	Abort(id sessions.ID) bool
	// Reset archives key's active session and starts a new one, exactly
	// like the /reset command.
	Reset(ctx context.Context, key sessions.Key) (sessions.Session, error)
	// Compact compacts the session now, on its lane.
	Compact(ctx context.Context, id sessions.ID) (CompactResult, error)
}

func (s *server) runner() (Runner, error) {
	if s.opts.Runner == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "runs are not available on this server")
	}
	return s.opts.Runner, nil
}

// SendMessageRequest is the body of POST /v1/sessions/{id}/messages.
type SendMessageRequest struct {
	Content string `json:"content"`
	Model   string `json:"model,omitempty"`
	// ReasoningEffort (low, medium, high) overrides the agent's for this
	// message's run.
	ReasoningEffort string    `json:"reasoning_effort,omitempty"`
	Files           []FileRef `json:"files,omitempty"`
	IfIdle          bool      `json:"if_idle,omitempty"`
}

// SendMessageResponse answers POST /v1/sessions/{id}/messages (202).
type SendMessageResponse struct {
	RunID     string      `json:"run_id"`
	SessionID sessions.ID `json:"session_id"`
}

func (s *server) sendMessage(run Runner, w http.ResponseWriter, r *http.Request) error {
	var req SendMessageRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	ifIdle, err := queryBool(r, "if_idle")
	if err != nil {
		return err
	}
	if strings.TrimSpace(req.Content) == "" && len(req.Files) == 0 {
		return badRequest("content is required")
	}
	if err := checkModel(req.Model); err != nil {
		return err
	}
	switch req.ReasoningEffort {
	case "", "low", "medium", "high":
	default:
		return badRequest("reasoning_effort must be low, medium or high")
	}
	for i, f := range req.Files {
		if f.ID == "" && f.URL == "" {
			return badRequest("files[" + strconv.Itoa(i) + "] needs an id or a url")
		}
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if sess.Status != sessions.StatusActive {
		return errorf(http.StatusConflict, CodeConflict, "session "+string(sess.ID)+" is archived; create or reset a session")
	}
	if err := waitingForResults(sess, run.Status(sess.ID)); err != nil {
		return err
	}
	if (ifIdle || req.IfIdle) && s.busy(sess.ID) {
		return ErrBusy
	}
	runID, err := run.Send(r.Context(), SendRequest{SessionID: sess.ID, Content: req.Content, Model: strings.TrimSpace(req.Model),
		ReasoningEffort: req.ReasoningEffort, Files: req.Files, IfIdle: ifIdle || req.IfIdle})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, SendMessageResponse{RunID: runID, SessionID: sess.ID})
	return nil
}

func (s *server) status(run Runner, w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	st := run.Status(sess.ID)
	if st.State == "" {
		st.State = StateIdle
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// AbortResponse answers POST /v1/sessions/{id}/abort.
type AbortResponse struct {
	Aborted bool `json:"aborted"`
}

func (s *server) abort(run Runner, w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, AbortResponse{Aborted: run.Abort(sess.ID)})
	return nil
}

func (s *server) compact(run Runner, w http.ResponseWriter, r *http.Request) error {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	res, err := run.Compact(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// ResetRequest is the body of POST /v1/agent/reset. Name the session by
// session_id, by its readable session_key ("telegram:12345") with agent_id
// (and user_id for a direct chat), or by the key fields.
type ResetRequest struct {
	SessionID   sessions.ID `json:"session_id,omitempty"`
	SessionKey  string      `json:"session_key,omitempty"`
	UserID      string      `json:"user_id,omitempty"`
	Surface     string      `json:"surface,omitempty"`
	SurfaceID   string      `json:"surface_id,omitempty"`
	AgentID     string      `json:"agent_id,omitempty"`
	WorkspaceID string      `json:"workspace_id,omitempty"`
}

// ResetResponse answers POST /v1/agent/reset with the new session.
type ResetResponse struct {
	Session sessions.Session `json:"session"`
}

func (s *server) reset(run Runner, w http.ResponseWriter, r *http.Request) error {
	var req ResetRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	key, err := s.resetKey(r, req)
	if err != nil {
		return err
	}
	sess, err := run.Reset(r.Context(), key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ResetResponse{Session: sess})
	return nil
}

func (s *server) resetKey(r *http.Request, req ResetRequest) (sessions.Key, error) {
	named := 0
	for _, set := range []bool{req.SessionID != "", req.SessionKey != "", req.Surface != "" || req.SurfaceID != ""} {
		if set {
			named++
		}
	}
	if named != 1 {
		return sessions.Key{}, badRequest("name the session by one of: session_id, session_key, or surface and surface_id")
	}
	if req.SessionID != "" {
		sess, err := s.opts.Store.Session(r.Context(), req.SessionID)
		if err != nil {
			return sessions.Key{}, err
		}
		return sess.Key, nil
	}
	key := sessions.Key{UserID: req.UserID, Surface: req.Surface, SurfaceID: req.SurfaceID,
		AgentID: firstNonEmpty(req.AgentID, s.opts.DefaultAgent), WorkspaceID: req.WorkspaceID}
	if req.SessionKey != "" {
		surface, id, ok := strings.Cut(req.SessionKey, ":")
		if !ok || surface == "" || id == "" {
			return sessions.Key{}, badRequest(`session_key must look like "<surface>:<id>", e.g. "telegram:12345"`)
		}
		key.Surface, key.SurfaceID = surface, id
		if strings.Contains(id, ":subagent:") {
			key.Surface, key.SurfaceID = sessions.SurfaceSubagent, req.SessionKey
		}
	}
	if err := key.Validate(); err != nil {
		return sessions.Key{}, badRequest(err.Error())
	}
	return key, nil
}
