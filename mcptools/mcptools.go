// Package mcptools gives agents the tools of Model Context Protocol
// servers, through the official Go SDK: a Manager starts each configured
// server the first time a turn needs it (a command over stdio, or a
// streamable HTTP URL), puts its tools in parley's tool registry as
// "<server>__<tool>", refreshes them when the server says its list changed,
// calls them with a per-call timeout, and starts a server that died again,
// with backoff. A tool of a server that is down answers the model with an
// error; the turn goes on.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/tools"
)

// Sep joins a server's id and its tool's name in the name the model sees.
const Sep = "__"

// Prefix marks an agent's tools entry as an MCP server's: "mcp:<id>" or
// "mcp:<id>/<tool>".
const Prefix = "mcp:"

// The states of a server.
const (
	StateIdle     = "not started" // no turn has needed it yet
	StateStarting = "starting"
	StateReady    = "ready"
	StateDown     = "down"
)

const (
	minBackoff     = time.Second
	maxBackoff     = time.Minute
	connectTimeout = 30 * time.Second
)

// Manager runs the configured MCP servers for the tool registry.
type Manager struct {
	reg *tools.Registry
	log *slog.Logger

	mu      sync.Mutex
	servers map[string]*server
	order   []string
	tokens  Tokens // people's own tokens, for servers with user_token
}

// New returns a Manager for servers, putting their tools in reg. Nothing
// starts until a turn needs a server.
func New(servers []config.MCPServer, reg *tools.Registry, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{reg: reg, log: log, servers: map[string]*server{}}
	for _, c := range servers {
		m.servers[c.ID] = m.newServer(c)
		m.order = append(m.order, c.ID)
	}
	return m
}

// newServer is the server for c: one connection, or one per person when
// c has a user_token.
func (m *Manager) newServer(c config.MCPServer) *server {
	s := &server{m: m, cfg: c, state: StateIdle}
	if c.UserToken.Provider != "" {
		s.users = newUserServer(s)
	}
	return s
}

// server is one MCP server and its connection.
type server struct {
	m   *Manager
	cfg config.MCPServer
	// users, on a server with user_token, holds each person's own
	// connection; the server itself never connects.
	users *userServer
	// owner is the user-token server this is one person's connection of:
	// its tools go to owner's catalogue, not to the registry.
	owner *userServer

	mu       sync.Mutex
	state    string
	lastErr  string
	session  *mcp.ClientSession
	tools    []*mcp.Tool
	failures int
	retryAt  time.Time
}

// Status is a server as `parley mcp ls`, /readyz and the dashboard show it.
type Status struct {
	ID    string   `json:"id"`
	State string   `json:"state"`
	Error string   `json:"error,omitempty"`
	Tools []string `json:"tools"`
}

