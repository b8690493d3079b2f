package llm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/parleyd/parley/internal/sleep"
)

// RetryPolicy says how [WithRetry] retries. The zero value is usable.
type RetryPolicy struct {
	// MaxAttempts counts the first try; default 3.
	MaxAttempts int
	// Base is the first backoff (default 1s); it doubles per attempt up to
	// Max (default 30s), with jitter. A larger RetryAfter from the provider
	// wins.
	Base, Max time.Duration
	// MaxRetryAfter is the longest provider-requested wait that is honoured
	// (default 2m). A longer one (e.g. a quota reset hours away) ends the
	// retries at once and returns the error, which carries RetryAfter.
	MaxRetryAfter time.Duration
	// OnRetry, if set, is told before each wait: attempt is the 1-based
	// attempt that failed with err, wait is how long until the next one.
	OnRetry func(ctx context.Context, attempt int, err error, wait time.Duration)
	// Sleep waits d or until ctx ends; injectable for tests. The default
	// waits on a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.Base <= 0 {
		p.Base = time.Second
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Max < p.Base {
		p.Max = p.Base
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 2 * time.Minute
	}
	if p.Sleep == nil {
		p.Sleep = sleep.For
	}
	return p
}

// WithRetry returns a Model that retries m on [Retryable] errors. An attempt
// is retried only if it streamed nothing to onDelta: retrying after partial
// text would show that text twice, so such an error is returned as it is.
// When the attempts run out, the last error is returned wrapped, so
// errors.As still finds the *StatusError.
func WithRetry(m Model, p RetryPolicy) Model {
	return &retryModel{next: m, policy: p.withDefaults()}
}

type retryModel struct {
	next   Model
	policy RetryPolicy
}

func (r *retryModel) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	p := r.policy
	for attempt := 1; ; attempt++ {
		streamed := false
		resp, err := r.next.Stream(ctx, req, func(d Delta) {
			streamed = true
			if onDelta != nil {
				onDelta(d)
			}
		})
		if err == nil || streamed || !Retryable(err) || ctx.Err() != nil {
			return resp, err
		}
		if attempt >= p.MaxAttempts {
			return resp, fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		wait, ok := p.backoff(attempt, RetryAfter(err))
		if !ok {
			return resp, err
		}
		if p.OnRetry != nil {
			p.OnRetry(ctx, attempt, err, wait)
		}
		if serr := p.Sleep(ctx, wait); serr != nil {
			return resp, fmt.Errorf("waiting to retry: %w (after attempt %d: %w)", serr, attempt, err)
		}
	}
}

// backoff is the wait after the attempt-th failure: Base·2^(attempt-1)
// capped at Max, with equal jitter, or retryAfter when that is larger.
// ok is false when retryAfter is beyond MaxRetryAfter.
func (p RetryPolicy) backoff(attempt int, retryAfter time.Duration) (wait time.Duration, ok bool) {
	if retryAfter > p.MaxRetryAfter {
		return 0, false
	}
	d := p.Base
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter), true
}
