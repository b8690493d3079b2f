package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// oneRun plays a finished run of ten 1 KB deltas in session sid.
func oneRun(l *api.EventLog, sid, run string) {
	l.Start(sid, run)
	delta := api.Event{SessionID: sid, Type: api.TypeMessageDelta, Data: json.RawMessage(`{"text":"` + strings.Repeat("x", 1000) + `"}`)}
	for range 10 {
		l.Append(run, delta)
	}
	l.Append(run, ev(sid, api.TypeTurnFinished))
}

// Many runs (a webhook burst: each delivery a session of its own) keep the
// log within its byte budget, the runs that finished first dropped first,
// however recent they are. A session being read keeps its latest run.
func TestEventLogBoundedByBytes(t *testing.T) {
	const budget = 256 << 10
	l := api.NewEventLogWith(api.EventLogOptions{MaxBytes: budget})
	// A reader on the very first session: its run stays while it reads.
	oneRun(l, "s-read", "r-read")
	reader := l.Subscribe("s-read", api.SubscribeOptions{RunID: "r-read"})
	defer reader.Close()
	var peak int64
	for i := range 5000 {
		oneRun(l, "s"+strconv.Itoa(i), "r"+strconv.Itoa(i))
		peak = max(peak, l.Bytes())
	}
	// One run's events may pass the budget until it finishes.
	const runSize = 12 << 10
	if peak > budget+runSize {
		t.Fatalf("the log held %d bytes, budget %d", peak, budget)
	}
	if id, _ := l.Current("s0"); id != "" {
		t.Fatalf("the first run %q is still held after 5000 more", id)
	}
	if !l.Held("s4999", "r4999") {
		t.Fatal("the latest run was dropped")
	}
	if got := len(nextBatch(t, reader)); got != 11 {
		t.Fatalf("the read run lost events: %d of 11", got)
	}
	if !l.Held("s-read", "r-read") {
		t.Fatal("a session being read lost its latest run")
	}
	// Forgetting every session leaves nothing counted.
	reader.Close()
	l.Sweep()
	for i := range 5000 {
		l.Forget("s" + strconv.Itoa(i))
	}
	l.Forget("s-read")
	if b := l.Bytes(); b != 0 {
		t.Fatalf("%d bytes counted with no session left", b)
	}
}

