package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

func ev(sessionID, typ string) api.Event {
	return api.Event{SessionID: sessionID, Type: typ, Data: json.RawMessage(eventData[typ])}
}

// eventData is a run event's data as the feed writes it, by type.
var eventData = map[string]string{
	api.TypeTurnStarted:  `{"agent_id":"main","model":"echo"}`,
	api.TypeMessageDelta: `{"text":"hi"}`,
	api.TypeTurnFinished: `{"steps":1,"usage":{"input":1,"output":1,"reasoning":0,"cache_read":0,"cache_write":0},"aborted":false}`,
}

func nextBatch(t *testing.T, s *api.Stream) []api.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return b
}

func ids(es []api.Event) string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return strings.Join(out, ",")
}

func TestEventLogReplay(t *testing.T) {
	l := api.NewEventLog(nil)
	run := l.Start("s1", "r1")
	if run != "r1" {
		t.Fatalf("run %q", run)
	}
	for range 3 {
		l.Append(run, ev("s1", api.TypeMessageDelta))
	}
	a := l.Subscribe("s1", api.SubscribeOptions{})
	if got := ids(nextBatch(t, a)); got != "r1:0,r1:1,r1:2" {
		t.Fatalf("replay %s", got)
	}
	l.Append(run, ev("s1", api.TypeMessageDelta))
	if got := ids(nextBatch(t, a)); got != "r1:3" {
		t.Fatalf("live %s", got)
	}
	a.Close()
	if _, err := a.Next(context.Background()); !errors.Is(err, api.ErrStreamClosed) {
		t.Fatalf("next after close: %v", err)
	}
	if _, active := l.Current("s1"); !active {
		t.Fatal("closing a stream ended the run")
	}

	b := l.Subscribe("s1", api.SubscribeOptions{})
	if got := ids(nextBatch(t, b)); got != "r1:0,r1:1,r1:2,r1:3" {
		t.Fatalf("reconnect replay %s", got)
	}
	resume := l.Subscribe("s1", api.SubscribeOptions{LastEventID: "r1:1"})
	if got := ids(nextBatch(t, resume)); got != "r1:2,r1:3" {
		t.Fatalf("resume %s", got)
	}
	l.Append(run, ev("s1", api.TypeTurnFinished))

	// After the run finished, a new stream waits for the next run, unless
	// it names the finished one.
	late := l.Subscribe("s1", api.SubscribeOptions{})
	named := l.Subscribe("s1", api.SubscribeOptions{RunID: "r1"})
	if got := ids(nextBatch(t, named)); got != "r1:0,r1:1,r1:2,r1:3,r1:4" {
		t.Fatalf("named run %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if b, err := late.Next(ctx); err == nil {
		t.Fatalf("late stream got %s from a finished run", ids(b))
	}
	cancel()

	// b lags: two whole runs pass before it reads; it still sees both.
	r2 := l.Start("s1")
	l.Append(r2, ev("s1", api.TypeTurnStarted))
	l.Append(r2, ev("s1", api.TypeTurnFinished))
	r3 := l.Start("s1")
	l.Append(r3, ev("s1", api.TypeTurnStarted))
	var got []string
	for len(got) < 4 {
		for _, e := range nextBatch(t, b) {
			got = append(got, e.ID)
		}
	}
	want := fmt.Sprintf("r1:4,%s:0,%s:1,%s:0", r2, r2, r3)
	if strings.Join(got, ",") != want {
		t.Fatalf("lagging reader %v, want %s", got, want)
	}
	if got := ids(nextBatch(t, late)); got != r2+":0,"+r2+":1" {
		t.Fatalf("late stream %s", got)
	}

	l.Forget("s1")
	if _, err := b.Next(context.Background()); !errors.Is(err, api.ErrStreamClosed) {
		t.Fatalf("after forget: %v", err)
	}
}

// publisher plays the agent: it publishes run events for one session.
type publisher struct {
	bus *events.Bus
	sid string
}

func (p publisher) pub(typ events.Type, data any) {
	p.bus.Publish(events.Event{Type: typ, SessionID: p.sid, At: time.Now(), Data: data})
}

func startFeed(t *testing.T, e *env) *events.Bus {
	t.Helper()
	bus := events.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	run := e.events.Feed(bus)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("feed: %v", err)
		}
	})
	return bus
}

