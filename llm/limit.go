package llm

import (
	"context"
	"fmt"
)

// WithLimit returns a Model that lets at most n calls of m run at once:
// the rest wait their turn, or until their context ends. n < 1 returns m.
func WithLimit(m Model, n int) Model {
	if n < 1 {
		return m
	}
	return &limitModel{next: m, slots: make(chan struct{}, n)}
}

type limitModel struct {
	next  Model
	slots chan struct{}
}

func (l *limitModel) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return Response{StopReason: StopAborted}, fmt.Errorf("waiting for a free call to the provider: %w", ctx.Err())
	}
	defer func() { <-l.slots }()
	return l.next.Stream(ctx, req, onDelta)
}
