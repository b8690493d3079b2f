package metrics

import (
	"context"
	"errors"

	"github.com/parleyd/parley/llm"
)

// Models wraps a model factory (agent.Options.Models,
// memory.CompactorOptions.Models) so that every model it opens is timed; see
// Model.
func (m *Metrics) Models(open func(spec string) (llm.Model, error)) func(spec string) (llm.Model, error) {
	return func(spec string) (llm.Model, error) {
		mod, err := open(spec)
		if err != nil || mod == nil {
			return mod, err
		}
		return m.Model(spec, mod), nil
	}
}

// Model wraps mod so that each Stream call is recorded in
// parley_model_call_duration_seconds (by the provider and model of spec,
// e.g. "openai/gpt-4o-mini", and outcome ok, error or aborted) and its first
// streamed text in parley_model_first_token_seconds. Wrap the provider
// itself, under any retry wrapper, so each attempt is one call.
func (m *Metrics) Model(spec string, mod llm.Model) llm.Model {
	if t, ok := mod.(*timedModel); ok && t.m == m {
		return t
	}
	provider, model := splitSpec(spec)
	return &timedModel{m: m, next: mod, provider: provider, model: model}
}

type timedModel struct {
	m               *Metrics
	next            llm.Model
	provider, model string
}

func (t *timedModel) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	start := t.m.now()
	t.m.live.start(t.provider, t.model)
	first := true
	resp, err := t.next.Stream(ctx, req, func(d llm.Delta) {
		if first && d.Text != "" {
			first = false
			t.m.modelFirstTok.WithLabelValues(t.provider, t.model).Observe(t.m.now().Sub(start).Seconds())
		}
		if onDelta != nil {
			onDelta(d)
		}
	})
	outcome := OutcomeOK
	switch {
	case err == nil:
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		outcome = OutcomeAborted
	default:
		outcome = OutcomeError
	}
	end := t.m.now()
	t.m.modelCall.WithLabelValues(t.provider, t.model, outcome).Observe(end.Sub(start).Seconds())
	t.m.live.end(t.provider, t.model, outcome, end)
	return resp, err
}
