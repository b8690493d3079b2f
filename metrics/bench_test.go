package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
)

// BenchmarkFeed measures the Feed loop: publish a turn's worth of events
// (started, an assistant message with usage, finished) over 64 sessions and
// wait until the loop has handled them all. It reports events/s.
func BenchmarkFeed(b *testing.B) {
	m := New()
	bus := events.New()
	handled := startFeed(b, m, bus)
	var ids [64]string
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
	}
	t0 := time.Now()
	usage := &sessions.Usage{Input: 1200, Output: 300, CacheRead: 800}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		id := ids[i%len(ids)]
		at := t0.Add(time.Duration(i) * time.Millisecond)
		bus.Publish(events.Event{Type: agent.EventTurnStarted, SessionID: id, At: at,
			Data: agent.TurnStarted{AgentID: "main", Model: "openai/gpt-4o-mini"}})
		bus.Publish(events.Event{Type: sessions.EventMessageAppended, SessionID: id, At: at,
			Data: sessions.MessageAppended{Message: sessions.Message{Role: sessions.RoleAssistant, Model: "openai/gpt-4o-mini", Usage: usage}}})
		bus.Publish(events.Event{Type: agent.EventTurnFinished, SessionID: id, At: at.Add(time.Second),
			Data: agent.TurnFinished{Steps: 1}})
		waitHandled(b, handled, 3)
	}
	b.ReportMetric(float64(3*b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkFeedBurst publishes every event first, then measures how fast
// the loop drains the queue.
func BenchmarkFeedBurst(b *testing.B) {
	m := New()
	bus := events.New()
	handled := make(chan struct{}, 1)
	n := 0
	m.afterEvent = func() {
		if n++; n == 3*b.N {
			handled <- struct{}{}
		}
	}
	run := m.Feed(bus)
	usage := &sessions.Usage{Input: 1200, Output: 300, CacheRead: 800}
	t0 := time.Now()
	for i := range b.N {
		id := fmt.Sprintf("s%d", i%64)
		bus.Publish(events.Event{Type: agent.EventTurnStarted, SessionID: id, At: t0,
			Data: agent.TurnStarted{AgentID: "main", Model: "openai/gpt-4o-mini"}})
		bus.Publish(events.Event{Type: sessions.EventMessageAppended, SessionID: id, At: t0,
			Data: sessions.MessageAppended{Message: sessions.Message{Role: sessions.RoleAssistant, Model: "openai/gpt-4o-mini", Usage: usage}}})
		bus.Publish(events.Event{Type: agent.EventTurnFinished, SessionID: id, At: t0.Add(time.Second),
			Data: agent.TurnFinished{Steps: 1}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { done <- run(ctx) }()
	select {
	case <-handled:
	case <-time.After(time.Minute):
		b.Error("the feed did not drain")
	}
	b.ReportMetric(float64(3*b.N)/time.Since(start).Seconds(), "events/s")
	cancel()
	<-done
}
