package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
)

// blockedModel answers when release is closed, and says it started.
type blockedModel struct {
	started chan struct{}
	release chan struct{}
}

func (b blockedModel) Stream(ctx context.Context, _ llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	b.started <- struct{}{}
	<-b.release
	return llm.Response{Text: "ok"}, nil
}

// The providers page's numbers: calls, errors and their latest times per
// model, the latency percentiles from the histogram, and the calls in
// flight now.
func TestModelStats(t *testing.T) {
	m := New()
	m.now = (&fakeClock{t: time.Unix(0, 0), step: 400 * time.Millisecond}).now
	ok := m.Model("openai/gpt-test", scriptedModel{})
	bad := m.Model("openai/gpt-bad", scriptedModel{err: errors.New("503")})
	for range 3 {
		if _, err := ok.Stream(context.Background(), llm.Request{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bad.Stream(context.Background(), llm.Request{}, nil); err == nil {
		t.Fatal("the failing model answered")
	}
	blocked := blockedModel{started: make(chan struct{}), release: make(chan struct{})}
	slow := m.Model("anthropic/claude-test", blocked)
	done := make(chan struct{})
	go func() { _, _ = slow.Stream(context.Background(), llm.Request{}, nil); close(done) }()
	<-blocked.started

	stats := m.ModelStats()
	byModel := map[string]ModelStats{}
	for _, s := range stats {
		byModel[s.Provider+"/"+s.Model] = s
	}
	good, failing, waiting := byModel["openai/gpt-test"], byModel["openai/gpt-bad"], byModel["anthropic/claude-test"]
	if good.Calls != 3 || good.Errors != 0 || good.LastOK.IsZero() || !good.LastError.IsZero() || good.InFlight != 0 {
		t.Fatalf("the good model: %+v", good)
	}
	// Each call took 0.4 s (one clock step): the estimate falls in its
	// bucket (0.25 s, 0.5 s].
	if good.P50 <= 250*time.Millisecond || good.P50 > 500*time.Millisecond || good.P95 < good.P50 || good.P95 > 500*time.Millisecond {
		t.Fatalf("the good model's latency: p50 %v p95 %v", good.P50, good.P95)
	}
	if failing.Calls != 1 || failing.Errors != 1 || failing.LastError.IsZero() || !failing.LastOK.IsZero() {
		t.Fatalf("the failing model: %+v", failing)
	}
	if waiting.InFlight != 1 || waiting.Calls != 0 {
		t.Fatalf("the model in flight: %+v", waiting)
	}
	close(blocked.release)
	<-done
	for _, s := range m.ModelStats() {
		if s.InFlight != 0 {
			t.Fatalf("still in flight after the call ended: %+v", s)
		}
	}
}
