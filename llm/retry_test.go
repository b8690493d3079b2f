package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// fakeModel answers call i with steps[i].
type fakeModel struct {
	steps []func(onDelta func(Delta)) (Response, error)
	calls int
}

func (f *fakeModel) Stream(_ context.Context, _ Request, onDelta func(Delta)) (Response, error) {
	i := f.calls
	f.calls++
	if i >= len(f.steps) {
		return Response{}, errors.New("fakeModel: unexpected call")
	}
	return f.steps[i](onDelta)
}

func fail(err error) func(func(Delta)) (Response, error) {
	return func(func(Delta)) (Response, error) { return Response{}, err }
}

func succeed(text string) func(func(Delta)) (Response, error) {
	return func(onDelta func(Delta)) (Response, error) {
		onDelta(Delta{Text: text})
		return Response{Text: text}, nil
	}
}

type retryLog struct {
	attempts []int
	waits    []time.Duration
}

func (l *retryLog) policy(p RetryPolicy) RetryPolicy {
	p.OnRetry = func(_ context.Context, attempt int, _ error, wait time.Duration) {
		l.attempts = append(l.attempts, attempt)
		l.waits = append(l.waits, wait)
	}
	if p.Sleep == nil {
		p.Sleep = func(context.Context, time.Duration) error { return nil }
	}
	return p
}

func TestWithRetry(t *testing.T) {
	s500 := &StatusError{Provider: "fake", StatusCode: 500}
	s429 := &StatusError{Provider: "fake", StatusCode: 429, RetryAfter: 5 * time.Second}
	s400 := &StatusError{Provider: "fake", StatusCode: 400}
	tests := []struct {
		name         string
		steps        []func(func(Delta)) (Response, error)
		policy       RetryPolicy
		wantText     string
		wantErr      error // errors.Is target; nil means success
		wantCalls    int
		wantAttempts []int
	}{
		{"first try succeeds", nil, RetryPolicy{}, "ok", nil, 1, nil},
		{"two 500s then success", []func(func(Delta)) (Response, error){fail(s500), fail(s500)}, RetryPolicy{}, "ok", nil, 3, []int{1, 2}},
		{"transport error retried", []func(func(Delta)) (Response, error){fail(io.ErrUnexpectedEOF)}, RetryPolicy{}, "ok", nil, 2, []int{1}},
		{"400 not retried", []func(func(Delta)) (Response, error){fail(s400)}, RetryPolicy{}, "", s400, 1, nil},
		{"context length not retried", []func(func(Delta)) (Response, error){fail(fmt.Errorf("%w: %w", ErrContextLength, &StatusError{StatusCode: 400}))}, RetryPolicy{}, "", ErrContextLength, 1, nil},
		{"canceled not retried", []func(func(Delta)) (Response, error){fail(context.Canceled)}, RetryPolicy{}, "", context.Canceled, 1, nil},
		{"gives up after MaxAttempts", []func(func(Delta)) (Response, error){fail(s500), fail(s500), fail(s500), fail(s500)}, RetryPolicy{MaxAttempts: 3}, "", s500, 3, []int{1, 2}},
		{"retry-after beyond MaxRetryAfter", []func(func(Delta)) (Response, error){fail(s429)}, RetryPolicy{MaxRetryAfter: time.Second}, "", s429, 1, nil},
		{"not after streaming", []func(func(Delta)) (Response, error){func(onDelta func(Delta)) (Response, error) {
			onDelta(Delta{Text: "par"})
			return Response{Text: "par"}, s500
		}}, RetryPolicy{}, "par", s500, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeModel{steps: append(tc.steps, succeed("ok"))}
			var log retryLog
			var streamed string
			resp, err := WithRetry(f, log.policy(tc.policy)).Stream(context.Background(), Request{}, func(d Delta) { streamed += d.Text })
			if tc.wantErr == nil && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if resp.Text != tc.wantText || streamed != tc.wantText {
				t.Errorf("text = %q, streamed %q, want %q", resp.Text, streamed, tc.wantText)
			}
			if f.calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", f.calls, tc.wantCalls)
			}
			if fmt.Sprint(log.attempts) != fmt.Sprint(tc.wantAttempts) {
				t.Errorf("OnRetry attempts = %v, want %v", log.attempts, tc.wantAttempts)
			}
		})
	}
}

