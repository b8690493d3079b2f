package api_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// agentRunner is a small api.Runner over a real agent.Runner: each message
// is one run on its own goroutine, as the gateway's lane would start it.
type agentRunner struct {
	store  *sessions.SQLStore
	runner *agent.Runner
	events *api.EventLog
	ctx    context.Context
	wg     sync.WaitGroup
	// lanes holds a mutex per session: like the gateway's lanes, runs of
	// one session take turns (the agent refuses a second run of a session
	// with ErrBusy, and a run's turn.finished is published just before it
	// gives its slot back).
	lanes sync.Map
}

var _ api.Runner = (*agentRunner)(nil)

func (a *agentRunner) Send(ctx context.Context, req api.SendRequest) (string, error) {
	s, err := a.store.Session(ctx, req.SessionID)
	if err != nil {
		return "", err
	}
	if st := a.runner.Status(s.ID).State; req.IfIdle && st != api.StateIdle && st != "" {
		return "", api.ErrBusy
	}
	runID := uuid.Must(uuid.NewV7()).String()
	a.wg.Add(1)
	lane, _ := a.lanes.LoadOrStore(s.ID, new(sync.Mutex))
	go func() {
		defer a.wg.Done()
		lane.(*sync.Mutex).Lock()
		defer lane.(*sync.Mutex).Unlock()
		// The input carries the run id, so the run's events do.
		_, _ = a.runner.Run(a.ctx, agent.Request{Session: s, Agent: agent.AgentConfig{ID: s.Key.AgentID, Model: "echo"},
			Inputs: []agent.Input{{Text: req.Content, RunID: runID}}})
	}()
	return runID, nil
}

func (a *agentRunner) Status(id sessions.ID) api.Status { return a.runner.Status(id) }
func (a *agentRunner) Abort(id sessions.ID) bool        { return a.runner.Abort(id) }
func (a *agentRunner) Reset(ctx context.Context, key sessions.Key) (sessions.Session, error) {
	return a.store.Reset(ctx, key)
}
func (a *agentRunner) Compact(context.Context, sessions.ID) (api.CompactResult, error) {
	return api.CompactResult{}, api.ErrRejected
}

// agentEnv is the API over a real agent runner with model, its events fed
// from the bus into the event log. opts may adjust the API options.
type agentEnv struct {
	*env
	bus    *events.Bus
	runner *agentRunner
}

func newAgentEnv(t *testing.T, open dbtest.Opener, model llm.Model, opts ...func(db *dbutil.DB, bus *events.Bus, o *api.Options)) *agentEnv {
	t.Helper()
	db := open(t)
	st := sessions.NewStore(db)
	bus := events.New()
	log := api.NewEventLog(nil)
	ctx, cancel := context.WithCancel(context.Background())
	ar := &agentRunner{store: st, events: log, ctx: ctx, runner: agent.New(agent.Options{
		Store: st, Bus: bus, DefaultModel: "echo", Tools: tools.NewRegistry(),
		Models: func(string) (llm.Model, error) { return model, nil },
		Retry:  llm.RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }},
	})}
	feed := log.Feed(bus)
	fed := make(chan error, 1)
	go func() { fed <- feed(ctx) }()
	o := api.Options{Store: st, Runner: ar, Events: log, Tokens: []string{token}, DefaultAgent: "main", Heartbeat: time.Hour}
	for _, fn := range opts {
		fn(db, bus, &o)
	}
	srv := newAPIServer(t, api.New(o))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		ar.wg.Wait()
		if err := <-fed; err != nil {
			t.Errorf("feed: %v", err)
		}
	})
	return &agentEnv{env: &env{srv: srv, store: st, events: log}, bus: bus, runner: ar}
}
