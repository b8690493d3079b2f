package metrics

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// ModelStats is what parley saw of one provider's model since it started,
// for the dashboard's providers page: its calls, errors, latency and the
// calls in flight now.
type ModelStats struct {
	Provider, Model       string
	Calls, Errors, Aborts int
	// P50 and P95 are estimated from the call duration histogram's
	// buckets, as Prometheus' histogram_quantile does.
	P50, P95 time.Duration
	// InFlight counts calls started and not finished, those waiting for
	// a slot under the provider's max_concurrent included.
	InFlight          int
	LastOK, LastError time.Time
	Fallbacks         int // calls of this model a fallback answered
}

// live is a model's calls in flight and their latest outcomes.
type live struct {
	inFlight          int
	lastOK, lastError time.Time
}

// liveCalls keeps each model's live state, by "provider/model".
type liveCalls struct {
	mu     sync.Mutex
	models map[string]*live
	// fallbacks are when the latest fallbacks happened, oldest first,
	// at most maxFallbackTimes.
	fallbacks []time.Time
}

// maxFallbackTimes bounds the fallback times kept for the dashboard.
const maxFallbackTimes = 4096

func (l *liveCalls) get(provider, model string) *live {
	if l.models == nil {
		l.models = map[string]*live{}
	}
	k := provider + "/" + model
	if l.models[k] == nil {
		l.models[k] = &live{}
	}
	return l.models[k]
}

func (l *liveCalls) start(provider, model string) {
	l.mu.Lock()
	l.get(provider, model).inFlight++
	l.mu.Unlock()
}

func (l *liveCalls) end(provider, model, outcome string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.get(provider, model)
	s.inFlight--
	switch outcome {
	case OutcomeOK:
		s.lastOK = at
	case OutcomeError:
		s.lastError = at
	}
}

func (l *liveCalls) fallback(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fallbacks) >= maxFallbackTimes {
		l.fallbacks = slices.Delete(l.fallbacks, 0, len(l.fallbacks)-maxFallbackTimes+1)
	}
	l.fallbacks = append(l.fallbacks, at)
}

// Fallbacks are when the model calls a fallback model answered happened,
// oldest first, since parley started (the latest few thousand).
func (m *Metrics) Fallbacks() []time.Time {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	return slices.Clone(m.live.fallbacks)
}

// ModelStats is each model called since parley started, by provider
// and model.
func (m *Metrics) ModelStats() []ModelStats {
	byKey := map[string]*ModelStats{}
	get := func(provider, model string) *ModelStats {
		k := provider + "/" + model
		if byKey[k] == nil {
			byKey[k] = &ModelStats{Provider: provider, Model: model}
		}
		return byKey[k]
	}
	families, _ := m.reg.Gather()
	for _, f := range families {
		switch f.GetName() {
		case "parley_model_call_duration_seconds":
			merged := map[string][]*dto.Histogram{}
			for _, s := range f.GetMetric() {
				l := labels(s)
				st := get(l["provider"], l["model"])
				n := int(s.GetHistogram().GetSampleCount())
				switch l["outcome"] {
				case OutcomeError:
					st.Errors += n
				case OutcomeAborted:
					st.Aborts += n
				}
				st.Calls += n
				k := l["provider"] + "/" + l["model"]
				merged[k] = append(merged[k], s.GetHistogram())
			}
			for k, hs := range merged {
				st := byKey[k]
				st.P50, st.P95 = quantile(hs, 0.5), quantile(hs, 0.95)
			}
		case "parley_model_fallbacks_total":
			for _, s := range f.GetMetric() {
				l := labels(s)
				provider, model := splitSpec(l["model"])
				get(provider, model).Fallbacks += int(s.GetCounter().GetValue())
			}
		}
	}
	m.live.mu.Lock()
	for k, l := range m.live.models {
		provider, model := splitSpec(k)
		st := get(provider, model)
		st.InFlight, st.LastOK, st.LastError = l.inFlight, l.lastOK, l.lastError
	}
	m.live.mu.Unlock()
	out := make([]ModelStats, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ModelStats) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model))
	})
	return out
}

func labels(s *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range s.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// quantile estimates the q-quantile of the histograms together, linearly
// within the bucket it falls in; the highest finite bound when it falls
// past them all; 0 without samples.
func quantile(hs []*dto.Histogram, q float64) time.Duration {
	var total float64
	counts := map[float64]float64{}
	var bounds []float64
	for _, h := range hs {
		total += float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			if _, seen := counts[b.GetUpperBound()]; !seen {
				bounds = append(bounds, b.GetUpperBound())
			}
			counts[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	if total == 0 {
		return 0
	}
	slices.Sort(bounds)
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		if math.IsInf(b, 1) {
			break
		}
		if c := counts[b]; c >= rank {
			frac := 0.0
			if c > below {
				frac = (rank - below) / (c - below)
			}
			return time.Duration((lower + (b-lower)*frac) * float64(time.Second))
		}
		lower, below = b, counts[b]
	}
	return time.Duration(lower * float64(time.Second))
}
