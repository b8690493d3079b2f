package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

const declaredTools = `[
  {"name": "get_location", "description": "Where the user is.",
   "input_schema": {"type": "object", "properties": {"accuracy": {"enum": ["city", "street"]}}, "required": ["accuracy"]}},
  {"name": "pick_color", "description": "Let the user pick a color.",
   "input_schema": {"type": "object", "properties": {"choices": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}
]`

// clientEnv is the API over a real agent runner whose sessions may declare
// client tools, with the hub's timeouts fired by the test.
type clientEnv struct {
	*env
	hub     *clienttools.Hub
	timeout chan time.Time
}

// locationModel calls get_location once per user message, then answers
// with what the client returned.
func locationModel() *echo.Model {
	return echo.New(echo.WithScript(func(req llm.Request) (llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			return llm.Response{Text: "The tool said: " + last.Content}, nil
		}
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call-" + last.Content, Name: "get_location", Arguments: json.RawMessage(`{"accuracy": "city"}`)}}}, nil
	}))
}

func newClientEnv(t *testing.T, open dbtest.Opener, model llm.Model, withHub bool) *clientEnv {
	t.Helper()
	db := open(t)
	st := sessions.NewStore(db)
	bus := events.New()
	log := api.NewEventLog(nil)
	fire := make(chan time.Time)
	var hub *clienttools.Hub
	if withHub {
		hub = clienttools.New(db, clienttools.Options{Timeout: 90 * time.Second, After: func(time.Duration) <-chan time.Time { return fire }})
	}
	ctx, cancel := context.WithCancel(context.Background())
	ar := &agentRunner{store: st, events: log, ctx: ctx, runner: agent.New(agent.Options{
		Store: st, Bus: bus, DefaultModel: "echo", Tools: tools.NewRegistry(), ClientTools: hub,
		Models: func(string) (llm.Model, error) { return model, nil },
	})}
	feed := log.Feed(bus)
	fed := make(chan error, 1)
	go func() { fed <- feed(ctx) }()
	srv := newAPIServer(t, api.New(api.Options{Store: st, Runner: ar, Events: log, Tokens: []string{token}, DefaultAgent: "main",
		Heartbeat: time.Hour, ClientTools: hub, ToolTaken: func(name string) bool { return name == "memory_write" }}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		ar.wg.Wait()
		if err := <-fed; err != nil {
			t.Errorf("feed: %v", err)
		}
	})
	return &clientEnv{env: &env{srv: srv, store: st, events: log}, hub: hub, timeout: fire}
}

// until reads events up to the first of type typ, returning those read.
func (c *sseClient) until(t *testing.T, typ string) []api.Event {
	t.Helper()
	var out []api.Event
	for {
		e := c.next(t)
		out = append(out, e)
		if e.Type == typ {
			return out
		}
	}
}

func (e *clientEnv) send(t *testing.T, id sessions.ID, content string) {
	t.Helper()
	if r := e.do(t, "POST", "/v1/sessions/"+string(id)+"/messages", `{"content": "`+content+`"}`); r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
}