// Statuses lists every server's state and tools, in config order.
func (m *Manager) Statuses() []Status {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	ids := slices.Clone(m.order)
	m.mu.Unlock()
	out := make([]Status, 0, len(ids))
	for _, id := range ids {
		s := m.server(id)
		if s == nil {
			continue
		}
		if s.users != nil {
			out = append(out, s.users.status())
			continue
		}
		s.mu.Lock()
		st := Status{ID: id, State: s.state, Error: s.lastErr, Tools: []string{}}
		for _, t := range s.tools {
			st.Tools = append(st.Tools, t.Name)
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Down names the servers that were started and are down now, for /readyz.
func (m *Manager) Down() []string {
	var out []string
	for _, st := range m.Statuses() {
		if st.State == StateDown {
			out = append(out, st.ID)
		}
	}
	return out
}

func (m *Manager) server(id string) *server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers[id]
}

// Expand turns an agent's tools list into tool names: "mcp:<id>" becomes
// every tool of that server (started now if it wasn't), "mcp:<id>/<tool>"
// that one; other names stay. A server that can't start contributes no
// tools, and its failure is logged: the turn goes on with the rest.
func (m *Manager) Expand(ctx context.Context, names []string) []string {
	return m.ExpandFor(ctx, names, "")
}

// ExpandFor is Expand for a turn that answers user ("<surface>:<user
// id>"; "" for nobody): a server with user_token starts that person's own
// connection, with their token, if they have connected.
func (m *Manager) ExpandFor(ctx context.Context, names []string, user string) []string {
	if m == nil || !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, Prefix) }) {
		return names
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		ref, ok := strings.CutPrefix(n, Prefix)
		if !ok {
			out = append(out, n)
			continue
		}
		id, only, _ := strings.Cut(ref, "/")
		s := m.server(id)
		if s == nil {
			continue // config check reports it
		}
		if s.users != nil {
			out = append(out, s.users.expand(ctx, user, only)...)
			continue
		}
		if err := s.ensure(ctx); err != nil {
			m.log.WarnContext(ctx, "MCP server unavailable; its tools are left out of this turn", "server", id, "error", err)
			continue
		}
		s.mu.Lock()
		for _, t := range s.tools {
			if only == "" || t.Name == only {
				out = append(out, id+Sep+t.Name)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// Start connects every server now, as `parley mcp ls` and doctor do, and
// returns the first failure of each.
func (m *Manager) Start(ctx context.Context) map[string]error {
	errs := map[string]error{}
	for _, st := range m.Statuses() {
		if s := m.server(st.ID); s.users != nil {
			continue // it starts for each person, with their token
		}
		if err := m.server(st.ID).ensure(ctx); err != nil {
			errs[st.ID] = err
		}
	}
	return errs
}

// Close stops every server.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	servers := make([]*server, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	for _, s := range servers {
		s.close()
	}
}

// Reload replaces the servers: new ones start when needed, removed ones
// stop and their tools go, changed ones start again.
func (m *Manager) Reload(servers []config.MCPServer) {
	if m == nil {
		return
	}
	m.mu.Lock()
	old := m.servers
	m.servers, m.order = map[string]*server{}, nil
	var stop []*server
	for _, c := range servers {
		if s, ok := old[c.ID]; ok && sameServer(s.cfg, c) {
			m.servers[c.ID] = s
			delete(old, c.ID)
		} else {
			m.servers[c.ID] = m.newServer(c)
		}
		m.order = append(m.order, c.ID)
	}
	for _, s := range old {
		stop = append(stop, s)
	}
	m.mu.Unlock()
	for _, s := range stop {
		s.close()
		s.unregister()
	}
}

func sameServer(a, b config.MCPServer) bool {
	return a.Command == b.Command && slices.Equal(a.Args, b.Args) && slices.Equal(a.Env, b.Env) &&
		a.URL == b.URL && slices.Equal(a.Headers, b.Headers) && a.Timeout == b.Timeout && a.UserToken == b.UserToken
}

// ensure connects the server if it isn't, unless it failed lately.
func (s *server) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		return nil
	}
	if now := time.Now(); now.Before(s.retryAt) {
		return fmt.Errorf("MCP server %s is down (%s); trying again in %s", s.cfg.ID, s.lastErr, s.retryAt.Sub(now).Round(time.Second))
	}
	s.state = StateStarting
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectTimeout)
	defer cancel()
	err := s.connectLocked(cctx)
	if err != nil {
		s.failedLocked(err)
		return fmt.Errorf("MCP server %s: %w", s.cfg.ID, err)
	}
	s.state, s.lastErr, s.failures, s.retryAt = StateReady, "", 0, time.Time{}
	return nil
}

// failedLocked marks the server down and when to try again.
func (s *server) failedLocked(err error) {
	s.state, s.lastErr = StateDown, err.Error()
	s.failures++
	wait := minBackoff << min(s.failures-1, 6)
	s.retryAt = time.Now().Add(min(wait, maxBackoff))
	if s.session != nil {
		_ = s.session.Close()
		s.session = nil
	}
}

func (s *server) connectLocked(ctx context.Context) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "parley", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			go s.refresh(context.WithoutCancel(ctx))
		},
	})
	var transport mcp.Transport
	if s.cfg.URL != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL,
			HTTPClient: &http.Client{Transport: headerTransport{headers: s.cfg.Headers, base: http.DefaultTransport}}}
	} else {
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = append(os.Environ(), s.cfg.Env...) // later entries win
		cmd.Stderr = nil
		transport = &mcp.CommandTransport{Command: cmd}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	s.session = session
	if err := s.listLocked(ctx); err != nil {
		_ = session.Close()
		s.session = nil
		return err
	}
	go func() {
		// A stdio server that exits, or a lost HTTP session, ends Wait:
		// the server is down until a turn needs it again.
		_ = session.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.session == session {
			s.session = nil
			s.state, s.lastErr = StateDown, "the server stopped"
			s.m.log.Warn("MCP server stopped; it is started again when a turn needs it", "server", s.cfg.ID)
		}
	}()
	return nil
}

