package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	if err := For(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("For a millisecond: %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("For with an ended context: %v, want context.Canceled", err)
	}
}
