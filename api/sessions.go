package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/sessions"
)

// DefaultPageSize is the page size when a request names none.
const DefaultPageSize = 50

func (s *server) listSessions(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", DefaultPageSize, 1, sessions.MaxPageSize)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	opts := sessions.ListOptions{
		Limit:   limit,
		Cursor:  q.Get("cursor"),
		Status:  sessions.Status(q.Get("status")),
		Surface: q.Get("surface"),
		AgentID: firstNonEmpty(q.Get("agent"), q.Get("agent_id")),
		UserID:  firstNonEmpty(q.Get("user"), q.Get("user_id")),
	}
	if opts.Ephemeral, err = queryBool(r, "include_ephemeral"); err != nil {
		return err
	}
	switch opts.Status {
	case "", sessions.StatusActive, sessions.StatusArchived:
	default:
		return badRequest("status must be active or archived")
	}
	page, err := s.opts.Store.List(r.Context(), opts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.viewPage(r.Context(), page))
	return nil
}

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	Agent string `json:"agent"`
	// Harness is the harness the session runs on (its version now, kept
	// for the session's life).
	Harness string `json:"harness,omitempty"`
	// Capabilities are the session's own, beside its harness's.
	Capabilities []string        `json:"capabilities,omitempty"`
	Title        string          `json:"title"`
	Model        string          `json:"model"`
	User         string          `json:"user"`
	Metadata     json.RawMessage `json:"metadata"`
	// WebhookURL, if set, receives every finished assistant reply (stored
	// as metadata.webhook_url).
	WebhookURL string `json:"webhook_url,omitempty"`
	// Tools are tools the client declares: their calls go to the client
	// (tool.requested), which answers with POST .../tool_results.
	Tools []clienttools.Spec `json:"tools,omitempty"`
	// Surface is "api" (the default: a session of its own) or "cli", for
	// parley's own terminal beside a running daemon: with SurfaceID "chat"
	// (parley chat's cli:chat) or "run:<time>" (parley ask's), and a User.
	Surface   string `json:"surface,omitempty"`
	SurfaceID string `json:"surface_id,omitempty"`
	// Workspace, if set, is the session's workspace: part of its key, and
	// the scope of its memory.
	Workspace string `json:"workspace,omitempty"`
}

