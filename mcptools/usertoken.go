package mcptools

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/tools"
)

// ConnectTool is the one tool a user-token server offers before anyone
// has connected (so its real tools are unknown): calling it tells the
// person how to connect.
const ConnectTool = "connect_account"

const (
	// maxUserConns caps the people's connections one server keeps open;
	// the least recently used closes first.
	maxUserConns = 32
	// userIdle closes a person's connection unused this long.
	userIdle = 10 * time.Minute
)

// Tokens returns a person's own token for a provider; user is
// "<surface>:<user id>". It returns an error wrapping ErrNotConnected when
// they have none.
type Tokens func(ctx context.Context, user, provider string) (string, error)

// SetTokens sets where people's own tokens come from, for servers with a
// user_token; without it, those servers' tools tell everyone to connect.
func (m *Manager) SetTokens(t Tokens) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens = t
}

func (m *Manager) tokenFunc() Tokens {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokens
}

// userServer runs a server with user_token: each person's calls go to a
// connection of their own (a process for stdio, a session for HTTP) that
// carries their token, and never another's.
type userServer struct {
	s *server // the configured server: its tools are the catalogue

	mu    sync.Mutex
	conns map[string]*userConn
}

type userConn struct {
	srv  *server
	sum  [32]byte // the token's hash: a new token starts a new connection
	used time.Time
}

func newUserServer(s *server) *userServer {
	u := &userServer{s: s, conns: map[string]*userConn{}}
	u.putConnectTool()
	return u
}

func (u *userServer) provider() string { return u.s.cfg.UserToken.Provider }

// notConnected is what a person without a token is told.
func (u *userServer) notConnected() error {
	return fmt.Errorf("the %s tools act with your own %s account, which is not connected: connect with /connect %s in a direct chat with the bot, then ask again",
		u.s.cfg.ID, u.provider(), u.provider())
}

// putConnectTool offers ConnectTool while the server's tools are unknown.
func (u *userServer) putConnectTool() {
	_ = u.s.m.reg.Put(tools.Tool{Name: u.s.cfg.ID + Sep + ConnectTool,
		Description: fmt.Sprintf("The %s tools act with the user's own %s account. Call this to learn how the user connects it.", u.s.cfg.ID, u.provider()),
		Run: func(ctx context.Context, call tools.Call) (string, error) {
			if _, err := u.token(ctx, call.Origin.User); err != nil {
				return "", err
			}
			return fmt.Sprintf("The user's %s account is connected; ask again and the %s tools will be there.", u.provider(), u.s.cfg.ID), nil
		}})
}

// catalogue takes the tool list a person's connection read: it is the
// server's list for everyone.
func (u *userServer) catalogue(list []*mcp.Tool) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	if err := u.s.registerLocked(list); err != nil {
		u.s.m.log.Warn("register an MCP server's tools", "server", u.s.cfg.ID, "error", err)
		return
	}
	u.s.m.reg.Remove(u.s.cfg.ID + Sep + ConnectTool)
}

// expand is the server's tools for a turn of user: it starts their
// connection, which reads the tools, when they have a token.
func (u *userServer) expand(ctx context.Context, user, only string) []string {
	if tok, err := u.token(ctx, user); err == nil {
		if _, err := u.conn(ctx, user, tok); err != nil {
			u.s.m.log.WarnContext(ctx, "a person's MCP server connection is unavailable", "server", u.s.cfg.ID, "user", user, "error", scrub(err.Error(), tok))
		}
	}
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	if u.s.tools == nil {
		return []string{u.s.cfg.ID + Sep + ConnectTool}
	}
	var out []string
	for _, t := range u.s.tools {
		if only == "" || t.Name == only {
			out = append(out, u.s.cfg.ID+Sep+t.Name)
		}
	}
	return out
}

