// Package stalltest fakes, at the wire, a model provider that stalls, for
// the tests that show every stalled call ends by its deadline. The servers
// speak OpenAI's streaming Chat Completions format.
package stalltest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
)

// Way is how a server stalls.
type Way string

const (
	// NeverAnswers accepts the request and sends nothing, not even
	// headers.
	NeverAnswers Way = "never answers"
	// HeadersOnly sends 200 and its headers, then no chunk.
	HeadersOnly Way = "headers and no chunk"
	// StopsMidStream sends the first chunk (the role, no text) and stops.
	StopsMidStream Way = "stops mid-stream"
	// Drips sends one byte at every DripEvery, never a whole event.
	Drips Way = "drips one byte at a time"
)

// Ways are every way a Server stalls.
var Ways = []Way{NeverAnswers, HeadersOnly, StopsMidStream, Drips}

// Timeouts is t as a test of way uses it. For Drips, the idle deadline is
// put past the total one: the drips are to keep the idle deadline from
// firing, so that the total deadline ends the call, and on a loaded
// machine a drip can come later than a short idle deadline.
func Timeouts(way Way, t llm.Timeouts) llm.Timeouts {
	if way == Drips {
		t.Idle = 10 * t.Total
	}
	return t
}

// Server is a provider's fake that answers as its Way says (or with Reply).
type Server struct {
	*httptest.Server
	requests atomic.Int64
}

// Requests counts the requests the server got.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// URL of the API, as a provider's base_url.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Stall starts a server that stalls every request its way; a dripping one
// drips a byte every dripEvery. Handlers end when the client hangs up or
// the test ends.
func Stall(t testing.TB, way Way, dripEvery time.Duration) *Server {
	s := &Server{}
	done := make(chan struct{})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		wait := func(d time.Duration) bool {
			if d <= 0 {
				select {
				case <-r.Context().Done():
				case <-done:
				}
				return false
			}
			select {
			case <-r.Context().Done():
				return false
			case <-done:
				return false
			case <-time.After(d):
				return true
			}
		}
		if way == NeverAnswers {
			wait(0)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		flush(w)
		switch way {
		case StopsMidStream:
			fmt.Fprint(w, chunk(`{"role":"assistant","content":""}`, "null")+"\n\n")
			flush(w)
		case Drips:
			// A comment line that never ends: bytes keep coming, no event
			// is ever whole.
			for wait(dripEvery) {
				fmt.Fprint(w, ":")
				flush(w)
			}
			return
		}
		wait(0)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(done) })
	return s
}

// Reply starts a server that answers every request with text, streamed.
func Reply(t testing.TB, text string) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		var b strings.Builder
		b.WriteString(chunk(`{"role":"assistant","content":""}`, "null") + "\n\n")
		b.WriteString(chunk(fmt.Sprintf(`{"content":%q}`, text), "null") + "\n\n")
		b.WriteString(chunk(`{}`, `"stop"`) + "\n\n")
		b.WriteString("data: [DONE]\n\n")
		fmt.Fprint(w, b.String())
	}))
	t.Cleanup(s.Close)
	return s
}

// NoHandshake listens for TCP and never speaks TLS: an https:// URL to it
// connects and never finishes connecting. It returns that URL.
func NoHandshake(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, silent
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-accepted
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + ln.Addr().String() + "/v1"
}

func chunk(delta, finish string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":` + finish + `}]}`
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
