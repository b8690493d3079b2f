// Package api is parley's HTTP API: the /v1 REST routes over sessions and
// runs, and the per-session Server-Sent Events stream of a run's events.
// Every /v1 route but the OpenAPI document (openapi.yaml, served at
// OpenAPIPath) needs an admin bearer token; every error body is
// {"error": {"code": "...", "message": "..."}}.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/harness"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessionhooks"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/sessionsql"
)

// DefaultMaxBody caps a JSON request body (1 MiB); a larger one gets 413.
const DefaultMaxBody = 1 << 20

// Store is what the API needs of the session store (*sessions.SQLStore).
type Store interface {
	Session(ctx context.Context, id sessions.ID) (sessions.Session, error)
	List(ctx context.Context, opts sessions.ListOptions) (sessions.Page, error)
	Create(ctx context.Context, key sessions.Key, opts sessions.CreateOptions) (sessions.Session, error)
	Update(ctx context.Context, id sessions.ID, u sessions.Update) (sessions.Session, error)
	Delete(ctx context.Context, id sessions.ID) error
	Messages(ctx context.Context, id sessions.ID, opts sessions.MessagesOptions) ([]sessions.Message, error)
	Rewind(ctx context.Context, id sessions.ID, to sessions.MessageID) (sessions.RewindResult, error)
	RewindFrom(ctx context.Context, id sessions.ID, from sessions.MessageID) (sessions.RewindResult, error)
	Unrewind(ctx context.Context, id sessions.ID) (sessions.RewindResult, error)
	Branch(ctx context.Context, id sessions.ID, from sessions.MessageID, opts sessions.BranchOptions) (sessions.Session, error)
	Append(ctx context.Context, id sessions.ID, m sessions.Message) (sessions.Message, error)
	Archive(ctx context.Context, id sessions.ID, reason string) (bool, error)
	Unarchive(ctx context.Context, id sessions.ID) (sessions.Session, error)
}

var _ Store = (*sessions.SQLStore)(nil)

// Options configures the API handler.
type Options struct {
	// Store keeps the sessions. Required.
	Store Store
	// Authenticated, if set, wraps the routes once a request has shown
	// its token: what may act on a request only after it is admitted (a
	// replica passing it to the one running its session).
	Authenticated func(http.Handler) http.Handler
	// Runner drives runs; without it the run routes answer 503.
	Runner Runner
	// Events is the run event log the SSE stream reads (fed by Feed);
	// without it the events route answers 503.
	Events *EventLog
	// Tokens are the admin bearer tokens; any one of them is accepted.
	// With none, every /v1 request gets 401.
	Tokens []string
	// DefaultAgent is the agent of a session created without one.
	DefaultAgent string
	// KnownAgent, if set, says whether an agent id exists; unknown agents
	// get 400. Nil accepts any.
	KnownAgent func(id string) bool
	// MaxBody caps JSON request bodies; 0 means DefaultMaxBody.
	MaxBody int64
	// Memory is the agents' long-term memory; without it the /v1/memory
	// routes answer 503.
	Memory *memory.Store
	// KV is session storage (the kv_* tools'); without it the
	// /v1/sessions/{id}/kv routes answer 503.
	KV *kv.Store
	// Files is the session file store; without it the
	// /v1/sessions/{id}/files routes answer 503.
	Files *files.Store
	// SessionHooks queues and sends the session hooks' events; without it
	// the hook_events route answers 503.
	SessionHooks *sessionhooks.Hooks
	// Harnesses resolve sessions' harnesses, capabilities and features;
	// without it a session names neither (400) and has no features.
	Harnesses *harness.Set
	// SQL keeps each session's own SQL database; without it the
	// /v1/sessions/{id}/sql/schema route answers 503.
	SQL *sessionsql.Store
	// ClientTools keeps the tools API sessions' clients declare and
	// carries their calls; without it a session can't declare tools (400)
	// and the tools and tool_results routes answer 503.
	ClientTools *clienttools.Hub
	// ToolTaken, if set, says a name is one of parley's own tools, which a
	// client tool may not take.
	ToolTaken func(name string) bool
	// Callbacks delivers reply callbacks (run its Run beside the handler).
	// Without it, a session can't be created with a webhook_url (400) and
	// the callbacks route answers 503.
	Callbacks *Callbacks
	// Limits gives, at each request (so a reload changes them), the caps
	// on a session's title in characters and its metadata in bytes of
	// JSON; nil, or a 0 in what it gives, means DefaultMaxTitleChars and
	// DefaultMaxMetadataBytes.
	Limits func() Limits
	// Operator answers the daemon's own routes: its status, the replicas,
	// spend caps and people's tokens; without it they answer 503.
	Operator Operator
	// Permissions takes the answers to runs' permission questions;
	// without it that route answers 503.
	Permissions Permissions
	// AgentModels, if set, gives an agent's allowed models (its own
	// first) and its reasoning effort, for GET /v1/sessions/{id}/models.
	AgentModels func(agentID string) (models []string, effort string)
	// Config, if set, is the running config, read at each request (so a
	// reload changes what it gives): Limits, KnownAgent and AgentModels
	// left nil are taken from it.
	Config func() *config.Config
	// Heartbeat is the SSE keep-alive interval; 0 means 15 s.
	Heartbeat time.Duration
	Log       *slog.Logger
}

