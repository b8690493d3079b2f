package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// ErrDeadlinePassed means a request to a platform was not written because
// its context's deadline had passed: nothing of it reached the platform.
var ErrDeadlinePassed = errors.New("the request's deadline passed before it was written; nothing was sent")

// FenceWrites marks ctx's deadline as a fence: a request made with it
// through GuardDeadline is never written once the deadline has passed.
// The sender marks a send bounded by the replica's lease; other requests
// go unguarded, which spares them the guard's cost (net/http writes a
// guarded request's head and body in two writes, not one).
func FenceWrites(ctx context.Context) context.Context {
	return context.WithValue(ctx, fenceKey{}, true)
}

type fenceKey struct{}

// GuardDeadline wraps base so that a request made with a context marked
// by FenceWrites is never written once the context's deadline has passed. net/http checks a context before it
// dials, not as the request's bytes go out, so a process paused between
// the two (SIGSTOP, a frozen VM) would send on waking, late: for a reply
// whose deadline is this replica's lease, after a survivor has taken it
// over and sent it. The guard reads the clock as the transport reads the
// request's body, just before its bytes leave, and ends the request there:
// the request's head may have gone ahead, but a platform acts on no
// request whose body never came (every send carries its parameters in the
// body). A request without a body is checked as it is handed to base.
//
// It narrows the window to the instant between that read and the write;
// a platform with no idempotency key leaves no way to close it whole.
func GuardDeadline(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return deadlineGuard{base}
}

type deadlineGuard struct{ base http.RoundTripper }

func (g deadlineGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	deadline, ok := req.Context().Deadline()
	if !ok || req.Context().Value(fenceKey{}) == nil {
		return g.base.RoundTrip(req)
	}
	if !time.Now().Before(deadline) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrDeadlinePassed)
	}
	if req.Body == nil || req.Body == http.NoBody {
		return g.base.RoundTrip(req)
	}
	refused := new(atomic.Bool)
	r := req.Clone(req.Context())
	r.Body = &guardedBody{ReadCloser: req.Body, deadline: deadline, refused: refused}
	if get := req.GetBody; get != nil {
		// A retry on a fresh connection reads the body again: guarded too.
		r.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil {
				return nil, err
			}
			return &guardedBody{ReadCloser: b, deadline: deadline, refused: refused}, nil
		}
	}
	resp, err := g.base.RoundTrip(r)
	if err != nil && refused.Load() {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrDeadlinePassed)
	}
	return resp, err
}

// guardedBody refuses to be read once the deadline has passed, before the
// first byte of it is handed to the connection.
type guardedBody struct {
	io.ReadCloser
	deadline time.Time
	started  bool
	refused  *atomic.Bool // set by the transport's writer, read by RoundTrip
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if !b.started {
		if !time.Now().Before(b.deadline) {
			b.refused.Store(true)
			return 0, ErrDeadlinePassed
		}
		b.started = true
	}
	return b.ReadCloser.Read(p)
}