// token is user's token for the server's provider.
func (u *userServer) token(ctx context.Context, user string) (string, error) {
	if user == "" {
		return "", fmt.Errorf("the %s tools act with each person's own %s account, and no person is behind this run", u.s.cfg.ID, u.provider())
	}
	tokens := u.s.m.tokenFunc()
	if tokens == nil {
		return "", u.notConnected()
	}
	tok, err := tokens(ctx, user, u.provider())
	switch {
	case errors.Is(err, ErrNotConnected):
		return "", u.notConnected()
	case err != nil:
		return "", fmt.Errorf("your %s connection can't be read: %w", u.provider(), err)
	case tok == "":
		return "", u.notConnected()
	}
	u.s.m.Scrubber().Add(tok, u.s.cfg.UserToken.Value(tok))
	return tok, nil
}

// call runs a tool on user's own connection.
func (u *userServer) call(ctx context.Context, user, name string, args json.RawMessage) (string, error) {
	tok, err := u.token(ctx, user)
	if err != nil {
		return "", err
	}
	srv, err := u.conn(ctx, user, tok)
	if err != nil {
		return "", errors.New(scrub(err.Error(), tok))
	}
	out, err := srv.call(ctx, name, args)
	if err != nil {
		return "", errors.New(scrub(err.Error(), tok))
	}
	return scrub(out, tok), nil
}

// scrub hides the token in text a server sent back.
func scrub(text, token string) string {
	if token == "" {
		return text
	}
	return strings.ReplaceAll(text, token, config.Redacted)
}

// conn is user's connection, started (or started again, for a new token)
// as needed.
func (u *userServer) conn(ctx context.Context, user, token string) (*server, error) {
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	var stale []*server
	u.mu.Lock()
	c, ok := u.conns[user]
	if ok && c.sum != sum {
		stale, ok = append(stale, c.srv), false
		delete(u.conns, user)
	}
	if !ok {
		c = &userConn{srv: &server{m: u.s.m, cfg: u.userConfig(token), state: StateIdle, owner: u}, sum: sum}
		u.conns[user] = c
	}
	c.used = now
	for other, oc := range u.conns {
		if other != user && now.Sub(oc.used) > userIdle {
			stale = append(stale, oc.srv)
			delete(u.conns, other)
		}
	}
	for len(u.conns) > maxUserConns {
		oldest := ""
		for other, oc := range u.conns {
			if other != user && (oldest == "" || oc.used.Before(u.conns[oldest].used)) {
				oldest = other
			}
		}
		stale = append(stale, u.conns[oldest].srv)
		delete(u.conns, oldest)
	}
	u.mu.Unlock()
	for _, s := range stale {
		s.close()
	}
	if err := c.srv.ensure(ctx); err != nil {
		return nil, err
	}
	return c.srv, nil
}

// userConfig is the server's config for one person: their token in the
// environment variable or header user_token names, in place of any the
// config or parley's own environment gives.
func (u *userServer) userConfig(token string) config.MCPServer {
	c := u.s.cfg
	ut := c.UserToken
	value := ut.Value(token)
	if ut.Env != "" {
		c.Env = slices.DeleteFunc(slices.Clone(c.Env), func(e string) bool { return strings.HasPrefix(e, ut.Env+"=") })
		c.Env = append(c.Env, ut.Env+"="+value)
	}
	if ut.Header != "" {
		c.Headers = slices.DeleteFunc(slices.Clone(c.Headers), func(h string) bool {
			name, _, _ := strings.Cut(h, ":")
			return strings.EqualFold(strings.TrimSpace(name), ut.Header)
		})
		c.Headers = append(c.Headers, ut.Header+": "+value)
	}
	c.UserToken = config.UserToken{}
	return c
}

// status is the server as parley mcp ls shows it: its catalogue, and how
// many people's connections are open.
func (u *userServer) status() Status {
	u.mu.Lock()
	n := len(u.conns)
	u.mu.Unlock()
	st := Status{ID: u.s.cfg.ID, State: fmt.Sprintf("per person (%s token; %d open)", u.provider(), n), Tools: []string{}}
	u.s.mu.Lock()
	for _, t := range u.s.tools {
		st.Tools = append(st.Tools, t.Name)
	}
	u.s.mu.Unlock()
	return st
}

// close closes every person's connection.
func (u *userServer) close() {
	u.mu.Lock()
	conns := u.conns
	u.conns = map[string]*userConn{}
	u.mu.Unlock()
	for _, c := range conns {
		c.srv.close()
	}
}
