package metrics

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"runtime"
	"strings"
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

// BenchmarkFeedBurst publishes a burst of turns' events with the Feed loop
// not running, as when every goroutine is busy with turns, and reports the
// heap the burst left behind per event: what metrics hold while they lag.
func BenchmarkFeedBurst(b *testing.B) {
	m := New()
	bus := events.New()
	run := m.Feed(bus)
	usage := &sessions.Usage{Input: 1200, Output: 300, CacheRead: 800}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("s%d", i%64)
		bus.Publish(events.Event{Type: agent.EventTurnStarted, SessionID: id, At: t0,
			Data: agent.TurnStarted{AgentID: "main", Model: "openai/gpt-4o-mini"}})
		bus.Publish(events.Event{Type: sessions.EventMessageAppended, SessionID: id, At: t0,
			Data: sessions.MessageAppended{Message: sessions.Message{Role: sessions.RoleAssistant, Model: "openai/gpt-4o-mini",
				Content: strings.Repeat("a reply ", 64), Usage: usage}}})
		bus.Publish(events.Event{Type: agent.EventTurnFinished, SessionID: id, At: t0.Add(time.Second),
			Data: agent.TurnFinished{Steps: 1}})
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(3*b.N), "heap-B/event")
	if got := testutil.ToFloat64(m.turns.WithLabelValues("main", "ok")); got != float64(b.N) {
		b.Fatalf("%v turns counted, want %d", got, b.N)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx); err != nil {
		b.Fatal(err)
	}
}
