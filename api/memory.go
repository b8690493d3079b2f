package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/parleyd/parley/memory"
)

// memoryStore is the memory store the routes use, or a 503.
func (s *server) memoryStore() (*memory.Store, error) {
	if s.opts.Memory == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "memory is not available on this server")
	}
	return s.opts.Memory, nil
}

// MemorySearchResponse answers GET /v1/memory/search.
type MemorySearchResponse struct {
	Scope   memory.Scope    `json:"scope"`
	Results []memory.Result `json:"results"`
}

// searchMemory is GET /v1/memory/search?q=&user=&agent=&workspace=&limit=.
// The scope is explicit: user is the scope's user as memory.ScopeOf forms
// it ("user:<surface>:<id>" or "group:<surface>:<chat id>").
func (s *server) searchMemory(store *memory.Store, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	scope, err := s.memoryScope(q.Get("agent"), q.Get("user"), q.Get("workspace"))
	if err != nil {
		return err
	}
	text := strings.TrimSpace(q.Get("q"))
	if text == "" {
		return badRequest("q is required: the words to search for")
	}
	limit, err := queryInt(r, "limit", memory.DefaultSearchLimit, 1, memory.MaxSearchLimit)
	if err != nil {
		return err
	}
	res, err := store.Search(r.Context(), scope, text, limit)
	if err != nil {
		return memoryError(err)
	}
	if res == nil {
		res = []memory.Result{}
	}
	writeJSON(w, http.StatusOK, MemorySearchResponse{Scope: scope, Results: res})
	return nil
}

// WriteMemoryRequest is the body of POST /v1/memory.
type WriteMemoryRequest struct {
	Agent     string   `json:"agent"`
	User      string   `json:"user"`
	Workspace string   `json:"workspace,omitempty"`
	Content   string   `json:"content"`
	Tags      []string `json:"tags,omitempty"`
}

// writeMemory is POST /v1/memory: it stores one memory in an explicit
// scope and answers 201 with the item.
func (s *server) writeMemory(store *memory.Store, w http.ResponseWriter, r *http.Request) error {
	var req WriteMemoryRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	scope, err := s.memoryScope(req.Agent, req.User, req.Workspace)
	if err != nil {
		return err
	}
	it, err := store.Write(r.Context(), scope, memory.Memory{Content: req.Content, Tags: req.Tags})
	if err != nil {
		return memoryError(err)
	}
	writeJSON(w, http.StatusCreated, it)
	return nil
}

// memoryScope checks an explicit scope. An empty agent is the default
// agent; the user must be spelled as memory.ScopeOf spells it, so a scope
// given here finds what the agent wrote in its sessions.
func (s *server) memoryScope(agent, user, workspace string) (memory.Scope, error) {
	agent, user, workspace = strings.TrimSpace(agent), strings.TrimSpace(user), strings.TrimSpace(workspace)
	if agent == "" {
		agent = s.opts.DefaultAgent
	}
	if agent == "" {
		return memory.Scope{}, badRequest("agent is required")
	}
	if s.opts.KnownAgent != nil && !s.opts.KnownAgent(agent) {
		return memory.Scope{}, badRequest("unknown agent " + quote(agent))
	}
	if user == "" {
		return memory.Scope{}, badRequest(`user is required: the scope's user, "user:<surface>:<user id>" or "group:<surface>:<chat id>"`)
	}
	kind, rest, _ := strings.Cut(user, ":")
	surface, id, ok := strings.Cut(rest, ":")
	if (kind != "user" && kind != "group") || !ok || surface == "" || id == "" {
		return memory.Scope{}, badRequest("user " + quote(user) + ` is not a scope's user; write "user:<surface>:<user id>" or "group:<surface>:<chat id>", e.g. "user:telegram:42"`)
	}
	scope := memory.Scope{Agent: agent, User: user, Workspace: workspace}
	if err := scope.Validate(); err != nil {
		return memory.Scope{}, badRequest(err.Error())
	}
	return scope, nil
}

// memoryError maps the memory store's errors: bad input is 400, an index
// that can't be reached is 503.
func memoryError(err error) error {
	switch {
	case errors.Is(err, memory.ErrInvalid), errors.Is(err, memory.ErrInvalidScope):
		return badRequest(err.Error())
	case errors.Is(err, memory.ErrIndexUnavailable):
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, err.Error())
	}
	return err
}
