package mcpserve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// noStore is a sessions store with no sessions.
type noStore struct{}

func (noStore) List(context.Context, sessions.ListOptions) (sessions.Page, error) {
	return sessions.Page{}, nil
}

func (noStore) Session(_ context.Context, id sessions.ID) (sessions.Session, error) {
	return sessions.Session{}, sessions.ErrNotFound
}

func (noStore) Messages(context.Context, sessions.ID, sessions.MessagesOptions) ([]sessions.Message, error) {
	return nil, nil
}

// fakeGateway takes messages and answers them on the bus as told.
type fakeGateway struct {
	bus    *events.Bus
	answer func(in adapters.Inbound) // publishes the turn's events; nil: nothing ever answers
	err    error                     // Submit's error

	mu   sync.Mutex
	took []adapters.Inbound
}

func (g *fakeGateway) submit(_ context.Context, in adapters.Inbound) error {
	if g.err != nil {
		return g.err
	}
	g.mu.Lock()
	g.took = append(g.took, in)
	g.mu.Unlock()
	if g.answer != nil {
		go g.answer(in)
	}
	return nil
}

func (g *fakeGateway) publish(session string, data any) {
	typ := agent.EventTurnFinished
	switch data.(type) {
	case agent.TurnStarted:
		typ = agent.EventTurnStarted
	case agent.TurnJoined:
		typ = agent.EventTurnJoined
	}
	g.bus.Publish(events.Event{Type: typ, SessionID: session, At: time.Now(), Data: data})
}

// connect serves New(opts) to an SDK client in memory.
func connect(t *testing.T, opts Options, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// send_message hands the gateway a message of the channel mcp in the
// session mcp:<name>, then waits for the turn that answers it, ignoring
// other turns': answered alone, together with others, failed or stopped;
// a message the gateway refuses is an error result saying why.
func TestMCPSendMessageWaitsForItsTurn(t *testing.T) {
	reply := &sessions.Message{Role: sessions.RoleAssistant, Content: "the answer"}
	for _, tc := range []struct {
		name    string
		finish  func(id string) agent.TurnFinished
		err     error
		wantErr bool
		want    string
	}{
		{"answered", func(id string) agent.TurnFinished { return agent.TurnFinished{RunIDs: []string{id}, Reply: reply} }, nil, false, "the answer"},
		{"answered together", func(id string) agent.TurnFinished {
			return agent.TurnFinished{RunIDs: []string{"an-earlier-one", id}, Reply: reply}
		}, nil, false, "the answer"},
		{"no reply", func(id string) agent.TurnFinished { return agent.TurnFinished{RunIDs: []string{id}} }, nil, false, "without a reply"},
		{"failed", func(id string) agent.TurnFinished {
			return agent.TurnFinished{RunIDs: []string{id}, Error: "the model is down"}
		}, nil, true, "the turn failed: the model is down (session mcp:team, id s1)"},
		{"stopped", func(id string) agent.TurnFinished { return agent.TurnFinished{RunIDs: []string{id}, Aborted: true} }, nil, true, "stopped before it finished"},
		{"queue full", nil, gateway.ErrQueueFull, true, "too many messages waiting"},
		{"too long", nil, errors.Join(adapters.ErrInvalidInbound, errors.New("text is 2000000 bytes")), true, "can't be sent"},
		{"shutting down", nil, gateway.ErrClosed, true, "shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGateway{bus: events.New(), err: tc.err}
			g.answer = func(in adapters.Inbound) {
				g.publish("s0", agent.TurnFinished{RunIDs: []string{"someone-else"}, Reply: &sessions.Message{Content: "not yours"}})
				g.publish("s1", agent.TurnStarted{RunIDs: []string{in.MessageID}})
				g.publish("s1", tc.finish(in.MessageID))
			}
			cs := connect(t, Options{Submit: g.submit, Bus: g.bus, Sessions: noStore{}, Agents: func() []string { return []string{"default", "b"} }}, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_message",
				Arguments: map[string]any{"text": "a question", "agent": "b", "session": "mcp:team"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tc.wantErr || !strings.Contains(textOf(res), tc.want) {
				t.Fatalf("error %v %q, want error %v saying %q", res.IsError, textOf(res), tc.wantErr, tc.want)
			}
			if tc.err != nil {
				return
			}
			in := g.took[0]
			if in.Adapter != AdapterID || in.Surface != "mcp" || in.ChatID != "team" || in.UserID != "mcp" || in.AgentID != "b" || in.Text != "a question" {
				t.Fatalf("the gateway took %+v", in)
			}
		})
	}
}

// sessionStore is a sessions store holding one session's messages.
type sessionStore struct {
	noStore
	id   sessions.ID
	msgs []sessions.Message
}

func (s sessionStore) Messages(_ context.Context, id sessions.ID, _ sessions.MessagesOptions) ([]sessions.Message, error) {
	if id != s.id {
		return nil, sessions.ErrNotFound
	}
	return s.msgs, nil
}

// When the bus here never says (the turn ran on the replica holding the
// session, or the message failed before its turn began), send_message
// finds the outcome in the gateway's record of its message: the first
// reply after its user message in the session, or why it failed.
func TestMCPSendMessageFindsTheRecordedOutcome(t *testing.T) {
	msgs := []sessions.Message{
		{ID: "earlier", Role: sessions.RoleUser, Content: "before"},
		{ID: "answer-to-earlier", Role: sessions.RoleAssistant, Content: "not this one"},
		{ID: "in-1", Role: sessions.RoleUser, Content: "a question"},
		{ID: "call", Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "t"}}},
		{ID: "result", Role: sessions.RoleTool, ToolCallID: "c1", Content: "42"},
		{ID: "reply", Role: sessions.RoleAssistant, Content: "the recorded answer"},
	}
	for _, tc := range []struct {
		name    string
		records []gateway.InboundRecord // read in turn; the last stays
		wantErr bool
		want    string
	}{
		{"answered elsewhere", []gateway.InboundRecord{
			{ID: "in-1", Status: gateway.InboundAccepted},
			{ID: "in-1", Status: gateway.InboundAccepted, SessionID: "s1"},
			{ID: "in-1", Status: gateway.InboundDone, SessionID: "s1"},
		}, false, "the recorded answer"},
		{"failed before its turn", []gateway.InboundRecord{
			{ID: "in-1", Status: gateway.InboundFailed, Error: "ref r1: open the session: the database is gone"},
		}, true, "the turn failed: ref r1: open the session: the database is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGateway{bus: events.New()}
			var mu sync.Mutex
			reads := 0
			record := func(_ context.Context, in adapters.Inbound) (gateway.InboundRecord, error) {
				mu.Lock()
				defer mu.Unlock()
				r := tc.records[min(reads, len(tc.records)-1)]
				reads++
				return r, nil
			}
			cs := connect(t, Options{Submit: g.submit, Bus: g.bus, Sessions: sessionStore{id: "s1", msgs: msgs}, Record: record,
				Agents: func() []string { return []string{"default"} }, pollEvery: 20 * time.Millisecond}, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"text": "a question"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tc.wantErr || !strings.Contains(textOf(res), tc.want) {
				t.Fatalf("error %v %q, want error %v saying %q", res.IsError, textOf(res), tc.wantErr, tc.want)
			}
			if !tc.wantErr {
				if sc, _ := res.StructuredContent.(map[string]any); sc["session_id"] != "s1" {
					t.Fatalf("structured content %v, want session s1", res.StructuredContent)
				}
			}
		})
	}
}

