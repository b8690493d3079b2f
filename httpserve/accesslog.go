package httpserve

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// AccessLog logs each request the daemon's HTTP server answers, at debug
// level: its method, its path (never the query, which may carry a token),
// the status and how long it took. Headers, which carry tokens and
// signatures, are never logged. Below debug level it is h itself.
func AccessLog(log *slog.Logger, h http.Handler) http.Handler {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			log.DebugContext(r.Context(), "http request", "method", r.Method, "path", r.URL.Path,
				"status", rec.statusCode(), "duration", time.Since(start))
		}()
		h.ServeHTTP(rec, r)
	})
}

// statusRecorder remembers the status a handler wrote. It flushes (server-
// sent events need it) and unwraps for http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) statusCode() int {
	if s.status == 0 {
		return http.StatusOK // nothing written: net/http answers 200
	}
	return s.status
}
