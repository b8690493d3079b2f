package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/parleyd/parley/sessions"
)

// RewindRequest is the body of POST /v1/sessions/{id}/rewind.
type RewindRequest struct {
	MessageID sessions.MessageID `json:"message_id"`
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
	res, err := s.opts.Store.Rewind(r.Context(), id, req.MessageID)
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
	sess, err := s.opts.Store.Branch(r.Context(), id, req.FromMessageID, sessions.BranchOptions{Metadata: req.Metadata})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/sessions/"+string(sess.ID))
	writeJSON(w, http.StatusCreated, sess)
	return nil
}
