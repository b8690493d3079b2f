package cron_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/cron/crontest"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/telemetry"
)

// sink records fires as the gateway would take them, dropping a repeat of
// a message it has (adapter, chat, message id).
type sink struct {
	mu   sync.Mutex
	seen map[string]bool
	got  chan adapters.Inbound
	err  error
	dups int
	// traces are the trace ids of the spans fires were delivered under.
	traces []string
}

func newSink() *sink {
	return &sink{seen: map[string]bool{}, got: make(chan adapters.Inbound, 100)}
}

func (s *sink) Deliver(ctx context.Context, in adapters.Inbound) error {
	if err := in.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces = append(s.traces, telemetry.ParentOf(ctx).TraceID())
	if s.err != nil {
		return s.err
	}
	k := string(in.Adapter) + "\x00" + in.ChatID + "\x00" + in.MessageID
	if s.seen[k] {
		s.dups++
		return nil
	}
	s.seen[k] = true
	s.got <- in
	return nil
}

func (s *sink) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *sink) duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dups
}

// next returns the next fire delivered; the scheduler delivers before it
// goes idle, so after a Step it is already there.
func (s *sink) next(t *testing.T) adapters.Inbound {
	t.Helper()
	select {
	case in := <-s.got:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no fire was delivered")
		return adapters.Inbound{}
	}
}

// none checks nothing more was delivered (call it once the loop is idle).
func (s *sink) none(t *testing.T) {
	t.Helper()
	select {
	case in := <-s.got:
		t.Fatalf("unexpected fire delivered: %+v", in)
	default:
	}
}

// notifier records notices; fail makes the next calls fail.
type notifier struct {
	mu      sync.Mutex
	notices []cron.Notice
	fail    error
}

func (n *notifier) Notify(_ context.Context, no cron.Notice) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail != nil {
		return n.fail
	}
	n.notices = append(n.notices, no)
	return nil
}

func (n *notifier) all() []cron.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]cron.Notice(nil), n.notices...)
}

func (n *notifier) setFail(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fail = err
}

// env is one database and clock that schedulers come and go on, as a
// daemon restarts.
type env struct {
	t      *testing.T
	db     *dbutil.DB
	clk    *crontest.Clock
	store  *cron.Store
	sink   *sink
	notes  *notifier
	mu     sync.Mutex
	aborts []sessions.Key
	tracer *telemetry.Tracer // nil: tracing off
}

func newEnv(t *testing.T, db *dbutil.DB, start string) *env {
	return newEnvClock(t, db, crontest.NewClock(mustTime(t, start)))
}

// newEnvClock is another process on the same database and clock.
func newEnvClock(t *testing.T, db *dbutil.DB, clk *crontest.Clock) *env {
	return &env{t: t, db: db, clk: clk, store: cron.NewStore(db, clk.Now), sink: newSink(), notes: &notifier{}}
}

func (e *env) abortedKeys() []sessions.Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sessions.Key(nil), e.aborts...)
}

// running is a started scheduler.
type running struct {
	*cron.Scheduler
	stop func()
}

// start runs a scheduler and waits until it has settled the past and is
// waiting on the clock.
func (e *env) start() *running {
	e.t.Helper()
	s, err := cron.New(cron.Options{
		Store: e.store, Clock: e.clk, Notifier: e.notes, Poll: time.Hour, Tracer: e.tracer,
		Abort: func(k sessions.Key) bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.aborts = append(e.aborts, k)
			return true
		},
		Session: func(_ context.Context, k sessions.Key) (sessions.ID, error) {
			return sessions.ID("session-of-" + k.String()), nil
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	mark := e.clk.Mark()
	go func() { done <- s.Start(ctx, e.sink) }()
	e.clk.WaitIdle(e.t, mark)
	r := &running{Scheduler: s}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("Start returned %v", err)
			}
		case <-time.After(10 * time.Second):
			e.t.Error("the scheduler did not stop")
		}
	}
	e.t.Cleanup(r.stop)
	return r
}

func (e *env) add(j cron.Job) cron.Job {
	e.t.Helper()
	if j.AgentID == "" {
		j.AgentID = "main"
	}
	if j.Prompt == "" {
		j.Prompt = "Write the report."
	}
	if j.Timezone == "" {
		j.Timezone = "UTC"
	}
	out, err := e.store.Add(context.Background(), j)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) runs(jobID string) []cron.Run {
	e.t.Helper()
	rs, err := e.store.Runs(context.Background(), jobID, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

// onlyRun returns the job's one receipt.
func (e *env) onlyRun(jobID string) cron.Run {
	e.t.Helper()
	rs := e.runs(jobID)
	if len(rs) != 1 {
		e.t.Fatalf("%s has %d receipts, want 1: %+v", jobID, len(rs), rs)
	}
	return rs[0]
}

func (e *env) reply(s *running, chatID, text string) {
	e.t.Helper()
	if _, err := s.Send(context.Background(), adapters.Outbound{Adapter: "cron", ChatID: chatID, Text: text}); err != nil {
		e.t.Fatalf("Send: %v", err)
	}
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var errBoom = errors.New("boom")

func outbound(chatID, text string) adapters.Outbound {
	return adapters.Outbound{Adapter: "cron", ChatID: chatID, Text: text}
}