func (s *server) createSession(w http.ResponseWriter, r *http.Request) error {
	var req CreateSessionRequest
	if err := s.decode(w, r, &req, true); err != nil {
		return err
	}
	agent := strings.TrimSpace(firstNonEmpty(req.Agent, s.opts.DefaultAgent))
	if agent == "" {
		return badRequest("agent is required")
	}
	if err := s.checkAgent(agent); err != nil {
		return err
	}
	meta, err := withModel(req.Metadata, req.Model)
	if err != nil {
		return err
	}
	if meta, err = s.withWebhookURL(meta, req.WebhookURL); err != nil {
		return err
	}
	if meta, err = s.withHarness(r.Context(), meta, req.Harness, req.Capabilities); err != nil {
		return err
	}
	if err := s.checkSessionFields(req.Title, meta); err != nil {
		return err
	}
	if len(req.Tools) > 0 {
		if req.Tools, err = s.checkClientTools(req.Tools); err != nil {
			return err
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	key := sessions.Key{UserID: strings.TrimSpace(req.User), Surface: sessions.SurfaceAPI, SurfaceID: id.String(), AgentID: agent}
	if err := cliSurface(&key, req.Surface, req.SurfaceID); err != nil {
		return err
	}
	if ws := strings.TrimSpace(req.Workspace); ws != "" {
		if !sessions.ValidWorkspaceID(ws) {
			return badRequest("workspace " + quote(ws) + " is not a workspace id; " + sessions.WorkspaceIDRule)
		}
		key.WorkspaceID = ws
	}
	sess, err := s.opts.Store.Create(r.Context(), key, sessions.CreateOptions{Title: req.Title, Metadata: meta})
	if err != nil {
		return err
	}
	if len(req.Tools) > 0 {
		if err := s.declareOnCreate(r.Context(), sess, req.Tools); err != nil {
			return err
		}
	}
	w.Header().Set("Location", "/v1/sessions/"+string(sess.ID))
	writeJSON(w, http.StatusCreated, s.view(r.Context(), sess))
	return nil
}

// withModel sets the "model" key of a metadata object (the session's model
// override) when model is given.
func withModel(meta json.RawMessage, model string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(meta) > 0 && string(meta) != "null" {
		if err := json.Unmarshal(meta, &obj); err != nil || obj == nil {
			return nil, badRequest("metadata must be a JSON object")
		}
	}
	if model = strings.TrimSpace(model); model != "" {
		b, _ := json.Marshal(model)
		obj["model"] = b
	}
	return json.Marshal(obj)
}

// cliSurface sets key's surface to the one a request names: "api" (or
// none) keeps it; "cli" takes "chat" or "run:<time>", for a person.
func cliSurface(key *sessions.Key, surface, surfaceID string) error {
	surface, surfaceID = strings.TrimSpace(surface), strings.TrimSpace(surfaceID)
	switch surface {
	case "", sessions.SurfaceAPI:
		if surfaceID != "" {
			return badRequest(`surface_id is only taken with surface "cli"`)
		}
		return nil
	case sessions.SurfaceCLI:
	default:
		return badRequest(`surface must be "api" or "cli"`)
	}
	run, isRun := strings.CutPrefix(surfaceID, sessions.CLIRunPrefix)
	if surfaceID != "chat" && (!isRun || run == "" || len(run) > 64 || strings.ContainsFunc(run, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
		return badRequest(`a "cli" session's surface_id is "chat" or "run:<time>"`)
	}
	if key.UserID == "" {
		return badRequest(`a "cli" session needs its user`)
	}
	key.Surface, key.SurfaceID = surface, surfaceID
	return nil
}

// withWebhookURL sets metadata.webhook_url when given, and checks the one
// the metadata already holds.
func (s *server) withWebhookURL(meta json.RawMessage, raw string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(meta, &obj); err != nil {
		return nil, badRequest("metadata must be a JSON object")
	}
	if raw = strings.TrimSpace(raw); raw != "" {
		b, _ := json.Marshal(raw)
		obj[MetadataWebhookURL] = b
	}
	v, ok := obj[MetadataWebhookURL]
	if !ok {
		return meta, nil
	}
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, badRequest("metadata.webhook_url must be a string")
	}
	if err := s.checkCallbackURL(raw); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// checkSessionFields checks a new session's title, metadata size and
// model override.
func (s *server) checkSessionFields(title string, meta json.RawMessage) error {
	if err := s.checkTitle(title); err != nil {
		return err
	}
	if err := s.checkMetadata(meta); err != nil {
		return err
	}
	model, err := metadataModel(meta)
	if err != nil {
		return err
	}
	return checkModel(model)
}

func (s *server) checkAgent(agent string) error {
	if s.opts.KnownAgent != nil && !s.opts.KnownAgent(agent) {
		return badRequest("unknown agent " + quote(agent))
	}
	return nil
}

func (s *server) session(r *http.Request) (sessions.Session, error) {
	return s.opts.Store.Session(r.Context(), sessions.ID(r.PathValue("id")))
}

func (s *server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(r.Context(), sess))
	return nil
}

// PatchSessionRequest is the body of PATCH /v1/sessions/{id}; absent fields
// stay as they are. An empty model removes the session's model override.
type PatchSessionRequest struct {
	Title    *string         `json:"title"`
	Agent    *string         `json:"agent"`
	Model    *string         `json:"model"`
	Metadata json.RawMessage `json:"metadata"`
	// AddCapabilities adds session capabilities (recorded in the
	// history).
	AddCapabilities []string `json:"add_capabilities,omitempty"`
}

func (s *server) patchSession(w http.ResponseWriter, r *http.Request) error {
	var req PatchSessionRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Agent != nil {
		a := strings.TrimSpace(*req.Agent)
		if a == "" {
			return badRequest("agent must not be empty")
		}
		if err := s.checkAgent(a); err != nil {
			return err
		}
		req.Agent = &a
	}
	if len(req.Metadata) > 0 && string(req.Metadata) != "null" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(req.Metadata, &obj) != nil || obj == nil {
			return badRequest("metadata must be a JSON object")
		}
		if _, ok := obj["harness"]; ok {
			return badRequest("a session's harness is fixed when it starts; start a new session with the harness instead")
		}
		if _, ok := obj["capabilities"]; ok {
			return badRequest("capabilities are added with add_capabilities, not through metadata")
		}
	} else {
		req.Metadata = nil
	}
	if err := s.checkMetadataWebhookURL(req.Metadata); err != nil {
		return err
	}
	id := sessions.ID(r.PathValue("id"))
	if req.Title != nil {
		if err := s.checkTitle(*req.Title); err != nil {
			return err
		}
	}
	if req.Model != nil {
		if err := checkModel(*req.Model); err != nil {
			return err
		}
	}
	if req.Metadata != nil {
		model, err := metadataModel(req.Metadata)
		if err != nil {
			return err
		}
		if err := checkModel(model); err != nil {
			return err
		}
		// The merged metadata is what must fit.
		cur, err := s.opts.Store.Session(r.Context(), id)
		if err != nil {
			return err
		}
		if err := s.checkMetadata(mergedMetadata(cur.Metadata, req.Metadata)); err != nil {
			return err
		}
	}
	if len(req.AddCapabilities) > 0 {
		if s.opts.Harnesses == nil {
			return badRequest("capabilities are not available on this server")
		}
		if err := s.opts.Harnesses.CheckCapabilities(req.AddCapabilities); err != nil {
			return badRequest(err.Error())
		}
	}
	if req.Agent != nil && s.busy(id) {
		return ErrBusy
	}
	before, err := s.opts.Store.Session(r.Context(), id)
	if err != nil {
		return err
	}
	sess, err := s.opts.Store.Update(r.Context(), id, sessions.Update{
		Title: req.Title, AgentID: req.Agent, Model: req.Model, Metadata: req.Metadata,
	})
	if err != nil {
		return err
	}
	if req.Agent != nil && *req.Agent != before.Key.AgentID {
		if err := s.note(r.Context(), id, "Agent switched from "+before.Key.AgentID+" to "+*req.Agent+"."); err != nil {
			return err
		}
	}
	if len(req.AddCapabilities) > 0 {
		if err := s.addCapabilities(r.Context(), id, req.AddCapabilities); err != nil {
			return err
		}
	}
	if sess, err = s.opts.Store.Session(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(r.Context(), sess))
	return nil
}

func (s *server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id := sessions.ID(r.PathValue("id"))
	if s.busy(id) {
		return ErrBusy
	}
	if err := s.opts.Store.Delete(r.Context(), id); err != nil {
		return err
	}
	if s.opts.Events != nil {
		s.opts.Events.Forget(string(id))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// archiveSession archives a session, leaving it readable (its messages,
// GET /v1/sessions?status=archived) and closed to new messages. Archiving
// an archived session changes nothing; a run in progress is 409, as it
// would go on writing to a closed session.
func (s *server) archiveSession(w http.ResponseWriter, r *http.Request) error {
	id := sessions.ID(r.PathValue("id"))
	if s.busy(id) {
		return ErrBusy
	}
	if _, err := s.opts.Store.Archive(r.Context(), id, sessions.ReasonManual); err != nil {
		return err
	}
	sess, err := s.opts.Store.Session(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// unarchiveSession makes an archived session its conversation's active
// one again (409 while the conversation has another).
func (s *server) unarchiveSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.opts.Store.Unarchive(r.Context(), sessions.ID(r.PathValue("id")))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// busy reports whether the runner has a run in progress for id.
func (s *server) busy(id sessions.ID) bool {
	if s.opts.Runner == nil {
		return false
	}
	st := s.opts.Runner.Status(id).State
	return st != "" && st != StateIdle && st != StateError
}

// MessagesPage is one page of a session's messages, oldest first.
type MessagesPage struct {
	Messages []sessions.Message `json:"messages"`
	Next     string             `json:"next_cursor,omitempty"`
}

func (s *server) listMessages(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", DefaultPageSize, 1, sessions.MaxPageSize)
	if err != nil {
		return err
	}
	archived, err := queryBool(r, "include_archived")
	if err != nil {
		return err
	}
	hidden, err := queryBool(r, "include_hidden")
	if err != nil {
		return err
	}
	after, err := decodeMessageCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		return err
	}
	f, err := parseFilter(r, false)
	if err != nil {
		return err
	}
	id := sessions.ID(r.PathValue("id"))
	// One more than the page, to know whether another follows.
	opts := sessions.MessagesOptions{Archived: archived, Hidden: hidden, Limit: limit + 1, After: after}
	var msgs []sessions.Message
	if f.any() {
		msgs, err = s.filteredMessages(r.Context(), id, opts, f, limit)
	} else {
		msgs, err = s.opts.Store.Messages(r.Context(), id, opts)
	}
	if err != nil {
		return err
	}
	page := MessagesPage{Messages: msgs}
	if len(msgs) > limit {
		page.Messages = msgs[:limit]
		page.Next = encodeMessageCursor(msgs[limit-1])
	}
	if page.Messages == nil {
		page.Messages = []sessions.Message{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