// TestEventsReconnectMidRun: a client disconnects mid-run and reconnects;
// the second connection gets the whole run once, in order, with no gaps
// and no duplicates, then the rest live. The run goes on meanwhile.
func TestEventsReconnectMidRun(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	bus := startFeed(t, e)
	s := e.createSession(t, `{}`)
	p := publisher{bus: bus, sid: string(s.ID)}

	r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/messages", `{"content":"hi"}`)
	var sent api.SendMessageResponse
	r.decode(t, &sent)

	first := e.stream(t, s.ID, "", nil)
	// watcher tells, in process, when the feed has logged an event.
	watcher := e.events.Subscribe(string(s.ID), api.SubscribeOptions{})
	defer watcher.Close()
	logged := 0
	waitLogged := func(n int) {
		for logged < n {
			logged += len(nextBatch(t, watcher))
		}
	}
	p.pub(agent.EventTurnStarted, agent.TurnStarted{AgentID: "main", Model: "echo", RunIDs: []string{sent.RunID}})
	for i := range 3 {
		p.pub(agent.EventMessageDelta, fmt.Sprintf("d%d ", i))
	}
	var seen []api.Event
	for range 5 { // turn.started, status, 3 deltas
		seen = append(seen, first.next(t))
	}
	if seen[0].Type != api.TypeTurnStarted || seen[0].RunID != sent.RunID || seen[0].SessionID != string(s.ID) {
		t.Fatalf("first event %+v (run id from send %q)", seen[0], sent.RunID)
	}
	first.close()

	// The run goes on while nobody listens.
	p.pub(agent.EventToolStarted, agent.ToolEvent{CallID: "c1", Name: "clock"})
	p.pub(agent.EventToolRetrying, agent.ToolEvent{CallID: "c1", Name: "clock",
		Retry: &tools.Attempt{N: 1, Class: tools.ClassTimeout, Error: "clock took too long"}, Wait: 1500 * time.Millisecond})
	p.pub(agent.EventToolCompleted, agent.ToolEvent{CallID: "c1", Name: "clock", Result: "noon", Attempts: 2})
	p.pub(agent.EventMessageDelta, "d3")
	waitLogged(9) // logged before anyone reconnects

	second := e.stream(t, s.ID, "", nil)
	var replay []api.Event
	for range 9 {
		replay = append(replay, second.next(t))
	}
	p.pub(agent.EventMessageDelta, "d4")
	p.pub(agent.EventTurnFinished, agent.TurnFinished{Steps: 2, Usage: llm.Usage{Input: 10, Output: 5}})
	for range 3 { // delta, status, turn.finished
		replay = append(replay, second.next(t))
	}
	text := ""
	for i, ev := range replay {
		if want := sent.RunID + ":" + strconv.Itoa(i); ev.ID != want || ev.RunID != sent.RunID {
			t.Fatalf("event %d is %s, want %s: %+v", i, ev.ID, want, ev)
		}
		if i < len(seen) && (seen[i].ID != ev.ID || string(seen[i].Data) != string(ev.Data)) {
			t.Fatalf("replayed event %d differs: %+v vs %+v", i, seen[i], ev)
		}
		if ev.Type == api.TypeMessageDelta {
			var d api.DeltaData
			_ = json.Unmarshal(ev.Data, &d)
			text += d.Text
		}
	}
	if text != "d0 d1 d2 d3d4" {
		t.Fatalf("streamed text %q", text)
	}
	types := []string{}
	for _, ev := range replay {
		types = append(types, ev.Type)
	}
	want := "turn.started status message.delta message.delta message.delta tool.started tool.retrying tool.completed message.delta message.delta status turn.finished"
	if strings.Join(types, " ") != want {
		t.Fatalf("types %v", types)
	}
	var fin api.TurnFinishedData
	_ = json.Unmarshal(replay[len(replay)-1].Data, &fin)
	if fin.Steps != 2 || fin.Usage.Input != 10 || fin.Usage.Output != 5 {
		t.Fatalf("turn.finished data %s", replay[len(replay)-1].Data)
	}
	var retrying, tool api.ToolData
	_ = json.Unmarshal(replay[6].Data, &retrying)
	if retrying.State != "retrying" || retrying.Attempt != 1 || retrying.Class != "timeout" || retrying.Error != "clock took too long" || retrying.RetryInMS != 1500 {
		t.Fatalf("tool.retrying %s", replay[6].Data)
	}
	_ = json.Unmarshal(replay[7].Data, &tool)
	if tool.State != "output-available" || tool.Result != "noon" || tool.Attempts != 2 {
		t.Fatalf("tool.completed %s", replay[7].Data)
	}
}

