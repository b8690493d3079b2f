package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/sessions"
)

// TypeToolRequested is the SSE event that asks the client for the result of
// a call of a tool it declared.
const TypeToolRequested = "tool.requested"

// CodeWaitingForToolResults answers a message sent while the session's run
// waits for client tool results (409).
const CodeWaitingForToolResults = "waiting_for_tool_results"

// StateWaitingForToolResults: the run waits for the client's tool results.
const StateWaitingForToolResults = agent.StateWaitingForToolResults

// ToolRequestedData is the data of a tool.requested event: the call to
// answer with POST /v1/sessions/{id}/tool_results before expires_at.
type ToolRequestedData struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// ClientTool is a declared tool as the API shows it. Checked says parley
// checks the model's arguments against the schema; when false (a schema
// with keywords outside parley's subset) the client checks them itself.
type ClientTool struct {
	clienttools.Spec
	Checked bool `json:"checked"`
}

// ClientToolsBody is the body of PUT /v1/sessions/{id}/tools and the
// answer of GET and PUT.
type ClientToolsBody struct {
	Tools []clienttools.Spec `json:"tools"`
}

// ClientToolsResponse answers GET and PUT /v1/sessions/{id}/tools.
type ClientToolsResponse struct {
	Tools []ClientTool `json:"tools"`
}

// ToolResultsRequest is the body of POST /v1/sessions/{id}/tool_results.
type ToolResultsRequest struct {
	Results []clienttools.Result `json:"results"`
}

// ToolResultsResponse answers POST /v1/sessions/{id}/tool_results: the
// calls answered, and those the run still waits for.
type ToolResultsResponse struct {
	Accepted []string `json:"accepted"`
	Pending  []string `json:"pending"`
}

// clientTools is the hub of client tools, or a 503.
func (s *server) clientTools() (*clienttools.Hub, error) {
	if s.opts.ClientTools == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "client tools are not available on this server")
	}
	return s.opts.ClientTools, nil
}

// checkClientTools validates a declaration, or says what is wrong (400).
func (s *server) checkClientTools(specs []clienttools.Spec) ([]clienttools.Spec, error) {
	if s.opts.ClientTools == nil {
		return nil, badRequest("client tools are not available on this server, so a session can't declare tools")
	}
	out, err := clienttools.Validate(specs, s.opts.ToolTaken)
	if err != nil {
		return nil, badRequest(err.Error())
	}
	return out, nil
}

// declareOnCreate stores a new session's tools; if that fails, the
// session is deleted again, so a failed create leaves nothing behind.
func (s *server) declareOnCreate(ctx context.Context, sess sessions.Session, specs []clienttools.Spec) error {
	err := s.opts.ClientTools.Declare(ctx, sess.ID, specs)
	if err == nil {
		return nil
	}
	if derr := s.opts.Store.Delete(context.WithoutCancel(ctx), sess.ID); derr != nil {
		s.log.WarnContext(ctx, "a session whose tools could not be stored was not deleted", "session_id", sess.ID, "error", derr)
	}
	return err
}

// apiSession is the session of the request, which must be an API
// session: only an API client can answer tool calls.
func (s *server) apiSession(r *http.Request) (sessions.Session, error) {
	sess, err := s.session(r)
	if err != nil {
		return sessions.Session{}, err
	}
	if sess.Key.Surface != sessions.SurfaceAPI {
		return sessions.Session{}, errorf(http.StatusConflict, CodeConflict, "session "+string(sess.ID)+" is a "+sess.Key.Surface+
			" session; client tools are for sessions created through the API")
	}
	return sess, nil
}

func toolsResponse(specs []clienttools.Spec) ClientToolsResponse {
	out := ClientToolsResponse{Tools: make([]ClientTool, len(specs))}
	for i, spec := range specs {
		out.Tools[i] = ClientTool{Spec: spec, Checked: spec.Checked()}
	}
	return out
}

// getClientTools is GET /v1/sessions/{id}/tools.
func (s *server) getClientTools(hub *clienttools.Hub, w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	specs, err := hub.Declared(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toolsResponse(specs))
	return nil
}

// putClientTools is PUT /v1/sessions/{id}/tools: the session's tools from
// its next turn on (an empty list removes them).
func (s *server) putClientTools(hub *clienttools.Hub, w http.ResponseWriter, r *http.Request) error {
	var req ClientToolsBody
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	specs, err := s.checkClientTools(req.Tools)
	if err != nil {
		return err
	}
	sess, err := s.apiSession(r)
	if err != nil {
		return err
	}
	if err := hub.Declare(r.Context(), sess.ID, specs); err != nil {
		if errors.Is(err, clienttools.ErrNoSession) {
			return errorf(http.StatusNotFound, CodeNotFound, err.Error())
		}
		return err
	}
	writeJSON(w, http.StatusOK, toolsResponse(specs))
	return nil
}

// postToolResults is POST /v1/sessions/{id}/tool_results: the client's
// results for the calls its session's run waits for. All are taken, or
// none (an unknown call id, a call answered twice).
func (s *server) postToolResults(hub *clienttools.Hub, w http.ResponseWriter, r *http.Request) error {
	var req ToolResultsRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if len(req.Results) == 0 {
		return badRequest(`results is required: [{"call_id": "...", "output": "..."}], one for each call of a tool.requested event`)
	}
	for i, res := range req.Results {
		if strings.TrimSpace(res.CallID) == "" {
			return badRequest("results[" + strconv.Itoa(i) + "].call_id is required: the call_id of the tool.requested event it answers")
		}
	}
	sess, err := s.apiSession(r)
	if err != nil {
		return err
	}
	if err := hub.Deliver(sess.ID, req.Results); err != nil {
		switch {
		case errors.Is(err, clienttools.ErrNotWaiting):
			return errorf(http.StatusConflict, CodeConflict, "session "+string(sess.ID)+" is not waiting for tool results; "+
				"results are taken only while its status is waiting_for_tool_results (a call may have timed out, or the run been stopped)")
		case errors.Is(err, clienttools.ErrUnknownCall):
			return errorf(http.StatusConflict, CodeConflict, err.Error())
		case errors.Is(err, clienttools.ErrInvalid):
			return badRequest(err.Error())
		}
		return err
	}
	resp := ToolResultsResponse{Accepted: []string{}, Pending: []string{}}
	for _, res := range req.Results {
		resp.Accepted = append(resp.Accepted, res.CallID)
	}
	for _, c := range hub.Waiting(sess.ID) {
		resp.Pending = append(resp.Pending, c.ID)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// waitingForResults refuses a message to a session whose run waits for
// client tool results: only the results can move it on.
func waitingForResults(sess sessions.Session, st Status) error {
	if st.State != StateWaitingForToolResults {
		return nil
	}
	id := string(sess.ID)
	return errorf(http.StatusConflict, CodeWaitingForToolResults, "session "+id+" is waiting for the results of its client tool calls ("+
		strings.Join(st.PendingToolCalls, ", ")+"); send them with POST /v1/sessions/"+id+"/tool_results, "+
		"or stop the run with POST /v1/sessions/"+id+"/abort, then send the message")
}
