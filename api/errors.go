package api

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Errors a Runner returns (wrapped is fine) to choose the HTTP status.
var (
	// ErrBusy means the session has a run in progress: 409.
	ErrBusy = errors.New("the session is busy with a run")
	// ErrQueueFull means the session's queue is at its cap: 429.
	ErrQueueFull = errors.New("the session's queue is full")
	// ErrRejected means the request is understood but can't be done in the
	// session's current state (e.g. nothing to compact): 422.
	ErrRejected = errors.New("request rejected")
	// ErrInvalid means the request's content is wrong: 400.
	ErrInvalid = errors.New("invalid request")
)

// Error codes in error bodies.
const (
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeBadRequest       = "bad_request"
	CodeTooLarge         = "body_too_large"
	CodeConflict         = "conflict"
	CodeBusy             = "busy"
	CodeQueueFull        = "queue_full"
	CodeUnprocessable    = "unprocessable"
	CodeInternal         = "internal"
	CodeUnavailable      = "unavailable"
	CodeUnsupportedMedia = "unsupported_media_type"
)

// ErrorBody is the body of every error response:
// {"error": {"code": "...", "message": "..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what went wrong.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// apiError is an error that knows its HTTP status and code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, msg string) error {
	return &apiError{status: status, code: code, msg: msg}
}

func badRequest(msg string) error { return errorf(http.StatusBadRequest, CodeBadRequest, msg) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}
