// Package acpserve is parley as an Agent Client Protocol agent, on the
// protocol's Go SDK (github.com/coder/acp-go-sdk): an editor (Zed, a
// JetBrains IDE, a Neovim plugin) starts `parley acp` and talks to a
// parley agent over its standard input and output. Everything it does goes
// through parley's HTTP API as a client would (a session per ACP session,
// a message per prompt, the run's event stream, abort, the permission
// route), so one implementation serves both a daemon in this process
// (reached in memory) and a running daemon elsewhere (--server).
package acpserve

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/parleyd/parley/client"
)

// Options are what the agent acts on.
type Options struct {
	// Client reaches parley's API. Required.
	Client *client.Client
	// Agent is the parley agent of the sessions session/new creates; ""
	// means parley's default agent.
	Agent string
	// Harness is the harness (harnesses[] in parley's config) the sessions
	// session/new creates run on; "" means their agent's or none.
	Harness string
	// Version is the build's, for the agent's implementation info.
	Version string
	Log     *slog.Logger

	// streamIdle is how long a response may be silent; 0 means
	// streamIdle (tests shorten it).
	streamIdle time.Duration
}

// Serve speaks ACP on in and out until the client closes in or ctx ends.
// A turn still running then goes on in parley and is stored; a later
// session/load replays it.
func Serve(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	if o.Client == nil {
		return errors.New("acpserve: no API client")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.streamIdle <= 0 {
		o.streamIdle = streamIdle
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	c := *o.Client
	c.HTTP = idleClient(c.HTTP, o.streamIdle)
	a := &agent{o: o, c: &c, life: life, sessions: map[string]*session{}}
	// Nothing is read before the connection is built and known to the
	// agent: the SDK starts handling requests as it builds it.
	ready := make(chan struct{})
	conn := acp.NewAgentSideConnection(a, out, gatedReader{r: in, open: ready})
	conn.SetLogger(o.Log)
	a.conn = conn
	close(ready)
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	stop()
	a.mu.Lock()
	a.closed = true // no prompt starts now
	a.mu.Unlock()
	a.wg.Wait()
	return nil
}

// gatedReader reads r once open is closed.
type gatedReader struct {
	r    io.Reader
	open <-chan struct{}
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

// agent answers the client's requests. Its sessions are the ones this
// connection opened (new, load or resume): a prompt names one of them.
type agent struct {
	o    Options
	c    *client.Client
	conn *acp.AgentSideConnection
	// life outlives each request: a prompt follows its run on it, so a
	// second prompt (which the SDK answers by cancelling the first's
	// request context) doesn't end the first; only session/cancel does.
	life context.Context
	// wg counts the prompts running, which Serve waits for once life
	// has ended.
	wg sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

// session is an ACP session open on this connection: a parley session.
type session struct {
	id string
	// run is the prompt running in it, nil when none runs; guarded by
	// agent.mu.
	run *promptRun
}

// invalid is a JSON-RPC "invalid params" error whose message says what to
// change.
func invalid(format string, args ...any) error {
	return &acp.RequestError{Code: -32602, Message: fmt.Sprintf(format, args...)}
}

// failed is a JSON-RPC internal error saying what went wrong in parley.
func failed(format string, args ...any) error {
	return &acp.RequestError{Code: -32603, Message: fmt.Sprintf(format, args...)}
}

func (a *agent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	title := "parley"
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "parley", Title: &title, Version: cmp.Or(a.o.Version, "dev")},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: true,
			// Text (and resource links, as text) only: no images,
			// audio or embedded resources.
			PromptCapabilities: acp.PromptCapabilities{},
			SessionCapabilities: acp.SessionCapabilities{
				Close:  &acp.SessionCloseCapabilities{},
				Resume: &acp.SessionResumeCapabilities{},
			},
		},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	// parley offers no authentication methods: the API token is the
	// command line's (--token), never the editor's.
	return acp.AuthenticateResponse{}, invalid("parley needs no authentication over ACP: it reaches its API with the token it was started with (--token or PARLEY_API_TOKEN)")
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if err := checkCwd(p.Cwd); err != nil {
		return acp.NewSessionResponse{}, err
	}
	a.noteMCPServers(ctx, len(p.McpServers))
	title := "ACP: " + filepath.Base(p.Cwd)
	body := map[string]any{"title": title, "metadata": map[string]any{"acp_cwd": p.Cwd}}
	if a.o.Agent != "" {
		body["agent"] = a.o.Agent
	}
	if a.o.Harness != "" {
		body["harness"] = a.o.Harness
	}
	var sess struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, "POST", "/v1/sessions", body, &sess); err != nil {
		var se *client.StatusError
		if errors.As(err, &se) && se.Status == http.StatusBadRequest {
			switch {
			case a.o.Harness != "" && strings.Contains(se.Message, "harness"):
				return acp.NewSessionResponse{}, invalid("parley refused to create a session: %s; start parley acp with a --harness of the daemon's config", se.Message)
			case a.o.Agent != "" && strings.Contains(se.Message, "agent"):
				return acp.NewSessionResponse{}, invalid("parley refused to create a session: %s; start parley acp with an --agent of the daemon's config", se.Message)
			}
		}
		return acp.NewSessionResponse{}, a.apiError(ctx, "create a session", err)
	}
	a.open(sess.ID)
	a.o.Log.InfoContext(ctx, "acp session created", "session_id", sess.ID)
	return acp.NewSessionResponse{SessionId: acp.SessionId(sess.ID)}, nil
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	id, err := a.existing(ctx, string(p.SessionId), "session/load")
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	a.noteMCPServers(ctx, len(p.McpServers))
	if err := a.replay(ctx, id); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	a.open(id)
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	id, err := a.existing(ctx, string(p.SessionId), "session/resume")
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	a.noteMCPServers(ctx, len(p.McpServers))
	a.open(id)
	return acp.ResumeSessionResponse{}, nil
}

// CloseSession forgets the session on this connection, stopping its
// running prompt first. The parley session stays as it is (active, its
// history kept), so session/load or session/resume opens it again.
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	id := string(p.SessionId)
	a.mu.Lock()
	s, ok := a.sessions[id]
	var run *promptRun
	if ok {
		run = s.run
		delete(a.sessions, id)
	}
	a.mu.Unlock()
	if !ok {
		return acp.CloseSessionResponse{}, a.notOpen(id)
	}
	if run != nil {
		a.cancel(ctx, id, run)
	}
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, &acp.RequestError{Code: -32601, Message: "parley doesn't offer session/list (its sessionCapabilities have no list); parley sessions list shows them"}
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, &acp.RequestError{Code: -32601, Message: "parley sessions have no modes; leave the mode as it is"}
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, &acp.RequestError{Code: -32601, Message: "parley sessions offer no config options; set the model with the agent's config"}
}

