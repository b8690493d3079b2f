package httpserve

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Below debug level the access log costs nothing: the handler is the
// server's own; and a streamed response can still flush through it.
func TestAccessLogOnlyAtDebug(t *testing.T) {
	mux := http.NewServeMux()
	if got := AccessLog(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), mux); got != http.Handler(mux) {
		t.Fatalf("at info, AccessLog wrapped the handler: %T", got)
	}
	var buf bytes.Buffer
	h := AccessLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			t.Error("the access log's writer can't flush: server-sent events would stall")
			return
		}
		_, _ = w.Write([]byte("data: x\n\n"))
		f.Flush()
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sessions/s/events?token=abc", nil))
	if !rec.Flushed || !strings.Contains(buf.String(), "path=/v1/sessions/s/events status=200") || strings.Contains(buf.String(), "abc") {
		t.Fatalf("flushed %v, log %q", rec.Flushed, buf.String())
	}
}
