package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/telemetry"
	"github.com/parleyd/parley/tools"
)

// errBackoff is what ensure's error is, while a server waits to be
// started again.
var errBackoff = errors.New("in backoff")

// backoffError says a server is down and when it is tried again.
type backoffError struct {
	msg   string
	after time.Duration // until the server is tried again
}

func (e backoffError) Error() string             { return e.msg }
func (e backoffError) RetryAfter() time.Duration { return e.after }
func (e backoffError) Is(target error) bool      { return target == errBackoff }

// refreshSpacing is the least time between two reads of a server's tool
// list: a server announcing changes without end gets one read at a time,
// this far apart.
const refreshSpacing = 500 * time.Millisecond

// ensure connects the server if it isn't, unless it failed lately: then
// the error wraps errBackoff and says when it is tried again.
func (s *server) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		return nil
	}
	if now := time.Now(); now.Before(s.retryAt) {
		return backoffError{s.downLocked(now), s.retryAt.Sub(now)}
	}
	s.state = StateStarting
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectTimeout)
	defer cancel()
	err := s.connectLocked(cctx)
	if err != nil {
		s.failedLocked(err)
		return fmt.Errorf("MCP server %s: %s", s.cfg.ID, s.lastErr)
	}
	s.state, s.lastErr, s.failures, s.retryAt = StateReady, "", 0, time.Time{}
	return nil
}

// codeRejected is the JSON-RPC code the SDK gives a call its HTTP server
// answered with 429 or a 5xx.
const codeRejected = -32005

// retryAfter is a failure of a server that is tried again after a while.
type retryAfter struct {
	error
	after time.Duration
}

func (e retryAfter) Unwrap() error             { return e.error }
func (e retryAfter) RetryAfter() time.Duration { return e.after }

// downLocked is what a call of a server in backoff answers.
func (s *server) downLocked(now time.Time) string {
	return fmt.Sprintf("MCP server %s is down, trying again in %s (%s)", s.cfg.ID, max(s.retryAt.Sub(now).Round(time.Second), time.Second), s.lastErr)
}

// failedLocked marks the server down and when to try again.
func (s *server) failedLocked(err error) {
	s.state, s.lastErr = StateDown, s.scrub(err.Error())
	s.failures++
	wait := minBackoff << min(s.failures-1, 6)
	s.retryAt = time.Now().Add(min(wait, maxBackoff))
	s.dropSessionLocked()
}

// dropSessionLocked forgets the connection and closes it, in the
// background: closing a stdio server waits for its process, each step
// bounded.
func (s *server) dropSessionLocked() {
	if s.session == nil {
		return
	}
	session := s.session
	s.session = nil
	if s.stopConn != nil {
		s.stopConn()
		s.stopConn = nil
	}
	go func() { _ = session.Close() }()
}

func (s *server) connectLocked(ctx context.Context) error {
	connCtx, stop := context.WithCancel(context.Background())
	client := mcp.NewClient(&mcp.Implementation{Name: "parley", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.listChanged(connCtx) },
	})
	capBytes := s.cfg.MaxMessageMB << 20
	var transport mcp.Transport
	if s.cfg.URL != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, MaxEventSize: capBytes,
			// Each call carries its tool call's span as traceparent.
			HTTPClient: &http.Client{Transport: telemetry.Transport(headerTransport{headers: s.cfg.Headers,
				base: capTransport{max: capBytes, base: http.DefaultTransport}})}}
	} else {
		transport = stdioTransport{cfg: s.cfg, lookup: lookupEnv}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		stop()
		return fmt.Errorf("connect: %w", err)
	}
	list, err := listTools(ctx, session)
	if err != nil {
		stop()
		go func() { _ = session.Close() }()
		return err
	}
	s.session, s.stopConn = session, stop
	if err := s.applyLocked(list); err != nil {
		s.dropSessionLocked()
		return err
	}
	go func() {
		// A stdio server that exits, or a lost HTTP session, ends Wait:
		// the server is down until a turn needs it again.
		_ = session.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.session == session {
			s.dropSessionLocked()
			s.state, s.lastErr = StateDown, "the server stopped"
			s.m.log.Warn("MCP server stopped; it is started again when a turn needs it", "server", s.cfg.ID)
		}
	}()
	return nil
}

// listTools reads a server's whole tool list, up to maxTools.
func listTools(ctx context.Context, session *mcp.ClientSession) ([]*mcp.Tool, error) {
	var list []*mcp.Tool
	var cursor string
	for {
		res, err := session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		list = append(list, res.Tools...)
		if len(list) > maxTools {
			return nil, fmt.Errorf("list tools: the server lists more than %d tools", maxTools)
		}
		if res.NextCursor == "" {
			return list, nil
		}
		cursor = res.NextCursor
	}
}

