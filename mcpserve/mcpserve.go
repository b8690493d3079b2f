// Package mcpserve is parley as a Model Context Protocol server, on the
// official Go SDK. Its tools talk to an agent in the session mcp:<name>
// (mcp:default unless the client names another) and list and read
// sessions. A message goes through the gateway like any channel's (stored
// before it runs, in order, on the dashboard); send_message waits for the
// turn's reply on the event bus, and in the gateway's record of the
// message for a turn the bus doesn't announce. `parley mcp serve` serves
// it over stdio, the daemon at /mcp over streamable HTTP.
package mcpserve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/sessions"
)

const (
	// AdapterID is the channel send_message's messages come in on.
	AdapterID adapters.ID = "mcp"
	// DefaultSession names the conversation send_message talks in when
	// the client names none: the session mcp:default.
	DefaultSession = "default"
	// DefaultTimeout is how long send_message waits for a turn's reply.
	DefaultTimeout = 5 * time.Minute
	// displayName is the sender's name in the session.
	displayName = "MCP client"
	// progressEvery is how often a client that asked for progress hears
	// that the turn still runs.
	progressEvery = 10 * time.Second
	// pollEvery is how often a waiting send_message reads the gateway's
	// record of its message.
	pollEvery = 2 * time.Second
)

// Store is what the tools read of the sessions store.
type Store interface {
	List(ctx context.Context, opts sessions.ListOptions) (sessions.Page, error)
	Session(ctx context.Context, id sessions.ID) (sessions.Session, error)
	Messages(ctx context.Context, id sessions.ID, opts sessions.MessagesOptions) ([]sessions.Message, error)
}

// Options are what the server acts on.
type Options struct {
	// Version is the build's, for the server's implementation info.
	Version string
	// Submit hands a message to the gateway (gateway.Submit): nil once it
	// is stored and queued for its turn.
	Submit func(ctx context.Context, in adapters.Inbound) error
	// Bus carries the agent's turn events.
	Bus      *events.Bus
	Sessions Store
	// Agents are the configured agents' ids, the default first; read at
	// each call, so a reload shows.
	Agents func() []string
	// Record reads the gateway's record of a message send_message
	// submitted (gateway.Store.InboundOf). While a call waits it is read
	// every few seconds, so a reply the bus here never announces is found
	// in the session: one written by the replica that holds the session,
	// or the end of a message that failed before its turn began. nil: the
	// bus alone.
	Record func(ctx context.Context, in adapters.Inbound) (gateway.InboundRecord, error)
	// Timeout bounds send_message's wait for a reply; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	Log     *slog.Logger

	// progressEvery is how often a waiting client hears progress, and
	// pollEvery how often Record is read; 0 means the package's (tests
	// shorten them).
	progressEvery, pollEvery time.Duration
}

// server is the tools' side of Options.
type server struct{ opts Options }