// checkCwd refuses a cwd the protocol doesn't allow: it must be an
// absolute path.
func checkCwd(cwd string) error {
	switch {
	case cwd == "":
		return invalid("cwd is missing; send the absolute path of the project the session works in")
	case !utf8.ValidString(cwd) || strings.IndexByte(cwd, 0) >= 0:
		return invalid("cwd is not valid UTF-8 text; send an absolute path")
	case !filepath.IsAbs(cwd):
		return invalid("cwd %q is not an absolute path; send the project's absolute path", cwd)
	}
	return nil
}

// noteMCPServers logs that MCP servers an editor passes aren't run:
// parley's agents use the servers of its own config.
func (a *agent) noteMCPServers(ctx context.Context, n int) {
	if n > 0 {
		a.o.Log.InfoContext(ctx, "mcp servers from the editor not used; configure them under mcp.servers", "servers", n)
	}
}

// open records the session as open on this connection.
func (a *agent) open(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.sessions[id]; !ok {
		a.sessions[id] = &session{id: id}
	}
}

// notOpen is the error for a session this connection hasn't opened.
func (a *agent) notOpen(id string) error {
	if id == "" {
		return invalid("sessionId is missing; send the id session/new returned")
	}
	return invalid("session %q is not open on this connection; open it with session/load or session/resume, or start one with session/new", id)
}

// existing is the id of the parley session id names, checked to exist.
func (a *agent) existing(ctx context.Context, id, method string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", invalid("sessionId is missing; %s takes the id of a session session/new returned", method)
	}
	var sess struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, "GET", "/v1/sessions/"+url.PathEscape(id), nil, &sess); err != nil {
		var se *client.StatusError
		if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusBadRequest) {
			return "", invalid("parley has no session %q; send the id a session/new returned, or start one with session/new", id)
		}
		return "", a.apiError(ctx, "read session "+id, err)
	}
	return sess.ID, nil
}

// apiTimeout bounds each API call but a run's event stream, which lasts
// as long as its turn.
const apiTimeout = 30 * time.Second

// call makes one API request and decodes its answer into out, within
// apiTimeout.
func (a *agent) call(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return a.c.Do(ctx, method, path, body, out)
}

// apiError is what the client is told of an API call that failed: the
// API's own message for a refusal (it says what to change), else that
// parley couldn't be reached.
func (a *agent) apiError(ctx context.Context, what string, err error) error {
	var se *client.StatusError
	if errors.As(err, &se) {
		if se.Status < 500 {
			return invalid("parley refused to %s: %s", what, se.Message)
		}
		a.o.Log.WarnContext(ctx, "acp api call failed", "what", what, "status", se.Status, "error", se.Message)
		return failed("parley couldn't %s (%d); try again, and see parley's log if it goes on", what, se.Status)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	a.o.Log.WarnContext(ctx, "acp api call failed", "what", what, "error", err)
	return failed("parley couldn't %s: %v; check that parley runs", what, err)
}

// rawJSON is a JSON value kept as it came, or nil when it is empty.
func rawJSON(b json.RawMessage) any {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return b
}
