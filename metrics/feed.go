package metrics

import (
	"context"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

// fedTypes are the bus events Feed reads.
var fedTypes = []events.Type{
	agent.EventTurnStarted,
	agent.EventTurnFinished,
	memory.EventContextCompacted,
	sessions.EventMessageAppended,
	agent.EventModelFallback,
}

// ObserveDB returns the observer to give dbutil.DB.Observe: it records
// every wait on the database in parley_store_wait_duration_seconds.
func (m *Metrics) ObserveDB() dbutil.Observer {
	write := m.storeWait.WithLabelValues(string(dbutil.OpWrite))
	read := m.storeWait.WithLabelValues(string(dbutil.OpRead))
	return func(op dbutil.Op, _ time.Time, took time.Duration) {
		switch op {
		case dbutil.OpWrite:
			write.Observe(took.Seconds())
		case dbutil.OpRead:
			read.Observe(took.Seconds())
		default:
			m.storeWait.WithLabelValues(label(string(op))).Observe(took.Seconds())
		}
	}
}

// Feed starts turning bus's events into metrics now (turns and their
// durations, tokens, compactions), so no event published after Feed
// returns is missed, and returns a loop that keeps it up until ctx ends
// (then it returns nil). The events are counted as they are published
// (events.Bus.Observe): a burst of them queues nothing, so counting costs
// no memory however far behind a goroutine would have fallen.
func (m *Metrics) Feed(bus *events.Bus) func(ctx context.Context) error {
	f := feeder{m: m, started: map[string]turnStart{}}
	stop := bus.Observe(func(e events.Event) {
		f.handle(e)
		if m.afterEvent != nil {
			m.afterEvent()
		}
	}, fedTypes...)
	return func(ctx context.Context) error {
		defer stop()
		<-ctx.Done()
		return nil
	}
}

// turnStart is what turn.started told of a session's running turn.
type turnStart struct {
	agent string
	at    time.Time
}

// maxStarted bounds feeder.started: past it, turns whose turn.finished never
// came (a crash mid-turn) and that started over an hour ago are forgotten.
const maxStarted = 4096

// feeder is one Feed's state; the bus calls it one event at a time.
type feeder struct {
	m *Metrics
	// started holds the running turn of each session (one at a time).
	started map[string]turnStart
}

func (f *feeder) handle(e events.Event) {
	switch d := e.Data.(type) {
	case agent.TurnStarted:
		f.turnStarted(e, d)
	case *agent.TurnStarted:
		f.turnStarted(e, *d)
	case agent.TurnFinished:
		f.turnFinished(e, d)
	case *agent.TurnFinished:
		f.turnFinished(e, *d)
	case memory.ContextCompacted:
		f.compacted(e, d)
	case *memory.ContextCompacted:
		f.compacted(e, *d)
	case sessions.MessageAppended:
		f.tokens(e, d.Message)
	case *sessions.MessageAppended:
		f.tokens(e, d.Message)
	case agent.ModelFallback:
		f.m.fallbacks.WithLabelValues(label(d.AgentID), label(d.Model), label(d.Fallback)).Inc()
		at := e.At
		if at.IsZero() {
			at = f.m.now()
		}
		f.m.live.fallback(at)
	}
}

func (f *feeder) turnStarted(e events.Event, d agent.TurnStarted) {
	if len(f.started) >= maxStarted {
		for id, s := range f.started {
			if e.At.Sub(s.at) > time.Hour {
				delete(f.started, id)
			}
		}
	}
	f.started[e.SessionID] = turnStart{agent: label(d.AgentID), at: e.At}
}

func (f *feeder) turnFinished(e events.Event, d agent.TurnFinished) {
	outcome := OutcomeOK
	switch {
	case d.Aborted:
		outcome = OutcomeAborted
	case d.Error != "":
		outcome = OutcomeError
	}
	// A turn that failed before it started (e.g. its inputs could not be
	// stored) has no turn.started: it counts, with no agent and no duration.
	s, ok := f.started[e.SessionID]
	delete(f.started, e.SessionID)
	if !ok {
		f.m.turns.WithLabelValues(unknownLabel, outcome).Inc()
		return
	}
	f.m.turns.WithLabelValues(s.agent, outcome).Inc()
	if !s.at.IsZero() && !e.At.IsZero() && !e.At.Before(s.at) {
		f.m.turnDuration.WithLabelValues(s.agent, outcome).Observe(e.At.Sub(s.at).Seconds())
	}
}

func (f *feeder) compacted(e events.Event, d memory.ContextCompacted) {
	f.m.compactions.WithLabelValues(label(string(d.Trigger))).Inc()
	f.m.compactionTime.Observe(d.Duration.Seconds())
	f.usage(e, d.Model, d.Usage) // the summary's
}

// tokens counts the usage an assistant message carries (one per model call).
func (f *feeder) tokens(e events.Event, msg sessions.Message) {
	if msg.Role != sessions.RoleAssistant {
		return
	}
	f.usage(e, msg.Model, msg.Usage)
}

// usage counts what a call to model spec used, and its cost against the
// agent whose turn the session is running (unknown outside a turn).
func (f *feeder) usage(e events.Event, spec string, u *sessions.Usage) {
	if u == nil {
		return
	}
	provider, model := splitSpec(spec)
	cost := u.CostUSD
	if f := f.m.price.Load(); cost == 0 && f != nil {
		cost, _ = (*f)(spec, u.Input+u.CacheRead+u.CacheWrite, u.Output+u.Reasoning)
	}
	if cost > 0 {
		agentID := unknownLabel
		if s, ok := f.started[e.SessionID]; ok {
			agentID = s.agent
		}
		f.m.cost.WithLabelValues(agentID, provider, model).Add(cost)
	}
	for _, c := range []struct {
		kind string
		n    int64
	}{
		{TokensPrompt, u.Input},
		{TokensCompletion, u.Output},
		{TokensReasoning, u.Reasoning},
		{TokensCacheRead, u.CacheRead},
		{TokensCacheWrite, u.CacheWrite},
	} {
		if c.n > 0 {
			f.m.tokens.WithLabelValues(c.kind, provider, model).Add(float64(c.n))
		}
	}
}
