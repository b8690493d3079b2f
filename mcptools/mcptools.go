// Package mcptools gives agents the tools of Model Context Protocol
// servers, through the official Go SDK: a Manager starts each configured
// server the first time a turn needs it (a command over stdio, or a
// streamable HTTP URL), puts its tools in parley's tool registry as
// "<server>__<tool>", refreshes them when the server says its list changed,
// calls them with a per-call timeout, and starts a server that died again,
// with backoff. A tool of a server that is down stays offered and answers
// the model that the server is down and when it is tried again; the turn
// goes on. What a server sends back is scrubbed of secrets and capped.
package mcptools

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/secret"
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
	// closeWait bounds Close: a server not stopped by then is left to
	// stop on its own, each of its steps bounded too.
	closeWait = 10 * time.Second
)

// Manager runs the configured MCP servers for the tool registry.
type Manager struct {
	reg *tools.Registry
	log *slog.Logger

	mu      sync.Mutex
	servers map[string]*server
	order   []string
	tokens  Tokens // people's own tokens, for servers with user_token
	// scrubber hides, in everything a server sends back and in every
	// error and status, the servers' env and header values, people's
	// tokens, and whatever else it was given (the secrets store's values).
	scrubber *secret.Scrubber
}

// New returns a Manager for servers, putting their tools in reg. Nothing
// starts until a turn needs a server.
func New(servers []config.MCPServer, reg *tools.Registry, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{reg: reg, log: log, servers: map[string]*server{}, scrubber: secret.NewScrubber()}
	for _, c := range servers {
		m.servers[c.ID] = m.newServer(c)
		m.order = append(m.order, c.ID)
	}
	return m
}

// newServer is the server for c: one connection, or one per person when
// c has a user_token.
func (m *Manager) newServer(c config.MCPServer) *server {
	c = withDefaults(c)
	s := &server{m: m, cfg: c, state: StateIdle}
	m.scrubber.Add(secretsOf(c)...)
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
	stopConn context.CancelFunc // ends the session's background work
	tools    []*mcp.Tool
	failures int
	retryAt  time.Time

	refreshMu    sync.Mutex
	refreshing   bool // a read of the tool list is under way
	refreshAgain bool // and another notice came meanwhile
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
// that one; other names stay. A server that can't start contributes the
// tools it listed before, which answer that it is down (none if it never
// started), and its failure is logged: the turn goes on with the rest.
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
		if err := s.ensure(ctx); err != nil && !errors.Is(err, errBackoff) {
			// Logged once per attempt: one in backoff is not tried again,
			// and its tools (if it listed them before) stay offered,
			// answering that it is down.
			m.log.WarnContext(ctx, "MCP server unavailable", "server", id, "error", err)
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

// Close stops every server, all at once, waiting closeWait at most.
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
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		m.log.Warn("MCP servers still stopping; parley goes on without waiting", "waited", closeWait.String())
	}
}

// SetScrubber makes s hide what the Manager hides (the servers' env and
// header values, people's tokens), and the Manager hide what s does (the
// secrets store's values): one set, for tools, errors and logs alike.
func (m *Manager) SetScrubber(s *secret.Scrubber) {
	if m == nil || s == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, srv := range m.servers {
		s.Add(secretsOf(srv.cfg)...)
	}
	m.scrubber = s
}

// Scrubber is the set of values the Manager hides.
func (m *Manager) Scrubber() *secret.Scrubber {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.scrubber
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
		if s, ok := old[c.ID]; ok && sameServer(s.cfg, withDefaults(c)) {
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

// withDefaults is c with the defaults config.Parse fills in where a
// caller left them out.
func withDefaults(c config.MCPServer) config.MCPServer {
	if c.MaxResultKB <= 0 {
		c.MaxResultKB = config.DefaultMCPMaxResultKB
	}
	if c.MaxMessageMB <= 0 {
		c.MaxMessageMB = config.DefaultMCPMaxMessageMB
	}
	if c.InheritEnv == nil && c.URL == "" {
		c.InheritEnv = slices.Clone(config.DefaultMCPInheritEnv)
	}
	if c.Timeout <= 0 {
		c.Timeout = config.DefaultMCPTimeout
	}
	return c
}

func sameServer(a, b config.MCPServer) bool {
	return a.Command == b.Command && slices.Equal(a.Args, b.Args) && slices.Equal(a.Env, b.Env) &&
		slices.Equal(a.InheritEnv, b.InheritEnv) && a.RunAs == b.RunAs &&
		a.URL == b.URL && slices.Equal(a.Headers, b.Headers) && a.Timeout == b.Timeout && a.UserToken == b.UserToken &&
		a.MaxResultKB == b.MaxResultKB && a.MaxMessageMB == b.MaxMessageMB
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
