package wire

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/llm"
)

// Client is c (or DefaultClient when c is nil) with t's deadlines on every
// call it makes for provider: zero fields of t are llm.DefaultTimeouts',
// and a call's own (llm.WithCallTimeouts) override them. A call that
// passes one fails with an *llm.TimeoutError, which is retryable, however
// the server stalled: never answering, sending headers and no body,
// stopping mid-stream or dripping bytes.
func Client(c *http.Client, provider string, t llm.Timeouts) *http.Client {
	if c == nil {
		c = DefaultClient
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out := *c
	out.Transport = &deadlines{next: next, provider: provider, t: t.Or(llm.DefaultTimeouts)}
	return &out
}

// deadlines is a RoundTripper that bounds each phase of a call.
type deadlines struct {
	next     http.RoundTripper
	provider string
	t        llm.Timeouts
}

func (d *deadlines) RoundTrip(req *http.Request) (*http.Response, error) {
	t := llm.CallTimeouts(req.Context()).Or(d.t)
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{provider: d.provider, t: t, cancel: cancel, start: time.Now()}
	w.begin()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { w.connected() },
	})
	res, err := d.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		w.end()
		te := w.expired()
		cancel(nil)
		if te != nil {
			return nil, te
		}
		return nil, err
	}
	res.Body = &watchedBody{ReadCloser: res.Body, w: w}
	return res, nil
}

// watch is one call's deadlines: a timer for the phase it is in
// (connect, first byte, idle) and one for the whole call. When one fires,
// the call's context is cancelled with the *llm.TimeoutError as its cause.
type watch struct {
	provider string
	t        llm.Timeouts
	cancel   context.CancelCauseFunc
	start    time.Time
	// lastRead is when the body last gave bytes, since start; reads only
	// store it, and the idle timer checks it when it fires.
	lastRead atomic.Int64
	// streaming is set once the body gave its first bytes.
	streaming atomic.Bool

	mu    sync.Mutex
	phase llm.TimeoutPhase
	timer *time.Timer // the phase's
	total *time.Timer
	err   *llm.TimeoutError
	done  bool
}

func (w *watch) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase = llm.PhaseConnect
	w.timer = time.AfterFunc(w.t.Connect, w.phaseExpired)
	w.total = time.AfterFunc(w.t.Total, func() { w.fire(llm.PhaseTotal, w.t.Total) })
}

// connected moves from connecting to waiting for the first byte.
func (w *watch) connected() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.err != nil || w.phase != llm.PhaseConnect {
		return
	}
	w.phase = llm.PhaseFirstByte
	w.timer.Reset(w.t.FirstByte)
}

// read notes bytes read from the body.
func (w *watch) read() {
	w.lastRead.Store(int64(time.Since(w.start)))
	if w.streaming.Load() {
		return
	}
	w.streaming.Store(true)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.err != nil || w.phase == llm.PhaseIdle {
		return
	}
	w.phase = llm.PhaseIdle
	w.timer.Reset(w.t.Idle)
}

// phaseExpired runs when the phase timer fires. In the idle phase a read
// since it was set moves it on instead.
func (w *watch) phaseExpired() {
	w.mu.Lock()
	phase, limit := w.phase, w.limit()
	if phase == llm.PhaseIdle && !w.done {
		quiet := time.Since(w.start) - time.Duration(w.lastRead.Load())
		if quiet < limit {
			w.timer.Reset(limit - quiet)
			w.mu.Unlock()
			return
		}
	}
	w.mu.Unlock()
	w.fire(phase, limit)
}

func (w *watch) limit() time.Duration {
	switch w.phase {
	case llm.PhaseConnect:
		return w.t.Connect
	case llm.PhaseFirstByte:
		return w.t.FirstByte
	}
	return w.t.Idle
}

func (w *watch) fire(phase llm.TimeoutPhase, after time.Duration) {
	w.mu.Lock()
	if w.done || w.err != nil {
		w.mu.Unlock()
		return
	}
	w.err = &llm.TimeoutError{Provider: w.provider, Phase: phase, After: after}
	err := w.err
	w.mu.Unlock()
	w.cancel(err)
}

// expired is the deadline the call passed, or nil.
func (w *watch) expired() *llm.TimeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// end stops the timers; the call is over.
func (w *watch) end() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.total.Stop()
	w.mu.Unlock()
}

// watchedBody is a response body under its call's deadlines: an error
// after one passed is the *llm.TimeoutError.
type watchedBody struct {
	io.ReadCloser
	w *watch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.read()
	}
	if err != nil && err != io.EOF {
		if te := b.w.expired(); te != nil {
			return n, te
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.w.end()
	b.w.cancel(nil)
	return err
}
