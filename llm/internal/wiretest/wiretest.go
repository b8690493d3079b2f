// Package wiretest fakes a provider at the HTTP wire for the providers'
// tests: each request gets the next scripted Step, and every request is
// recorded so a test can check what the SDK sent.
package wiretest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// Step answers one request.
type Step func(w http.ResponseWriter, r *http.Request)

// Request is what the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, r.Body)
	}
	return m
}

// Server is an httptest server playing Steps in order.
type Server struct {
	*httptest.Server
	t     testing.TB
	mu    sync.Mutex
	steps []Step
	reqs  []Request
}

// NewServer starts a server that answers the i-th request with steps[i]
// and fails the test on any request beyond them. It is closed at cleanup.
func NewServer(t testing.TB, steps ...Step) *Server {
	s := &Server{t: t, steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("read request body: %v", err)
	}
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var step Step
	if n < len(s.steps) {
		step = s.steps[n]
	}
	s.mu.Unlock()
	if step == nil {
		s.t.Errorf("unexpected request #%d: %s %s", n+1, r.Method, r.URL.Path)
		http.Error(w, "unexpected request", http.StatusTeapot)
		return
	}
	step(w, r)
}

// Requests returns what the server has received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// SSE writes text/event-stream frames, flushing after each. A frame is
// everything before its blank line, e.g. "event: x\ndata: {...}".
func SSE(frames ...string) Step {
	return func(w http.ResponseWriter, r *http.Request) {
		WriteSSEHeader(w)
		WriteFrames(w, frames...)
	}
}

// SSEThenBlock writes frames, then holds the response open until the client
// goes away, like a model that is still thinking.
func SSEThenBlock(frames ...string) Step {
	return func(w http.ResponseWriter, r *http.Request) {
		WriteSSEHeader(w)
		WriteFrames(w, frames...)
		<-r.Context().Done()
	}
}

// WriteSSEHeader starts an event-stream response.
func WriteSSEHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// WriteFrames writes and flushes each frame followed by a blank line.
func WriteFrames(w http.ResponseWriter, frames ...string) {
	f, _ := w.(http.Flusher)
	for _, fr := range frames {
		_, _ = io.WriteString(w, strings.TrimRight(fr, "\n")+"\n\n")
		if f != nil {
			f.Flush()
		}
	}
}

// Status answers with an HTTP error, a JSON body and extra headers given as
// "Name: value".
func Status(code int, body string, headers ...string) Step {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, h := range headers {
			k, v, _ := strings.Cut(h, ":")
			w.Header().Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// Data is an SSE frame with only a data line holding v as JSON.
func Data(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Not JSON, so the SDK under test fails loudly on it.
		return fmt.Sprintf("data: wiretest: marshal frame: %v", err)
	}
	return "data: " + string(b)
}

// Event is an SSE frame with an event line and v as JSON data.
func Event(name string, v any) string {
	return "event: " + name + "\n" + Data(v)
}

// Raw answers 200 with body exactly as given (a recorded transcript) and
// the Content-Type given, flushing once at the end.
func Raw(contentType string, body []byte) Step {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}
}

// File is Raw with a testdata file's contents; the test fails if it can't
// be read.
func File(t testing.TB, contentType, path string) Step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read transcript: %v", err)
	}
	return Raw(contentType, b)
}

// NewLoop starts a server that answers every request with step, for
// benchmarks. It records nothing. It is closed at cleanup.
func NewLoop(tb testing.TB, step Step) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		step(w, r)
	}))
	tb.Cleanup(s.Close)
	return s
}
