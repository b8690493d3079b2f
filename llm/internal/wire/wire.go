// Package wire holds the HTTP details the providers share.
package wire

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/llm"
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
// It has no overall timeout: Client puts each call's deadlines on it.
var DefaultClient = &http.Client{Transport: defaultTransport()}

// Endpoint is path under base, or under def when base is empty, without
// the base's trailing slashes.
func Endpoint(base, def, path string) string {
	if base == "" {
		base = def
	}
	return strings.TrimRight(base, "/") + path
}

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

// StatusError reads provider's HTTP error response: its status, the wait
// it asks for and its message. parse reads the code and message of a body
// in the provider's shape; a body in another shape (a proxy's HTML page) is
// kept as a short snippet. secret is redacted from the message, and an
// empty message is the status's text.
func StatusError(provider string, res *http.Response, secret string, parse func(raw []byte) (code, message string, ok bool)) *llm.StatusError {
	raw := ReadErrorBody(res.Body)
	se := &llm.StatusError{
		Provider:   provider,
		StatusCode: res.StatusCode,
		RetryAfter: RetryAfter(res.Header, time.Now()),
	}
	if code, message, ok := parse(raw); ok {
		se.Code, se.Message = code, Redact(message, secret)
	} else {
		se.Message = Redact(Snippet(raw), secret)
	}
	if se.Message == "" {
		se.Message = http.StatusText(res.StatusCode)
	}
	return se
}

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

// finishWait is how long Finish waits for a finished stream's body to end.
const finishWait = 100 * time.Millisecond

// Finish closes the body of a stream whose last event was read. It first
// reads on to the body's end, which a server sends right after that event,
// so the transport keeps the connection for the next call: a close before
// the end closes the connection too, and a burst of calls then opens new
// ones. A server that holds the response open past its last event is cut
// after finishWait, so it can't hold the call.
func Finish(body io.ReadCloser) {
	cut := time.AfterFunc(finishWait, func() { _ = body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	cut.Stop()
	_ = body.Close()
}

// End closes a stream's body as Finish does if *finished says the stream
// ended cleanly, and at once otherwise: a stream that failed must not
// hold the call. Defer it with the flag the stream's reading sets.
func End(body io.ReadCloser, finished *bool) {
	if *finished {
		Finish(body)
		return
	}
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

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string. It escapes what JSON
// requires (quotes, backslashes, control characters) and U+2028/U+2029,
// and replaces invalid UTF-8 with U+FFFD, as encoding/json does; unlike
// encoding/json it leaves <, > and & as they are. The providers build
// their request bodies with it: a turn's request carries the whole history,
// and encoding it by reflection cost more CPU than the rest of the call.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// bodyPool recycles request bodies: a turn's body holds the whole history,
// and allocating it afresh each call made the garbage collector run more
// often than everything else the call does.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// Body returns an empty buffer with at least n bytes of room, to fill and
// pass to NewBody.
func Body(n int) []byte {
	p := bodyPool.Get().(*[]byte)
	b := (*p)[:0]
	if cap(b) < n {
		b = make([]byte, 0, n)
	}
	return b
}

// NewBody wraps b as a request body that goes back to the pool when the
// HTTP transport closes it (which it does once it has written it, or
// failed to). Set the request's ContentLength to len(b).
func NewBody(b []byte) io.ReadCloser {
	return &pooledBody{Reader: bytes.NewReader(b), b: b}
}

type pooledBody struct {
	*bytes.Reader
	b    []byte
	once sync.Once
}

func (p *pooledBody) Close() error {
	p.once.Do(func() {
		if cap(p.b) <= 1<<20 { // don't keep an outsized one
			b := p.b[:0]
			bodyPool.Put(&b)
		}
	})
	return nil
}
