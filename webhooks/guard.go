package webhooks

import (
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/config"
)

// Anyone can reach a hook, so what a request costs before it proves who
// sent it is bounded: everything the headers can refuse is refused before
// the body is read, a body must arrive within BodyTimeout, and each hook
// reads at most MaxPendingBodies bodies it can't yet check at once.
const (
	// DefaultBodyTimeout is how long a hook waits for a request's body.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultMaxPendingBodies is how many bodies one hook reads at once
	// before their signatures can be checked.
	DefaultMaxPendingBodies = 64
	// busyRetryAfter is the Retry-After of a 429.
	busyRetryAfter = "1"
	// drainGrace is how long the unread body of a refused request may
	// still be read before its connection is closed.
	drainGrace = 100 * time.Millisecond
)

// notFound answers an unknown hook and a known hook asked with the wrong
// method alike, so which hook ids exist can't be learnt from the answers.
func notFound() *apiError {
	return fail(http.StatusNotFound, "not_found", "no webhook here takes this request; send POST /hooks/<id> with a hook id from the config")
}

// checkHeaders refuses, from the headers alone, a request that can't pass
// h's auth: a token hook's token is checked in full; a signed hook's
// request needs its signature header, and an hmac one a fresh timestamp.
func (s *Server) checkHeaders(h config.Hook, hdr http.Header) *apiError {
	switch h.Auth {
	case "token":
		return checkToken(hdr, []byte(h.Secret.Reveal()))
	case "github":
		if _, ok := decodeSignature(hdr.Get("X-Hub-Signature-256")); !ok {
			return fail(http.StatusUnauthorized, "unauthorized", "X-Hub-Signature-256 is missing or doesn't match the body; check the hook's secret")
		}
	default: // hmac
		_, sig, e := s.hmacHeaders(hdr)
		if e != nil {
			return e
		}
		if _, ok := decodeSignature(sig); !ok {
			return fail(http.StatusUnauthorized, "unauthorized", "X-Parley-Signature doesn't match; sign timestamp + \".\" + body with the hook's secret")
		}
	}
	return nil
}

// checkToken refuses a token hook's request without the hook's secret.
func checkToken(hdr http.Header, secret []byte) *apiError {
	got, ok := strings.CutPrefix(hdr.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), secret) != 1 {
		return fail(http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer with the hook's secret")
	}
	return nil
}

// hmacHeaders are an hmac hook's request's timestamp and signature, both
// present, the timestamp within ReplayWindow of now.
func (s *Server) hmacHeaders(hdr http.Header) (ts, sig string, _ *apiError) {
	ts, sig = hdr.Get("X-Parley-Timestamp"), hdr.Get("X-Parley-Signature")
	if ts == "" || sig == "" {
		return "", "", fail(http.StatusUnauthorized, "unauthorized", "send X-Parley-Timestamp (Unix seconds) and X-Parley-Signature: sha256=hex(HMAC-SHA256(secret, timestamp + \".\" + body))")
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", "", fail(http.StatusUnauthorized, "unauthorized", "X-Parley-Timestamp must be Unix seconds")
	}
	if d := s.opts.Now().Sub(time.Unix(secs, 0)); d > ReplayWindow || d < -ReplayWindow {
		return "", "", fail(http.StatusUnauthorized, "stale", "X-Parley-Timestamp is more than 5 minutes from now; sign each request when you send it")
	}
	return ts, sig, nil
}

// readBody reads a request's body, at most MaxBody bytes. A body whose
// sender is not yet known (a signed hook's) takes one of the hook's
// pending-body slots while it is read; with none free, the request is
// refused at once.
func (s *Server) readBody(h config.Hook, r *http.Request) ([]byte, *apiError) {
	tooBig := fail(http.StatusRequestEntityTooLarge, "body_too_large", "the body is over %d bytes (1 MiB)", MaxBody)
	if r.ContentLength > MaxBody {
		return nil, tooBig
	}
	if e := s.checkHeaders(h, r.Header); e != nil {
		return nil, e
	}
	if h.Auth != "token" {
		slots := s.pendingSlots(h.ID)
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			return nil, fail(http.StatusTooManyRequests, "too_many_requests", "this hook is reading too many requests at once; try again in a second")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBody))
	if err != nil {
		var over *http.MaxBytesError
		if errors.As(err, &over) {
			return nil, tooBig
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fail(http.StatusRequestTimeout, "body_timeout", "the body did not arrive within %s; send it at once", s.opts.BodyTimeout)
		}
		return nil, fail(http.StatusBadRequest, "bad_body", "could not read the body: %v", err)
	}
	return body, nil
}

// pendingSlots is hook id's semaphore of pending body reads.
func (s *Server) pendingSlots(id string) chan struct{} {
	s.slotsMu.Lock()
	defer s.slotsMu.Unlock()
	if s.slots == nil {
		s.slots = map[string]chan struct{}{}
	}
	c, ok := s.slots[id]
	if !ok {
		c = make(chan struct{}, s.opts.MaxPendingBodies)
		s.slots[id] = c
	}
	return c
}

// trackedBody notes whether a request's body was read to its end.
type trackedBody struct {
	io.ReadCloser
	done bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// guard bounds the body's read with BodyTimeout, and returns what to do
// before answering: a body left unread (a request refused before it) is
// not waited for, and its connection is closed after the answer, so a
// slow sender holds nothing.
//
// The body is tracked on a copy of r, which the handler gets: the server
// looks at the original's body to know what is left of it.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	// Without a body there is nothing to bound (and a deadline would end
	// the connection's wait for the client to go away).
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	// Cleared by the server once the body is read to its end.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	tb := &trackedBody{ReadCloser: r.Body}
	r2 := r.WithContext(r.Context())
	r2.Body = tb
	return r2, func() {
		// Too large: the server itself closes such a connection, after
		// giving the sender time to read the answer.
		if !tb.done && r.ContentLength <= MaxBody {
			w.Header().Set("Connection", "close")
			// What has already arrived is still read (briefly), so the
			// close doesn't reset the connection under a sender that is
			// reading its answer.
			_ = rc.SetReadDeadline(time.Now().Add(drainGrace))
		}
	}
}
