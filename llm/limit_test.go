package llm_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
)

// gate is a model whose calls wait until released, counting how many run.
type gate struct {
	running, most atomic.Int32
	release       chan struct{}
}

func (g *gate) Stream(ctx context.Context, _ llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	n := g.running.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	defer g.running.Add(-1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
	return llm.Response{Text: "ok"}, nil
}

// A burst of ten calls runs at most three at a time; a call whose context
// ends while it waits gives up without calling.
func TestWithLimit(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	m := llm.WithLimit(g, 3)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Stream(context.Background(), llm.Request{}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	for g.running.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, err := m.Stream(ctx, llm.Request{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call past the cap whose context ended: %v", err)
	}
	cancel()
	close(g.release)
	wg.Wait()
	if most := g.most.Load(); most != 3 {
		t.Fatalf("at most %d calls ran at once, want 3", most)
	}
}