// New is parley's MCP server with its tools: send_message, list_sessions
// and read_session. A call with bad input gets an error result that says
// what to change, never a protocol error.
func New(opts Options) *mcp.Server {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.progressEvery <= 0 {
		opts.progressEvery = progressEvery
	}
	if opts.pollEvery <= 0 {
		opts.pollEvery = pollEvery
	}
	s := &server{opts: opts}
	srv := mcp.NewServer(&mcp.Implementation{Name: "parley", Title: "parley", Version: cmp.Or(opts.Version, "dev")}, &mcp.ServerOptions{
		Instructions: "parley is a chat gateway. send_message talks to one of its agents in the session mcp:default " +
			"(or mcp:<session>), which keeps the conversation; list_sessions and read_session read every conversation parley holds.",
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "send_message", Title: "Send a message to an agent",
		Description: "Sends text to a parley agent and returns its reply. The conversation is kept in the session mcp:<session> " +
			"(mcp:default by default), so later messages follow on from earlier ones. Waits for the reply up to " + opts.Timeout.String() + "."},
		s.send)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_sessions", Title: "List sessions",
		Description: "Lists parley's sessions (conversations on every channel), newest first, with their ids for read_session.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		s.list)
	mcp.AddTool(srv, &mcp.Tool{Name: "read_session", Title: "Read a session",
		Description: "Reads one session and its latest messages, by the id list_sessions or send_message gave.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		s.read)
	return srv
}

// SendInput is send_message's arguments.
type SendInput struct {
	Text    string `json:"text" jsonschema:"the message to the agent"`
	Agent   string `json:"agent,omitempty" jsonschema:"the id of the agent to talk to; default: parley's first agent"`
	Session string `json:"session,omitempty" jsonschema:"the conversation's name: the message goes to the session mcp:<session>; default: default"`
}

// SendOutput is send_message's structured result.
type SendOutput struct {
	Reply      string `json:"reply"`
	SessionID  string `json:"session_id"`
	SessionKey string `json:"session_key"`
	Agent      string `json:"agent"`
}

// sessionName is the readable rule for a session name.
var sessionName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkText refuses what no engine stores the same: text that is not
// UTF-8, or that holds a NUL byte (PostgreSQL rejects both, SQLite keeps
// them), so both answer bad input alike.
func checkText(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		name, v := fields[i], fields[i+1]
		if !utf8.ValidString(v) {
			return fmt.Errorf("%s is not valid UTF-8; send UTF-8 text", name)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%s holds a NUL byte; send text without NUL bytes", name)
		}
	}
	return nil
}

func (s *server) send(ctx context.Context, req *mcp.CallToolRequest, in SendInput) (*mcp.CallToolResult, SendOutput, error) {
	if err := checkText("text", in.Text, "agent", in.Agent, "session", in.Session); err != nil {
		return nil, SendOutput{}, err
	}
	if strings.TrimSpace(in.Text) == "" {
		return nil, SendOutput{}, errors.New("text is empty; give the message to send to the agent")
	}
	if c, ok := commands.Parse(in.Text); ok {
		return nil, SendOutput{}, fmt.Errorf("/%s is a chat command, which send_message doesn't run; "+
			"to start a fresh conversation, name another session (the session argument)", c.Name)
	}
	agentID, err := s.agent(in.Agent)
	if err != nil {
		return nil, SendOutput{}, err
	}
	name := strings.TrimPrefix(strings.TrimSpace(in.Session), sessions.SurfaceMCP+":")
	if name == "" {
		name = DefaultSession
	}
	if !sessionName.MatchString(name) {
		return nil, SendOutput{}, fmt.Errorf("session %q is not a session name; use 1-64 letters, digits, \".\", \"_\" and \"-\", "+
			"starting with a letter or digit (or leave it out for %q)", in.Session, DefaultSession)
	}
	key := sessions.MCPKey(name, agentID)
	id := uuid.Must(uuid.NewV7()).String()
	// Subscribed before the message is submitted, so its turn's events
	// can't be missed.
	sub := s.opts.Bus.Subscribe(agent.EventTurnStarted, agent.EventTurnJoined, agent.EventTurnFinished)
	defer sub.Close()
	msg := adapters.Inbound{Adapter: AdapterID, Surface: key.Surface, ChatID: key.SurfaceID, UserID: key.UserID,
		DisplayName: displayName, AgentID: agentID, MessageID: id, Text: in.Text, Time: time.Now()}
	if err := s.opts.Submit(ctx, msg); err != nil {
		switch {
		case errors.Is(err, adapters.ErrInvalidInbound):
			return nil, SendOutput{}, fmt.Errorf("the message can't be sent: %v", err)
		case errors.Is(err, gateway.ErrQueueFull):
			return nil, SendOutput{}, fmt.Errorf("the session %s has too many messages waiting for their turn; send again once the agent has answered them", key)
		case errors.Is(err, gateway.ErrClosed):
			return nil, SendOutput{}, errors.New("parley is shutting down and takes no more messages; send again once it runs")
		}
		s.opts.Log.WarnContext(ctx, "mcp message not taken", "session_key", key, "error", err)
		return nil, SendOutput{}, fmt.Errorf("parley couldn't take the message (%v); send it again", err)
	}
	out := SendOutput{SessionKey: key.String(), Agent: agentID}
	fin, err := s.wait(ctx, req, sub, msg, &out.SessionID)
	if err != nil {
		return nil, SendOutput{}, err
	}
	switch {
	case fin.Error != "":
		return nil, SendOutput{}, fmt.Errorf("the turn failed: %s (session %s, id %s)", fin.Error, key, out.SessionID)
	case fin.Aborted:
		return nil, SendOutput{}, fmt.Errorf("the turn was stopped before it finished (session %s, id %s); send the message again", key, out.SessionID)
	}
	text := "(the agent finished without a reply)"
	if fin.Reply != nil {
		out.Reply, text = fin.Reply.Content, fin.Reply.Content
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// agent is the agent id asked for, or the default one.
func (s *server) agent(asked string) (string, error) {
	ids := s.opts.Agents()
	asked = strings.TrimSpace(asked)
	if asked == "" && len(ids) > 0 {
		return ids[0], nil
	}
	if slices.Contains(ids, asked) {
		return asked, nil
	}
	if len(ids) == 0 {
		return "", errors.New("parley has no agent configured; add one under agents in its config")
	}
	return "", fmt.Errorf("no agent is called %q; the agents are %s (or leave agent out for %s)", asked, strings.Join(ids, ", "), ids[0])
}

// errNoReply is the cause of a wait that ran out of time.
var errNoReply = errors.New("no reply in time")

// wait waits for the turn that answers the message msg: its turn.finished
// event names msg's id among its run ids (alone, or answered together with
// others, or joined while it ran), or, between events, the gateway's
// record says its turn is over (see Options.Record). *sessionID is set
// from the first event that names it.
func (s *server) wait(ctx context.Context, req *mcp.CallToolRequest, sub *events.Subscription, msg adapters.Inbound, sessionID *string) (agent.TurnFinished, error) {
	id := msg.MessageID
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.Timeout, errNoReply)
	defer cancel()
	stop := s.keepNotifying(ctx, req)
	defer stop()
	for {
		e, err := s.next(ctx, sub)
		if errors.Is(err, errPoll) {
			if fin, ok := s.recorded(ctx, msg, sessionID); ok {
				return fin, nil
			}
			continue
		}
		if err != nil {
			if context.Cause(ctx) == errNoReply {
				where := "its session"
				if *sessionID != "" {
					where = "session " + *sessionID
				}
				return agent.TurnFinished{}, fmt.Errorf("no reply within %s; the turn goes on: read_session on %s shows its reply once it is written", s.opts.Timeout, where)
			}
			return agent.TurnFinished{}, err
		}
		var ids []string
		switch d := e.Data.(type) {
		case agent.TurnStarted:
			ids = d.RunIDs
		case agent.TurnJoined:
			ids = d.RunIDs
		case agent.TurnFinished:
			if slices.Contains(d.RunIDs, id) {
				*sessionID = e.SessionID
				return d, nil
			}
		case *agent.TurnFinished:
			if d != nil && slices.Contains(d.RunIDs, id) {
				*sessionID = e.SessionID
				return *d, nil
			}
		}
		if slices.Contains(ids, id) {
			*sessionID = e.SessionID
		}
	}
}

// errPoll ends a wait for the next event when it is time to read the
// gateway's record.
var errPoll = errors.New("time to read the record")

// next is sub's next event, or errPoll once pollEvery has passed without
// one (with Record set).
func (s *server) next(ctx context.Context, sub *events.Subscription) (events.Event, error) {
	if s.opts.Record == nil {
		return sub.Next(ctx)
	}
	pctx, cancel := context.WithTimeoutCause(ctx, s.opts.pollEvery, errPoll)
	defer cancel()
	e, err := sub.Next(pctx)
	if err != nil && ctx.Err() == nil && context.Cause(pctx) == errPoll {
		return e, errPoll
	}
	return e, err
}

// recorded is the outcome of msg's turn as the gateway recorded it and
// the session holds it, when the turn is over: the session's first reply
// after msg's user message (which has the gateway's id of msg). A read
// that fails is tried again at the next poll.
func (s *server) recorded(ctx context.Context, msg adapters.Inbound, sessionID *string) (agent.TurnFinished, bool) {
	r, err := s.opts.Record(ctx, msg)
	if err != nil {
		if !errors.Is(err, gateway.ErrNotFound) {
			s.opts.Log.DebugContext(ctx, "read an mcp message's record", "message_id", msg.MessageID, "error", err)
		}
		return agent.TurnFinished{}, false
	}
	if r.SessionID != "" {
		*sessionID = r.SessionID
	}
	if r.Status == gateway.InboundAccepted {
		return agent.TurnFinished{}, false
	}
	if r.Status != gateway.InboundDone {
		return agent.TurnFinished{Error: cmp.Or(r.Error, "it was not answered")}, true
	}
	if r.SessionID == "" {
		return agent.TurnFinished{}, true
	}
	msgs, err := s.opts.Sessions.Messages(ctx, sessions.ID(r.SessionID), sessions.MessagesOptions{})
	if err != nil {
		s.opts.Log.DebugContext(ctx, "read an mcp message's session", "session_id", r.SessionID, "error", err)
		return agent.TurnFinished{}, false
	}
	asked := slices.IndexFunc(msgs, func(m sessions.Message) bool { return string(m.ID) == r.ID })
	if asked < 0 {
		return agent.TurnFinished{}, true // answered without a turn of its own
	}
	for _, m := range msgs[asked+1:] {
		if agent.IsReply(m) {
			return agent.TurnFinished{Reply: &m}, true
		}
	}
	return agent.TurnFinished{}, true
}

// keepNotifying tells a client that asked for progress (a progress token)
// that the turn still runs, every progressEvery, so a client that resets
// its timeout on progress keeps waiting.
func (s *server) keepNotifying(ctx context.Context, req *mcp.CallToolRequest) (stop func()) {
	if req == nil || req.Session == nil || req.Params == nil {
		return func() {}
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.opts.progressEvery)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
				Message: "the agent is still answering"})
		}
	}()
	return func() { cancel(); <-done }
}
