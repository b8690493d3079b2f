package cron_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/telemetry"
)

// A fire begins a trace: its span names the job and the run, and the fire
// reaches the gateway under it, so the turn it runs hangs there.
func TestFireBeginsATrace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		exp := tracetest.NewInMemoryExporter()
		tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp, SampleRatio: 1})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, open(t), "2025-06-02T10:30:00Z")
		e.tracer = tr
		e.add(cron.Job{ID: "report", Schedule: "0 * * * *", Prompt: "Summarize the news.", AgentID: "writer"})
		s := e.start()
		defer s.stop()
		e.clk.Step(t, 30*time.Minute)
		e.sink.next(t)
		spans := exp.GetSpans()
		if len(spans) != 1 || spans[0].Name != telemetry.SpanCronFire || spans[0].Parent.IsValid() {
			t.Fatalf("spans %+v; want one cron fire span beginning its trace", spans)
		}
		attrs := map[string]string{}
		for _, a := range spans[0].Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if attrs["parley.cron.job"] != "report" || attrs["parley.cron.run"] != e.onlyRun("report").ID {
			t.Errorf("the fire's span has %v; want the job and its run", attrs)
		}
		e.sink.mu.Lock()
		traces := e.sink.traces
		e.sink.mu.Unlock()
		if len(traces) != 1 || traces[0] != spans[0].SpanContext.TraceID().String() {
			t.Errorf("the fire reached the gateway under traces %q; want the fire's %s", traces, spans[0].SpanContext.TraceID())
		}
	})
}
