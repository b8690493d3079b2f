// Package sleep waits for a time or for a context to end, whichever comes
// first.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends; then the error is ctx's.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