type server struct {
	opts   Options
	tokens [][sha256.Size]byte
	log    *slog.Logger
}

// route is one of the API's routes: a ServeMux pattern and its handler.
type route struct {
	pattern string
	h       func(http.ResponseWriter, *http.Request) error
}

// routes are the API's routes.
func (s *server) routes() []route {
	return []route{
		{"GET " + OpenAPIPath, s.openAPI},
		{"GET /v1/sessions", s.listSessions},
		{"POST /v1/sessions", s.createSession},
		{"GET /v1/sessions/{id}", s.getSession},
		{"PATCH /v1/sessions/{id}", s.patchSession},
		{"DELETE /v1/sessions/{id}", s.deleteSession},
		{"POST /v1/sessions/{id}/archive", s.archiveSession},
		{"POST /v1/sessions/{id}/unarchive", s.unarchiveSession},
		{"GET /v1/sessions/{id}/messages", s.listMessages},
		{"GET /v1/sessions/{id}/sql/schema", s.sqlSchema},
		{"POST /v1/sessions/{id}/messages", needs(s.runner, s.sendMessage)},
		{"GET /v1/sessions/{id}/status", needs(s.runner, s.status)},
		{"POST /v1/sessions/{id}/abort", needs(s.runner, s.abort)},
		{"POST /v1/sessions/{id}/compact", needs(s.runner, s.compact)},
		{"POST /v1/sessions/{id}/permissions/{request_id}", s.answerPermission},
		{"GET /v1/sessions/{id}/events", s.events},
		{"POST /v1/sessions/{id}/rewind", s.rewind},
		{"POST /v1/sessions/{id}/unrewind", s.unrewind},
		{"POST /v1/sessions/{id}/branch", s.branch},
		{"GET /v1/sessions/{id}/models", s.models},
		{"POST /v1/agent/reset", needs(s.runner, s.reset)},
		{"GET /v1/sessions/{id}/callbacks", s.listCallbacks},
		{"GET /v1/sessions/{id}/hook_events", s.listHookEvents},
		{"GET /v1/sessions/{id}/tools", needs(s.clientTools, s.getClientTools)},
		{"PUT /v1/sessions/{id}/tools", needs(s.clientTools, s.putClientTools)},
		{"POST /v1/sessions/{id}/tool_results", needs(s.clientTools, s.postToolResults)},
		{"GET /v1/sessions/{id}/kv", needs(s.kvStore, s.listKV)},
		{"GET /v1/sessions/{id}/kv/{key...}", needs(s.kvStore, s.getKV)},
		{"POST /v1/sessions/{id}/files", needs(s.fileStore, s.uploadFile)},
		{"GET /v1/sessions/{id}/files", needs(s.fileStore, s.listFiles)},
		{"GET /v1/sessions/{id}/files/{name}", needs(s.fileStore, s.downloadFile)},
		{"DELETE /v1/sessions/{id}/files/{name}", needs(s.fileStore, s.deleteFile)},
		{"GET /v1/memory/search", needs(s.memoryStore, s.searchMemory)},
		{"POST /v1/memory", needs(s.memoryStore, s.writeMemory)},
		{"GET /v1/status", needs(s.operator, s.daemonStatus)},
		{"GET /v1/replicas", needs(s.operator, s.replicas)},
		{"GET /v1/sessions/{id}/budget", needs(s.operator, s.budget)},
		{"PUT /v1/users/{surface}/{user}/connections/{provider}", needs(s.operator, s.connect)},
		{"DELETE /v1/users/{surface}/{user}/connections/{provider}", needs(s.operator, s.disconnect)},
	}
}