// applyLocked takes a tool list the server sent: the tools parley can
// name go to the registry (or, for one person's connection, to the
// server's catalogue); the others are logged and left out.
func (s *server) applyLocked(list []*mcp.Tool) error {
	list = s.validTools(list)
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

// listChanged answers notifications/tools/list_changed: one read of the
// list at a time, and any number of notices during it make one more.
func (s *server) listChanged(ctx context.Context) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if s.refreshing {
		s.refreshAgain = true
		return
	}
	s.refreshing = true
	go func() {
		for {
			s.refresh(ctx)
			s.refreshMu.Lock()
			if !s.refreshAgain || ctx.Err() != nil {
				s.refreshing, s.refreshAgain = false, false
				s.refreshMu.Unlock()
				return
			}
			s.refreshAgain = false
			s.refreshMu.Unlock()
			t := time.NewTimer(refreshSpacing)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}()
}

// refresh reads the tool list again, without holding the server while it
// waits for the answer.
func (s *server) refresh(ctx context.Context) {
	s.mu.Lock()
	session := s.session
	s.mu.Unlock()
	if session == nil || ctx.Err() != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	list, err := listTools(cctx, session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != session {
		return
	}
	if err == nil {
		err = s.applyLocked(list)
	}
	if err != nil {
		s.m.log.Warn("refresh an MCP server's tools", "server", s.cfg.ID, "error", s.scrub(err.Error()))
	}
}

// tool is t as a parley tool; withSchema gives the registry its schema.
func (s *server) tool(t *mcp.Tool, withSchema bool) tools.Tool {
	name := t.Name
	out := tools.Tool{Name: s.cfg.ID + Sep + name, Description: s.scrub(cutDescription(t.Description)), Server: s.cfg.ID,
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
	if r := s.cfg.For(name); r.Attempts > 1 {
		out.Retry = &tools.Retry{Attempts: r.Attempts, Backoff: r.Backoff.Std(), On: r.On}
	}
	return out
}

// call runs one tool call with the server's timeout. A JSON-RPC error the
// server answers is the call's failure, not the server's: it stays up.
func (s *server) call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if err := s.ensure(ctx); err != nil {
		return "", tools.ClassError(tools.ClassUnavailable, err)
	}
	s.mu.Lock()
	session := s.session
	s.mu.Unlock()
	if session == nil {
		return "", tools.ClassError(tools.ClassUnavailable, fmt.Errorf("MCP server %s is down; try again later", s.cfg.ID))
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
	defer cancel()
	res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
	var rpcErr *jsonrpc.Error
	switch {
	case err != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		return "", tools.ClassError(tools.ClassTimeout, fmt.Errorf("%s%s%s took longer than %s and was stopped", s.cfg.ID, Sep, name, s.cfg.Timeout))
	case err != nil && errors.As(err, &rpcErr) && rpcErr.Code == codeRejected:
		// The HTTP server answered 429 or 5xx: it is there, and may take
		// the call later (the connection stays).
		class, said := tools.ClassUnavailable, err.Error()
		if i := strings.LastIndex(said, ": "); i >= 0 {
			said = said[i+2:]
		}
		if said == http.StatusText(http.StatusTooManyRequests) {
			class = tools.ClassRateLimited
		}
		return "", tools.ClassError(class, fmt.Errorf("%s%s%s failed: the server answered %q; try again later", s.cfg.ID, Sep, name, s.scrub(said)))
	case err != nil && errors.As(err, &rpcErr) && !errors.Is(err, mcp.ErrConnectionClosed):
		return "", fmt.Errorf("%s%s%s failed: %s", s.cfg.ID, Sep, name, s.result(rpcErr.Message, len(rpcErr.Message)))
	case err != nil:
		s.mu.Lock()
		if s.session == session {
			s.failedLocked(err)
		}
		lastErr, after := s.lastErr, time.Until(s.retryAt)
		s.mu.Unlock()
		return "", tools.ClassError(tools.ClassUnavailable, retryAfter{fmt.Errorf("MCP server %s failed: %s; it is started again on a later call", s.cfg.ID, lastErr), after})
	}
	text := s.result(resultText(res, s.maxResult()+resultSlack))
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// maxResult is the most of a result the model is given, in bytes.
func (s *server) maxResult() int { return s.cfg.MaxResultKB << 10 }

// resultSlack is how much more than the cap a result keeps until it is
// scrubbed: a secret straddling the cut is whole when it is hidden.
const resultSlack = 4 << 10

// result is text a server sent (total bytes long, text being its start),
// scrubbed of secrets, then cut to the cap with a note when longer.
func (s *server) result(text string, total int) string {
	return truncate(s.scrub(text), total, s.maxResult())
}

// resultText is the start of a result's text, at most limit bytes, and
// the whole's length.
func resultText(res *mcp.CallToolResult, limit int) (string, int) {
	b := &limitedBuilder{max: limit}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		default:
			if raw, err := json.Marshal(c); err == nil {
				b.WriteString(string(raw))
			}
		}
	}
	if b.total == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			b.WriteString(string(raw))
		}
	}
	return b.b.String(), b.total
}

func (s *server) close() {
	if s.users != nil {
		s.users.close()
	}
	s.mu.Lock()
	session := s.session
	s.session = nil
	if s.stopConn != nil {
		s.stopConn()
		s.stopConn = nil
	}
	s.state = StateIdle
	s.mu.Unlock()
	if session != nil {
		_ = session.Close()
	}
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