func TestFeedMapping(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	bus := startFeed(t, e)
	s := e.createSession(t, `{}`)
	p := publisher{bus: bus, sid: string(s.ID)}
	st := e.stream(t, s.ID, "", nil)

	p.pub(agent.EventTurnStarted, agent.TurnStarted{AgentID: "main", Model: "echo"})
	p.pub(sessions.EventMessageAppended, sessions.MessageAppended{Message: sessions.Message{ID: "m1", Role: sessions.RoleUser}})
	p.pub(sessions.EventMessageAppended, sessions.MessageAppended{Message: sessions.Message{ID: "m2", Role: sessions.RoleAssistant,
		Model: "echo", Usage: &sessions.Usage{Input: 7, Output: 3, CacheRead: 2}}})
	p.pub(agent.EventToolCompleted, agent.ToolEvent{CallID: "c", Name: "t", Result: "boom", IsError: true})
	p.pub(memory.EventContextCompacted, memory.ContextCompacted{SummaryID: "sum", Trigger: agent.CompactManual, Archived: 4,
		TokensBefore: 900, TokensAfter: 200, Duration: 1500 * time.Millisecond})
	p.pub(agent.EventTurnFinished, agent.TurnFinished{Error: "model down"})
	p.pub(agent.EventTurnFinished, agent.TurnFinished{Error: "failed before it started"})

	want := []struct{ typ, data string }{
		{api.TypeTurnStarted, `{"agent_id":"main","model":"echo"}`},
		{api.TypeStatus, `"state":"busy"`},
		{api.TypeUsage, `{"message_id":"m2","model":"echo","input":7,"output":3,"reasoning":0,"cache_read":2,"cache_write":0}`},
		{api.TypeToolCompleted, `{"call_id":"c","name":"t","state":"output-error","result":"boom"}`},
		{"context.compacted", `"summary_id":"sum","trigger":"manual","summarized":0,"archived":4,"memories":0,"tokens_before":900,"tokens_after":200,"duration_ms":1500`},
		// The old name, until the next release.
		{"context_compacted", `"summary_id":"sum","trigger":"manual","summarized":0,"archived":4,"memories":0,"tokens_before":900,"tokens_after":200,"duration_ms":1500`},
		{api.TypeStatus, `{"state":"error","message":"model down"}`},
		{api.TypeTurnFinished, `"error":"model down"`},
		// A run that failed before turn.started still gets its own run.
		{api.TypeStatus, `{"state":"error","message":"failed before it started"}`},
		{api.TypeTurnFinished, `"error":"failed before it started"`},
	}
	var runs []string
	for i, w := range want {
		got := st.next(t)
		if got.Type != w.typ || !strings.Contains(string(got.Data), w.data) {
			t.Fatalf("event %d: %s %s, want %s with %s", i, got.Type, got.Data, w.typ, w.data)
		}
		runs = append(runs, got.RunID)
	}
	if runs[0] != runs[7] || runs[8] == runs[0] || runs[8] != runs[9] {
		t.Fatalf("run ids %v", runs)
	}
}

func TestEventsRoute(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	s := e.createSession(t, `{}`)
	if r := e.do(t, "GET", "/v1/sessions/01900000-0000-7000-8000-000000000000/events", ""); r.status != 404 || r.errorCode(t) != api.CodeNotFound {
		t.Fatalf("missing session: %d %s", r.status, r.body)
	}
	if r := e.doAuth(t, "GET", "/v1/sessions/"+string(s.ID)+"/events", "", ""); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	// A finished run, named by run_id, is replayed; Last-Event-ID resumes.
	run := e.events.Start(string(s.ID))
	e.events.Append(run, ev(string(s.ID), api.TypeTurnStarted))
	e.events.Append(run, ev(string(s.ID), api.TypeTurnFinished))
	c := e.stream(t, s.ID, "?run_id="+run, nil)
	if got := c.next(t); got.ID != run+":0" {
		t.Fatalf("run_id replay starts at %s", got.ID)
	}
	c2 := e.stream(t, s.ID, "?run_id="+run, http.Header{"Last-Event-Id": {run + ":0"}})
	if got := c2.next(t); got.ID != run+":1" || got.Type != api.TypeTurnFinished {
		t.Fatalf("resume at %s", got.ID)
	}
	h := api.New(api.Options{Store: e.store, Tokens: []string{token}})
	if rec := serve(t, h, "GET", "/v1/sessions/"+string(s.ID)+"/events", ""); rec.Code != 503 {
		t.Fatalf("no event log: %d", rec.Code)
	}
}