func TestWithRetryExhaustedStillUnwraps(t *testing.T) {
	s := &StatusError{Provider: "fake", StatusCode: 503}
	f := &fakeModel{steps: []func(func(Delta)) (Response, error){fail(s), fail(s), fail(s)}}
	var log retryLog
	_, err := WithRetry(f, log.policy(RetryPolicy{})).Stream(context.Background(), Request{}, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 || f.calls != 3 {
		t.Errorf("err = %v after %d calls", err, f.calls)
	}
}

func TestWithRetryHonoursRetryAfter(t *testing.T) {
	s := &StatusError{Provider: "fake", StatusCode: 429, RetryAfter: 9 * time.Second}
	f := &fakeModel{steps: []func(func(Delta)) (Response, error){fail(s), succeed("ok")}}
	var log retryLog
	if _, err := WithRetry(f, log.policy(RetryPolicy{Base: time.Millisecond})).Stream(context.Background(), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.waits) != 1 || log.waits[0] != 9*time.Second {
		t.Errorf("waits = %v, want [9s]", log.waits)
	}
}

func TestWithRetryCancelledWhileWaiting(t *testing.T) {
	s := &StatusError{Provider: "fake", StatusCode: 500}
	f := &fakeModel{steps: []func(func(Delta)) (Response, error){fail(s), succeed("never")}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := RetryPolicy{
		Base:    time.Hour, // the default Sleep must give up on ctx, not wait this out
		OnRetry: func(context.Context, int, error, time.Duration) { cancel() },
	}
	done := make(chan error, 1)
	go func() {
		_, err := WithRetry(f, p).Stream(ctx, Request{}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		var se *StatusError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &se) {
			t.Errorf("err = %v, want both context.Canceled and the StatusError", err)
		}
		if f.calls != 1 {
			t.Errorf("calls = %d", f.calls)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("retry wait ignored ctx")
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{Base: 100 * time.Millisecond, Max: time.Second}.withDefaults()
	tests := []struct {
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 0, 200 * time.Millisecond, 400 * time.Millisecond},
		{10, 0, 500 * time.Millisecond, time.Second},
		{100, 0, 500 * time.Millisecond, time.Second},
		{1, 3 * time.Second, 3 * time.Second, 3 * time.Second},
	}
	for _, tc := range tests {
		for range 50 {
			d, ok := p.backoff(tc.attempt, tc.retryAfter)
			if !ok || d < tc.lo || d > tc.hi {
				t.Fatalf("backoff(%d, %v) = %v, %v; want within [%v, %v]", tc.attempt, tc.retryAfter, d, ok, tc.lo, tc.hi)
			}
		}
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&StatusError{StatusCode: 429}, true},
		{&StatusError{StatusCode: 500}, true},
		{&StatusError{StatusCode: 503}, true},
		{&StatusError{StatusCode: 529}, true},
		{&StatusError{StatusCode: 408}, true},
		{&StatusError{StatusCode: 400}, false},
		{&StatusError{StatusCode: 401}, false},
		{fmt.Errorf("%w: %w", ErrContextLength, &StatusError{StatusCode: 400}), false},
		{fmt.Errorf("wrapped: %w", &StatusError{StatusCode: 502}), true},
		{fmt.Errorf("x: %w", ErrIncompleteStream), true},
		{context.Canceled, false},
		{fmt.Errorf("stream: %w", context.Canceled), false},
		{errors.New("some bug"), false},
	}
	for _, tc := range tests {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestStatusErrorString(t *testing.T) {
	e := &StatusError{Provider: "anthropic", StatusCode: 529, Message: "Overloaded", RetryAfter: 2 * time.Second}
	if got := e.Error(); got != "anthropic: 529 Overloaded: Overloaded (retry after 2s)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestUsageTotal(t *testing.T) {
	u := Usage{Input: 1, Output: 2, Reasoning: 3, CacheRead: 4, CacheWrite: 5}
	if u.Total() != 15 || u.Add(u).Total() != 30 {
		t.Errorf("Total = %d, doubled %d", u.Total(), u.Add(u).Total())
	}
}
