package telemetry

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Inject writes ctx's span as a W3C traceparent header (and tracestate)
// into h; nothing when ctx has none.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Transport is base that sends each request's span, from its context, as
// its traceparent header: the server it calls can put its spans under it.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		r = r.Clone(r.Context()) // a RoundTripper leaves its request as it came
		Inject(r.Context(), r.Header)
	}
	return t.base.RoundTrip(r)
}

// Serve is h with a server span around each request whose path begins
// with one of prefixes (the API, the webhooks), under the caller's span
// when its traceparent header names one. With tracing off it is h.
func (t *Tracer) Serve(h http.Handler, prefixes ...string) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traced := false
		for _, p := range prefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				traced = true
				break
			}
		}
		if !traced {
			h.ServeHTTP(w, r)
			return
		}
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.Root(ctx, Parent{sc: trace.SpanContextFromContext(ctx)}, "HTTP "+r.Method, KindServer, time.Time{})
		defer span.End()
		span.Str("http.request.method", r.Method)
		span.Str("url.path", r.URL.Path)
		rec := &statusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		h.ServeHTTP(rec, r)
		if r.Pattern != "" {
			span.Str("http.route", r.Pattern)
			if span.s != nil {
				span.s.SetName(r.Pattern)
			}
		}
		span.Int("http.response.status_code", int64(rec.code()))
	})
}

// statusWriter remembers the status a handler wrote. It flushes (event
// streams need it) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}