// With no new run starting, a finished run is dropped once its retention
// has passed: the feed's loop sweeps on a timer.
func TestEventLogSweepsOnATimer(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := api.NewEventLogWith(api.EventLogOptions{Now: clock.now, Retention: time.Minute, SweepEvery: time.Millisecond})
	bus := events.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	feed := l.Feed(bus)
	go func() { done <- feed(ctx) }()
	defer func() { cancel(); <-done }()
	oneRun(l, "s1", "r1")
	clock.add(30 * time.Second)
	if !l.Held("s1", "r1") {
		t.Fatal("a run was dropped before its retention passed")
	}
	clock.add(31 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for l.Held("s1", "r1") {
		if time.Now().After(deadline) {
			t.Fatal("a run past its retention is still held with no new run")
		}
		time.Sleep(time.Millisecond)
	}
	if b := l.Bytes(); b != 0 {
		t.Fatalf("%d bytes counted after the sweep", b)
	}
}

// A run the log dropped is replayed from the database: its stored reply,
// tool call and usage, then its status and finish, as the live run showed.
func TestReplayOfADroppedRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		db := open(t)
		bus := events.New()
		st := sessions.NewStore(db, sessions.WithBus(bus))
		// A budget of one byte: every run is dropped as it finishes.
		l := api.NewEventLogWith(api.EventLogOptions{MaxBytes: 1, Runs: api.NewRunRecords(db)})
		srv := newAPIServer(t, api.New(api.Options{Store: st, Events: l, Tokens: []string{token}, Heartbeat: time.Hour}))
		defer srv.Close()
		feedCtx, stopFeed := context.WithCancel(context.Background())
		feedDone := make(chan error, 1)
		feed := l.Feed(bus)
		go func() { feedDone <- feed(feedCtx) }()
		defer func() { stopFeed(); <-feedDone }()

		s, err := st.Create(ctx, sessions.Key{Surface: sessions.SurfaceAPI, SurfaceID: "replay", AgentID: "main"}, sessions.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := publisher{bus: bus, sid: string(s.ID)}
		appendMsg := func(m sessions.Message) {
			if _, err := st.Append(ctx, s.ID, m); err != nil {
				t.Fatal(err)
			}
		}
		appendMsg(sessions.Message{Role: sessions.RoleUser, Content: "what time is it"})
		p.pub(agent.EventTurnStarted, agent.TurnStarted{AgentID: "main", Model: "echo", RunIDs: []string{"run-a", "run-b"}})
		p.pub(agent.EventMessageDelta, "let me ")
		appendMsg(sessions.Message{Role: sessions.RoleAssistant, Content: "let me check",
			ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "clock", Arguments: json.RawMessage(`{}`)}}})
		appendMsg(sessions.Message{Role: sessions.RoleTool, ToolCallID: "c1", Content: "noon"})
		appendMsg(sessions.Message{Role: sessions.RoleAssistant, Content: "it is noon", Model: "echo",
			Usage: &sessions.Usage{Input: 5, Output: 3}})
		p.pub(agent.EventTurnFinished, agent.TurnFinished{RunIDs: []string{"run-a", "run-b"}, Steps: 2})

		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, found, err := l.Replay(ctx, st, string(s.ID), "run-a"); err != nil {
				t.Fatal(err)
			} else if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no record of the finished run")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if l.Held(string(s.ID), "run-a") || l.Bytes() != 0 {
			t.Fatalf("the run is still in memory (%d bytes)", l.Bytes())
		}
		// Asked for under its second id, as a message answered with others.
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/sessions/"+string(s.ID)+"/events?run_id=run-b", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e api.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			if e.RunID != "run-a" {
				t.Fatalf("event %s of run %s", e.ID, e.RunID)
			}
			got = append(got, e.Type+" "+string(e.Data))
			if e.Type == api.TypeTurnFinished {
				break
			}
		}
		want := []string{
			api.TypeTurnStarted + ` {"agent_id":"main","model":"echo","run_ids":["run-a","run-b"]}`,
			api.TypeStatus + ` {"state":"busy"`,
			api.TypeMessageDelta + ` {"text":"let me check"}`,
			api.TypeToolStarted + ` {"call_id":"c1","name":"clock","state":"input-available"}`,
			api.TypeToolCompleted + ` {"call_id":"c1","name":"clock","state":"output-available","result":"noon"}`,
			api.TypeMessageDelta + ` {"text":"it is noon"}`,
			api.TypeUsage + ` {"message_id":`,
			api.TypeStatus + ` {"state":"idle"}`,
			api.TypeTurnFinished + ` {"run_ids":["run-a","run-b"],"steps":2,`,
		}
		if len(got) != len(want) {
			t.Fatalf("replayed:\n%s", strings.Join(got, "\n"))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Fatalf("event %d: %s, want %s...\nall:\n%s", i, got[i], want[i], strings.Join(got, "\n"))
			}
		}
	})
}

// BenchmarkEventLogBurst is a webhook burst's runs through one log: the
// bytes it holds at the end stay within its budget however many runs pass.
func BenchmarkEventLogBurst(b *testing.B) {
	l := api.NewEventLog(nil)
	var peak int64
	for i := 0; b.Loop(); i++ {
		oneRun(l, "s"+strconv.Itoa(i), "r"+strconv.Itoa(i))
		if i%1000 == 0 {
			peak = max(peak, l.Bytes())
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak_MiB")
}

// Release (a daemon settling after a busy spell) drops the finished runs,
// which the database can rebuild, and keeps a run under way and a run
// someone reads. With no run records to rebuild from it keeps everything.
func TestEventLogReleaseDropsFinishedRuns(t *testing.T) {
	l := api.NewEventLogWith(api.EventLogOptions{Runs: api.NewRunRecords(dbtest.SQLite(t))})
	oneRun(l, "s-done", "r-done")
	oneRun(l, "s-read", "r-read")
	reader := l.Subscribe("s-read", api.SubscribeOptions{RunID: "r-read"})
	defer reader.Close()
	l.Start("s-live", "r-live")
	l.Append("r-live", api.Event{SessionID: "s-live", Type: api.TypeMessageDelta, Data: json.RawMessage(`{"text":"still writing"}`)})

	l.Release()
	if l.Held("s-done", "r-done") {
		t.Fatal("a finished run nobody reads was kept")
	}
	if !l.Held("s-live", "r-live") {
		t.Fatal("a run under way was dropped")
	}
	if !l.Held("s-read", "r-read") {
		t.Fatal("a run being read was dropped")
	}

	plain := api.NewEventLogWith(api.EventLogOptions{})
	oneRun(plain, "s-done", "r-done")
	plain.Release()
	if !plain.Held("s-done", "r-done") {
		t.Fatal("a run no database can rebuild was dropped")
	}
}
