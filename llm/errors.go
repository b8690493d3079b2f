package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// ErrContextLength is wrapped when the provider says the prompt does not fit
// the model's context window. Retrying the same request cannot help:
// compact the history first.
var ErrContextLength = errors.New("prompt exceeds the model's context window")

// ErrIncompleteStream is wrapped when a stream ended without the provider's
// end-of-message marker. It wraps io.ErrUnexpectedEOF, so it is retryable.
var ErrIncompleteStream = fmt.Errorf("stream ended before the message was complete: %w", io.ErrUnexpectedEOF)

// StatusError is an error the provider answered with.
type StatusError struct {
	Provider string // "openai", "anthropic", ...
	// StatusCode is the HTTP status, or the equivalent status for an error
	// event sent mid-stream (e.g. 529 for Anthropic's overloaded_error).
	StatusCode int
	// RetryAfter is what the provider asked us to wait (Retry-After,
	// retry-after-ms); 0 when it did not say.
	RetryAfter time.Duration
	// Code is the provider's machine-readable error code or type, e.g.
	// "rate_limit_exceeded" or "overloaded_error".
	Code string
	// Message is the provider's error message, with the API key redacted.
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: %d", e.Provider, e.StatusCode)
	if text := statusText(e.StatusCode); text != "" {
		s += " " + text
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

func statusText(code int) string {
	if code == 529 {
		return "Overloaded"
	}
	return http.StatusText(code)
}

// Retryable reports whether trying the same request again may succeed:
// 408, 429, 5xx (including Anthropic's 529 overloaded), and transport errors
// (connection refused or reset, a stream cut short) that are not context
// cancellation, and a call that passed one of its deadlines
// (*TimeoutError). A context-length error is never retryable.
func Retryable(err error) bool {
	var te *TimeoutError
	if errors.As(err, &te) {
		return true
	}
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrContextLength) {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode == http.StatusRequestTimeout ||
			se.StatusCode == http.StatusTooManyRequests ||
			se.StatusCode >= 500
	}
	var (
		netErr net.Error
		urlErr *url.Error
	)
	return errors.As(err, &netErr) ||
		errors.As(err, &urlErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE)
}

// RetryAfter is the wait the provider asked for in err, or 0.
func RetryAfter(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

// ErrNotConfigured is wrapped when a model's provider has no API key (nor a
// base_url) in the config: the turn fails and the chat is told the
// assistant isn't configured, rather than answered by another model.
var ErrNotConfigured = errors.New("the model's provider is not configured")
