// Package wire holds the HTTP details the providers share.
package wire

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter reads the wait a provider asked for: retry-after-ms
// (milliseconds, OpenAI and Anthropic), then Retry-After (seconds or an HTTP
// date). It returns 0 when neither is present or parseable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// Redact removes secret from s, so a provider message that echoes the API
// key never reaches an error string.
func Redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// DefaultClient is the providers' HTTP client when the config gives none.
// Unlike http.DefaultClient it keeps up to 64 idle connections per host
// (net/http's default is 2): a burst of chats talking to one provider
// otherwise opens, and tears down, a connection per call beyond the second.
// It has no overall timeout, since a stream lasts as long as the model
// writes; the caller's context ends a call.
var DefaultClient = &http.Client{Transport: defaultTransport()}

func defaultTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}

// MaxErrorBody is how much of an error response is read.
const MaxErrorBody = 64 << 10

// ReadErrorBody reads (a bounded part of) an error response's body.
func ReadErrorBody(body io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(body, MaxErrorBody))
	return b
}

// Drain reads what is left of a response body (up to a bound) and closes
// it, so its connection goes back to the pool instead of being closed.
func Drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// Snippet is a short, single-line excerpt of a body that is not the
// provider's JSON (an HTML page from a proxy, a plain-text error), for an
// error message.
func Snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
