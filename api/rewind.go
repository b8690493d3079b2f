package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/sessionsql"
)

// RewindRequest is the body of POST /v1/sessions/{id}/rewind.
type RewindRequest struct {
	MessageID sessions.MessageID `json:"message_id"`
	// Inclusive hides the message itself too: the session goes back to
	// before it was sent (a chat's /undo).
	Inclusive bool `json:"inclusive,omitempty"`
}

func (s *server) rewind(w http.ResponseWriter, r *http.Request) error {
	var req RewindRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.MessageID == "" {
		return badRequest("message_id is required")
	}
	id := sessions.ID(r.PathValue("id"))
	if s.busy(id) {
		return ErrBusy
	}
	rewind := s.opts.Store.Rewind
	if req.Inclusive {
		rewind = s.opts.Store.RewindFrom
	}
	res, err := rewind(r.Context(), id, req.MessageID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *server) unrewind(w http.ResponseWriter, r *http.Request) error {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	id := sessions.ID(r.PathValue("id"))
	if s.busy(id) {
		return ErrBusy
	}
	res, err := s.opts.Store.Unrewind(r.Context(), id)
	if errors.Is(err, sessions.ErrNothingToUnrewind) {
		return errorf(http.StatusConflict, CodeConflict, "session "+string(id)+" has no rewind to undo")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// BranchRequest is the body of POST /v1/sessions/{id}/branch.
type BranchRequest struct {
	FromMessageID sessions.MessageID `json:"from_message_id"`
	Metadata      json.RawMessage    `json:"metadata,omitempty"`
}

func (s *server) branch(w http.ResponseWriter, r *http.Request) error {
	var req BranchRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.FromMessageID == "" {
		return badRequest("from_message_id is required")
	}
	if err := s.checkMetadataWebhookURL(req.Metadata); err != nil {
		return err
	}
	id := sessions.ID(r.PathValue("id"))
	if s.busy(id) {
		return ErrBusy
	}
	opts := sessions.BranchOptions{Metadata: req.Metadata}
	// The branch sees the files its parent had (the photos and documents
	// of the messages it copies, and those written since) and has its own
	// copy of its SQL database.
	opts.Also = func(ctx context.Context, q dbutil.Querier, parent, branch sessions.ID) error {
		if s.opts.Files != nil {
			if err := files.CopyIn(ctx, q, parent, branch); err != nil {
				return err
			}
		}
		if s.opts.SQL != nil {
			return sessionsql.CopyIn(ctx, q, parent, branch)
		}
		return nil
	}
	sess, err := s.opts.Store.Branch(r.Context(), id, req.FromMessageID, opts)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/sessions/"+string(sess.ID))
	writeJSON(w, http.StatusCreated, sess)
	return nil
}

// ModelsResponse is the answer of GET /v1/sessions/{id}/models: the models
// the session's agent allows (its own first), and what the session runs on.
type ModelsResponse struct {
	Models []string `json:"models"`
	// Model is the session's model: its override, else its agent's.
	Model string `json:"model"`
	// ReasoningEffort is the session's (off, low, medium, high), else its
	// agent's; "" for the provider's default.
	ReasoningEffort string `json:"reasoning_effort"`
}

func (s *server) models(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var allowed []string
	var effort string
	if s.opts.AgentModels != nil {
		allowed, effort = s.opts.AgentModels(sess.Key.AgentID)
	}
	res := ModelsResponse{Models: allowed, ReasoningEffort: effort}
	if res.Models == nil {
		res.Models = []string{}
	}
	if len(allowed) > 0 {
		res.Model = allowed[0]
	}
	var meta struct {
		Model  string `json:"model"`
		Effort string `json:"reasoning_effort"`
	}
	_ = json.Unmarshal(sess.Metadata, &meta)
	if meta.Model != "" {
		res.Model = meta.Model
	}
	if meta.Effort != "" {
		res.ReasoningEffort = meta.Effort
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