// Patterns are the ServeMux patterns of the API's routes, for tests that
// must reach every one.
func Patterns() []string {
	var out []string
	for _, r := range (&server{}).routes() {
		out = append(out, r.pattern)
	}
	return out
}

// New returns the handler of the /v1 routes. Mount it at the root (it
// matches /v1/ only).
func New(opts Options) http.Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	opts.fromConfig()
	s := &server{opts: opts, log: opts.Log}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, t := range opts.Tokens {
		if t = strings.TrimSpace(t); t != "" {
			s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
		}
	}
	mux := http.NewServeMux()
	routes := s.routes()
	for _, r := range routes {
		mux.Handle(r.pattern, s.handle(r.h))
	}
	mux.Handle("/v1/", s.handle(func(http.ResponseWriter, *http.Request) error {
		return errorf(http.StatusNotFound, CodeNotFound, "no such route")
	}))
	if opts.Authenticated != nil {
		return s.auth(opts.Authenticated(mux))
	}
	return s.auth(mux)
}

// NoTokens is the API's refusal when no token is configured: every
// request is refused until one is.
const NoTokens = "this parley has no API token, so the API and the web chat are off: run parley init, or add one (openssl rand -hex 32) under http.tokens in the config and restart parley"

// Challenge is the WWW-Authenticate of every refusal for want of a token,
// the API's and the routes beside it.
const Challenge = `Bearer realm="parley"`

// auth admits a request carrying one of the admin tokens. Every token is
// compared, in constant time, so the timing tells nothing.
func (s *server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == OpenAPIPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r) // the document describes routes, never data
			return
		}
		if !s.authorized(r.Header.Get("Authorization")) {
			refuseBody(w, r)
			w.Header().Set("WWW-Authenticate", Challenge)
			msg := "missing or invalid bearer token: use one of http.tokens in parley's config"
			if len(s.tokens) == 0 {
				msg = NoTokens
			}
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(sum[:], s.tokens[i][:])
	}
	return match == 1
}

// needs is a route whose handler needs a part the server may lack (the
// runner, a store): get finds it, or says why the server can't answer.
func needs[P any](get func() (P, error), h func(P, http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		part, err := get()
		if err != nil {
			return err
		}
		return h(part, w, r)
	}
}

// handle turns a handler's error into the JSON error response.
func (s *server) handle(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := checkRequestText(r.PathValue("id"), r.URL.Path, r.URL.Query())
		if err == nil {
			err = h(w, r)
		}
		if err == nil {
			return
		}
		status, code, msg := s.classify(r, err)
		if status == http.StatusServiceUnavailable && code == CodeUnavailable {
			w.Header().Set("Retry-After", retryAfterSeconds)
		}
		writeError(w, status, code, msg)
	})
}

func (s *server) classify(r *http.Request, err error) (int, string, string) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code, ae.msg
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, CodeTooLarge, "request body is larger than " + byteSize(tooBig.Limit)
	case errors.Is(err, sessions.ErrNotFound):
		return http.StatusNotFound, CodeNotFound, err.Error()
	case errors.Is(err, ErrBusy):
		return http.StatusConflict, CodeBusy, err.Error()
	case errors.Is(err, sessions.ErrConflict):
		return http.StatusConflict, CodeConflict, err.Error()
	case errors.Is(err, ErrQueueFull):
		return http.StatusTooManyRequests, CodeQueueFull, err.Error()
	case errors.Is(err, ErrRejected):
		return http.StatusUnprocessableEntity, CodeUnprocessable, err.Error()
	case errors.Is(err, ErrInvalid), errors.Is(err, sessions.ErrBadCursor), errors.Is(err, sessions.ErrBadLimit),
		errors.Is(err, sessions.ErrInvalidKey), errors.Is(err, sessions.ErrInvalidMessage),
		errors.Is(err, sessions.ErrInvalidMetadata):
		return http.StatusBadRequest, CodeBadRequest, err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, CodeUnavailable, "request cancelled or timed out"
	case dbutil.Unavailable(err):
		// A write met it before it committed: the client sends it again.
		s.log.WarnContext(r.Context(), "api request met an unavailable database", "method", r.Method, "path", r.URL.Path, "error", err)
		return http.StatusServiceUnavailable, CodeUnavailable, "the database is unavailable right now; try again in a few seconds"
	}
	// Unexpected errors may name internals; log them, answer plainly.
	s.log.ErrorContext(r.Context(), "api request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return http.StatusInternalServerError, CodeInternal, "internal error"
}

// retryAfterSeconds is the Retry-After of a 503: how soon to try again.
const retryAfterSeconds = "5"

func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