// listLocked reads the server's tools and puts them in the registry.
func (s *server) listLocked(ctx context.Context) error {
	var list []*mcp.Tool
	var cursor string
	for {
		res, err := s.session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		list = append(list, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if s.owner != nil {
		s.tools = list
		s.owner.catalogue(list)
		return nil
	}
	return s.registerLocked(list)
}

// registerLocked puts the server's tools in the registry, removing those
// it no longer has.
func (s *server) registerLocked(list []*mcp.Tool) error {
	keep := map[string]bool{}
	for _, t := range list {
		name := s.cfg.ID + Sep + t.Name
		keep[name] = true
		if err := s.m.reg.Put(s.tool(t, true)); err != nil {
			// A schema parley's validator can't express is passed through:
			// the server checks its own arguments.
			s.m.log.Info("MCP tool's schema is passed through unchecked", "tool", name, "reason", err.Error())
			if err := s.m.reg.Put(s.tool(t, false)); err != nil {
				return err
			}
		}
	}
	for _, old := range s.tools {
		if name := s.cfg.ID + Sep + old.Name; !keep[name] {
			s.m.reg.Remove(name)
		}
	}
	s.tools = list
	return nil
}

// refresh reads the tool list again after notifications/tools/list_changed.
func (s *server) refresh(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := s.listLocked(cctx); err != nil {
		s.m.log.Warn("refresh an MCP server's tools", "server", s.cfg.ID, "error", err)
	}
}

// tool is t as a parley tool; withSchema gives the registry its schema.
func (s *server) tool(t *mcp.Tool, withSchema bool) tools.Tool {
	name := t.Name
	out := tools.Tool{Name: s.cfg.ID + Sep + name, Description: t.Description,
		Run: func(ctx context.Context, call tools.Call) (string, error) {
			if s.users != nil {
				return s.users.call(ctx, call.Origin.User, name, call.Arguments)
			}
			return s.call(ctx, name, call.Arguments)
		}}
	if withSchema && t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil {
			out.Schema = b
		}
	}
	return out
}

// call runs one tool call with the server's timeout.
func (s *server) call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if err := s.ensure(ctx); err != nil {
		return "", err
	}
	s.mu.Lock()
	session := s.session
	s.mu.Unlock()
	if session == nil {
		return "", fmt.Errorf("MCP server %s is down; try again later", s.cfg.ID)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
	defer cancel()
	res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
	switch {
	case err != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		return "", fmt.Errorf("%s%s%s took longer than %s and was stopped", s.cfg.ID, Sep, name, s.cfg.Timeout)
	case err != nil:
		s.mu.Lock()
		if s.session == session {
			s.failedLocked(err)
		}
		s.mu.Unlock()
		return "", fmt.Errorf("MCP server %s failed: %v; it is started again on a later call", s.cfg.ID, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		default:
			if raw, err := json.Marshal(c); err == nil {
				b.Write(raw)
			}
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(raw)
		}
	}
	text := s.scrub(b.String())
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// scrub hides, in what a server sent back, the values of its configured
// headers and environment variables: tokens a server may echo.
func (s *server) scrub(text string) string {
	for _, pairs := range []struct {
		list config.Pairs
		sep  string
	}{{s.cfg.Headers, ":"}, {s.cfg.Env, "="}} {
		for _, p := range pairs.list {
			_, v, _ := strings.Cut(p, pairs.sep)
			v = strings.TrimSpace(v)
			// Short values (a flag, a port) are not tokens, and hiding them
			// would garble results.
			if len(v) >= 8 {
				text = strings.ReplaceAll(text, v, config.Redacted)
				if _, last, ok := strings.Cut(v, " "); ok && len(last) >= 8 {
					text = strings.ReplaceAll(text, last, config.Redacted) // "Bearer <token>"
				}
			}
		}
	}
	return text
}

func (s *server) close() {
	if s.users != nil {
		s.users.close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		_ = s.session.Close()
		s.session = nil
	}
	s.state = StateIdle
}

func (s *server) unregister() {
	if s.users != nil {
		s.m.reg.Remove(s.cfg.ID + Sep + ConnectTool)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tools {
		s.m.reg.Remove(s.cfg.ID + Sep + t.Name)
	}
	s.tools = nil
}

// headerTransport adds a server's configured headers to each request.
type headerTransport struct {
	headers []string
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, h := range t.headers {
		name, value, _ := strings.Cut(h, ":")
		r.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return t.base.RoundTrip(r)
}