func TestClientToolRoundTrip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		model := locationModel()
		e := newClientEnv(t, open, model, true)
		s := e.createSession(t, `{"tools": `+declaredTools+`}`)
		var declared api.ClientToolsResponse
		e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/tools", "").decode(t, &declared)
		if len(declared.Tools) != 2 || declared.Tools[0].Name != "get_location" || !declared.Tools[0].Checked || declared.Tools[1].Checked {
			t.Fatalf("declared tools: %+v", declared)
		}
		stream := e.stream(t, s.ID, "", nil)
		e.send(t, s.ID, "1")

		req := stream.until(t, api.TypeToolRequested)
		var asked api.ToolRequestedData
		if err := json.Unmarshal(req[len(req)-1].Data, &asked); err != nil {
			t.Fatal(err)
		}
		if asked.CallID != "call-1" || asked.Name != "get_location" || string(asked.Arguments) != `{"accuracy":"city"}` || asked.ExpiresAt.IsZero() {
			t.Fatalf("tool.requested = %s", req[len(req)-1].Data)
		}
		var st api.Status
		if ev := stream.next(t); ev.Type != api.TypeStatus || json.Unmarshal(ev.Data, &st) != nil ||
			st.State != api.StateWaitingForToolResults || !slices.Equal(st.PendingToolCalls, []string{"call-1"}) {
			t.Fatalf("after tool.requested: %s %s", ev.Type, ev.Data)
		}
		st = api.Status{}
		e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/status", "").decode(t, &st)
		if st.State != api.StateWaitingForToolResults || !slices.Equal(st.PendingToolCalls, []string{"call-1"}) {
			t.Fatalf("status = %+v", st)
		}

		// Only tool results are taken now.
		r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/messages", `{"content": "hello?"}`)
		if r.status != http.StatusConflict || r.errorCode(t) != api.CodeWaitingForToolResults || !strings.Contains(string(r.body), "/tool_results") ||
			!strings.Contains(string(r.body), "call-1") {
			t.Fatalf("a message while waiting: %d %s", r.status, r.body)
		}
		r = e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/tool_results", `{"results": [{"call_id": "call-1", "output": "Berlin"}, {"call_id": "call-9", "output": "?"}]}`)
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), `\"call-9\"`) {
			t.Fatalf("results with an unknown call: %d %s", r.status, r.body)
		}
		for _, body := range []string{`{"results": []}`, `{"results": [{"output": "x"}]}`, `{"results": [{"call_id": "call-1", "output": 5}]}`,
			`{"results": [{"call_id": "call-1"}, {"call_id": "call-1"}]}`} {
			if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/tool_results", body); r.status != http.StatusBadRequest {
				t.Fatalf("results %s: %d %s", body, r.status, r.body)
			}
		}
		r = e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/tool_results", `{"results": [{"call_id": "call-1", "output": "Berlin"}]}`)
		var took api.ToolResultsResponse
		r.decode(t, &took)
		if r.status != http.StatusOK || !slices.Equal(took.Accepted, []string{"call-1"}) || len(took.Pending) != 0 {
			t.Fatalf("results: %d %s", r.status, r.body)
		}

		rest := stream.until(t, api.TypeTurnFinished)
		var types []string
		for _, ev := range rest {
			types = append(types, ev.Type)
		}
		if !slices.Contains(types, api.TypeToolCompleted) || types[0] != api.TypeStatus || !strings.Contains(string(rest[0].Data), `"busy"`) {
			t.Errorf("events after the results: %v (first %s)", types, rest[0].Data)
		}
		var fin api.TurnFinishedData
		if err := json.Unmarshal(rest[len(rest)-1].Data, &fin); err != nil || fin.Error != "" || fin.Steps != 2 {
			t.Fatalf("turn.finished = %s", rest[len(rest)-1].Data)
		}
		msgs, err := e.store.Messages(context.Background(), s.ID, sessions.MessagesOptions{})
		if err != nil || len(msgs) != 4 || msgs[2].ToolCallID != "call-1" || msgs[2].Content != "Berlin" || msgs[3].Content != "The tool said: Berlin" {
			t.Fatalf("messages: %v %+v", err, msgs)
		}
		// The model got both tools, the second with its schema as declared
		// (parley can't check anyOf; the client does).
		tools := model.Requests()[0].Tools
		if len(tools) != 2 || tools[0].Name != "get_location" || !strings.Contains(string(tools[1].Schema), "anyOf") {
			t.Errorf("tools given to the model: %+v", tools)
		}
		if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/tool_results", `{"results": [{"call_id": "call-1", "output": "again"}]}`); r.status != http.StatusConflict ||
			!strings.Contains(string(r.body), "is not waiting for tool results") {
			t.Fatalf("results after the run: %d %s", r.status, r.body)
		}
		if st := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/status", ""); !strings.Contains(string(st.body), `"idle"`) {
			t.Errorf("status after the run: %s", st.body)
		}
	})
}

func TestClientToolErrorTimeoutAndAbort(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newClientEnv(t, open, locationModel(), true)
		s := e.createSession(t, `{"tools": `+declaredTools+`}`)
		stream := e.stream(t, s.ID, "", nil)
		messages := func() []sessions.Message {
			msgs, err := e.store.Messages(context.Background(), s.ID, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return msgs
		}

		// An error result reaches the model, which goes on.
		e.send(t, s.ID, "1")
		stream.until(t, api.TypeToolRequested)
		if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/tool_results", `{"results": [{"call_id": "call-1", "output": "GPS is off", "is_error": true}]}`); r.status != http.StatusOK {
			t.Fatalf("results: %d %s", r.status, r.body)
		}
		stream.until(t, api.TypeTurnFinished)
		if msgs := messages(); msgs[2].Content != "error: GPS is off" || msgs[3].Content != "The tool said: error: GPS is off" {
			t.Fatalf("after an error result: %+v", msgs)
		}

		// No result in time: the turn ends, with an error result.
		e.send(t, s.ID, "2")
		stream.until(t, api.TypeToolRequested)
		e.timeout <- time.Now()
		fin := stream.until(t, api.TypeTurnFinished)
		var done api.TurnFinishedData
		if err := json.Unmarshal(fin[len(fin)-1].Data, &done); err != nil || !strings.Contains(done.Error, "get_location (call call-2) had no result within 1m30s, so the turn ended") ||
			!strings.Contains(done.Error, "sessions.client_tools.timeout") {
			t.Fatalf("turn.finished after a timeout = %s", fin[len(fin)-1].Data)
		}
		msgs := messages()
		if last := msgs[len(msgs)-1]; last.ToolCallID != "call-2" || !strings.HasPrefix(last.Content, "error: ") || !strings.Contains(last.Content, "had no result within 1m30s") {
			t.Fatalf("the timed out call's result: %+v", last)
		}
		if st := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/status", ""); !strings.Contains(string(st.body), `"error"`) {
			t.Errorf("status after a timeout: %s", st.body)
		}

		// Abort while waiting.
		e.send(t, s.ID, "3")
		stream.until(t, api.TypeToolRequested)
		if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/abort", ""); !strings.Contains(string(r.body), "true") {
			t.Fatalf("abort: %d %s", r.status, r.body)
		}
		fin = stream.until(t, api.TypeTurnFinished)
		if err := json.Unmarshal(fin[len(fin)-1].Data, &done); err != nil || !done.Aborted {
			t.Fatalf("turn.finished after abort = %s", fin[len(fin)-1].Data)
		}
		msgs = messages()
		if last := msgs[len(msgs)-1]; last.ToolCallID != "call-3" || last.Content != "aborted" {
			t.Fatalf("the aborted call's result: %+v", last)
		}
		if w := e.hub.Waiting(s.ID); len(w) != 0 {
			t.Errorf("calls still waiting after the run: %+v", w)
		}
	})
}