// Messages answered together are one run under several ids: the run has
// the first one's id, and a stream asked for any of them replays it. A
// message that joins a run in progress (steer) names it too. A run with
// no message of the API's gets an id of its own.
func TestRunsAnsweringSeveralMessages(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	bus := startFeed(t, e)
	s := e.createSession(t, `{}`)
	p := publisher{bus: bus, sid: string(s.ID)}
	watcher := e.events.Subscribe(string(s.ID), api.SubscribeOptions{})
	defer watcher.Close()
	var pending []api.Event
	next := func() api.Event {
		t.Helper()
		if len(pending) == 0 {
			pending = nextBatch(t, watcher)
		}
		ev := pending[0]
		pending = pending[1:]
		return ev
	}

	p.pub(agent.EventTurnStarted, agent.TurnStarted{AgentID: "main", Model: "echo"})
	if ev := next(); ev.RunID == "" || ev.RunID == "a" {
		t.Fatalf("a run for no API message has run id %q", ev.RunID)
	}
	next() // status
	p.pub(agent.EventTurnFinished, agent.TurnFinished{})
	next()
	next()

	p.pub(agent.EventTurnStarted, agent.TurnStarted{AgentID: "main", Model: "echo", RunIDs: []string{"a", "b"}})
	started := next()
	var data api.TurnStartedData
	if err := json.Unmarshal(started.Data, &data); err != nil || started.RunID != "a" || fmt.Sprint(data.RunIDs) != "[a b]" {
		t.Fatalf("turn.started %+v (%s)", started, started.Data)
	}
	next() // status
	p.pub(agent.EventTurnJoined, agent.TurnJoined{RunIDs: []string{"c"}})
	if joined := next(); joined.Type != api.TypeTurnJoined || joined.RunID != "a" || string(joined.Data) != `{"run_ids":["c"]}` {
		t.Fatalf("turn.joined %+v (%s)", joined, joined.Data)
	}
	p.pub(agent.EventTurnFinished, agent.TurnFinished{RunIDs: []string{"a", "b"}})
	next()
	next()
	for _, id := range []string{"a", "b", "c"} {
		st := e.events.Subscribe(string(s.ID), api.SubscribeOptions{RunID: id})
		if got := ids(nextBatch(t, st)); got != "a:0,a:1,a:2,a:3,a:4" {
			t.Errorf("stream for %s: %s", id, got)
		}
		st.Close()
	}

	// A run that fails before it starts still carries its messages' ids.
	p.pub(agent.EventTurnFinished, agent.TurnFinished{RunIDs: []string{"d"}, Error: "no model"})
	if ev := next(); ev.RunID != "d" {
		t.Fatalf("a run that failed before it started has run id %q", ev.RunID)
	}
}

// A stream asked for a run that finished before another began replays it
// and then follows the runs after it, for the last few runs.
func TestStreamForAnEarlierRun(t *testing.T) {
	l := api.NewEventLog(nil)
	for _, run := range []string{"r1", "r2", "r3", "r4", "r5"} {
		l.Start("s1", run)
		l.Append(run, ev("s1", api.TypeTurnStarted))
		l.Append(run, ev("s1", api.TypeTurnFinished))
	}
	r6 := l.Start("s1", "r6")
	l.Append(r6, ev("s1", api.TypeTurnStarted))
	st := l.Subscribe("s1", api.SubscribeOptions{RunID: "r3"})
	defer st.Close()
	var got []string
	for len(got) < 7 {
		for _, e := range nextBatch(t, st) {
			got = append(got, e.ID)
		}
	}
	if want := "r3:0,r3:1,r4:0,r4:1,r5:0,r5:1,r6:0"; strings.Join(got, ",") != want {
		t.Fatalf("stream for r3: %v, want %s", got, want)
	}
	// Past the last four, a run is gone: the stream starts at the latest.
	old := l.Subscribe("s1", api.SubscribeOptions{RunID: "r2"})
	defer old.Close()
	if got := ids(nextBatch(t, old)); got != "r6:0" {
		t.Fatalf("stream for a run long gone: %s", got)
	}
}