// A turn that runs past the timeout is an error result saying it goes on
// and where to read its reply; meanwhile a client that asked for progress
// hears that it still runs.
func TestMCPSendMessageTimesOut(t *testing.T) {
	g := &fakeGateway{bus: events.New()}
	g.answer = func(in adapters.Inbound) { g.publish("s7", agent.TurnStarted{RunIDs: []string{in.MessageID}}) }
	progress := make(chan string, 100)
	cs := connect(t, Options{Submit: g.submit, Bus: g.bus, Sessions: noStore{}, Agents: func() []string { return []string{"default"} },
		Timeout: 500 * time.Millisecond, progressEvery: 50 * time.Millisecond},
		&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		}})
	params := &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"text": "a long one"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(textOf(res), "no reply within 500ms; the turn goes on: read_session on session s7") {
		t.Fatalf("error %v %q", res.IsError, textOf(res))
	}
	select {
	case m := <-progress:
		if m != "the agent is still answering" {
			t.Fatalf("progress %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress while waiting")
	}
}

// In front of a daemon's /mcp, a Forwarder offers its tools and passes
// each call, and its progress, on; once the daemon is gone a call is an
// error result saying so.
func TestMCPForwarder(t *testing.T) {
	g := &fakeGateway{bus: events.New()}
	release := make(chan struct{})
	g.answer = func(in adapters.Inbound) {
		<-release
		g.publish("s1", agent.TurnFinished{RunIDs: []string{in.MessageID}, Reply: &sessions.Message{Content: "forwarded: " + in.Text}})
	}
	srv := New(Options{Submit: g.submit, Bus: g.bus, Sessions: noStore{}, Agents: func() []string { return []string{"default"} },
		progressEvery: 20 * time.Millisecond})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer remote.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Dial(ctx, remote.URL, "wrong", ""); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a wrong token: %v, want the server's refusal", err)
	}
	f, err := Dial(ctx, remote.URL, "s3cret", "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	local, err := f.Server(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	progress := make(chan struct{}, 100)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := local.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} }}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools %+v %v", tools, err)
	}
	go func() {
		<-progress // the remote's progress reached the local client: let the turn finish
		close(release)
	}()
	params := &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"text": "hi"}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || textOf(res) != "forwarded: hi" {
		t.Fatalf("send_message: %+v %v", res, err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_session", Arguments: map[string]any{"session_id": "x"}}); err != nil ||
		!res.IsError || !strings.Contains(textOf(res), "not a session id") {
		t.Fatalf("bad input: %+v %v", res, err)
	}
	remote.Close()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_sessions", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "didn't answer") {
		t.Fatalf("with the daemon gone: %+v %v", res, err)
	}
}