func TestClientToolDeclarations(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newClientEnv(t, open, echo.New(), true)
		count := func() int {
			var page struct {
				Sessions []sessions.Session `json:"sessions"`
			}
			e.do(t, "GET", "/v1/sessions", "").decode(t, &page)
			return len(page.Sessions)
		}
		bad := []struct{ name, body, want string }{
			{"bad name", `{"tools": [{"name": "get location", "description": "d"}]}`, `tools[0].name \"get location\" is not a tool name`},
			{"taken name", `{"tools": [{"name": "memory_write", "description": "d"}]}`, "is the name of one of parley's tools"},
			{"no description", `{"tools": [{"name": "a"}]}`, "tools[0].description is required"},
			{"schema of a string", `{"tools": [{"name": "a", "description": "d", "input_schema": {"type": "string"}}]}`, "must describe an object"},
			{"unknown field", `{"tools": [{"name": "a", "description": "d", "parameters": {}}]}`, "unknown field"},
		}
		for _, tc := range bad {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "POST", "/v1/sessions", tc.body)
				if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
					t.Fatalf("%d %s, want 400 saying %q", r.status, r.body, tc.want)
				}
			})
		}
		if n := count(); n != 0 {
			t.Fatalf("refused declarations created %d sessions", n)
		}
		s := e.createSession(t, `{}`)
		path := "/v1/sessions/" + string(s.ID) + "/tools"
		if r := e.do(t, "GET", path, ""); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"tools":[]}` {
			t.Fatalf("no tools: %d %s", r.status, r.body)
		}
		r := e.do(t, "PUT", path, `{"tools": `+declaredTools+`}`)
		var got api.ClientToolsResponse
		r.decode(t, &got)
		if r.status != 200 || len(got.Tools) != 2 {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		if r := e.do(t, "PUT", path, `{"tools": [{"name": "a b", "description": "d"}]}`); r.status != http.StatusBadRequest {
			t.Fatalf("bad put: %d %s", r.status, r.body)
		}
		if specs, _ := e.hub.Declared(context.Background(), s.ID); len(specs) != 2 {
			t.Fatalf("a refused put changed the tools: %+v", specs)
		}
		if r := e.do(t, "PUT", path, `{"tools": []}`); r.status != 200 {
			t.Fatalf("put none: %d %s", r.status, r.body)
		}
		if specs, _ := e.hub.Declared(context.Background(), s.ID); len(specs) != 0 {
			t.Fatalf("after removing the tools: %+v", specs)
		}
		if r := e.do(t, "PUT", "/v1/sessions/nope/tools", `{"tools": []}`); r.status != http.StatusNotFound {
			t.Fatalf("put on a missing session: %d %s", r.status, r.body)
		}
		chat, _, err := e.store.Resolve(context.Background(), sessions.ChatKey("telegram", "1", "u", "main"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if r := e.do(t, "PUT", "/v1/sessions/"+string(chat.ID)+"/tools", `{"tools": []}`); r.status != http.StatusConflict ||
			!strings.Contains(string(r.body), "client tools are for sessions created through the API") {
			t.Fatalf("put on a telegram session: %d %s", r.status, r.body)
		}
		if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/tool_results", `{"results": [{"call_id": "x"}]}`); r.status != http.StatusConflict {
			t.Fatalf("results when not waiting: %d %s", r.status, r.body)
		}
	})
}

func TestClientToolsUnavailable(t *testing.T) {
	e := newClientEnv(t, dbtest.SQLite, echo.New(), false)
	if r := e.do(t, "POST", "/v1/sessions", `{"tools": `+declaredTools+`}`); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "client tools are not available on this server") {
		t.Fatalf("create with tools: %d %s", r.status, r.body)
	}
	s := e.createSession(t, `{}`)
	for _, route := range []struct{ method, path, body string }{
		{"GET", "/tools", ""}, {"PUT", "/tools", `{"tools": []}`}, {"POST", "/tool_results", `{"results": [{"call_id": "x"}]}`},
	} {
		if r := e.do(t, route.method, "/v1/sessions/"+string(s.ID)+route.path, route.body); r.status != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s", route.method, route.path, r.status, r.body)
		}
	}
}
