package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/parleyd/parley/client"

	"github.com/parleyd/parley/commands"
)

// `parley chat --server` does each command of the table, by its name and
// each alias, through the route the table names for it (and /help prints
// the table's help), against a fake of the API at the wire.
func TestRemoteChatRunsEveryCommand(t *testing.T) {
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/agent/reset":
			_, _ = w.Write([]byte(`{"session":{"id":"s1"}}`))
		case r.Method == "POST" && r.URL.Path == "/v1/sessions":
			_, _ = w.Write([]byte(`{"id":"s1"}`))
		case r.Method == "GET" && r.URL.Path == "/v1/sessions/s1/messages":
			_, _ = w.Write([]byte(`{"messages":[{"id":"m1","role":"user","content":"hi"},{"id":"m2","role":"assistant","content":"hello"}]}`))
		case r.Method == "POST" && r.URL.Path == "/v1/sessions/s1/messages":
			_, _ = w.Write([]byte(`{"run_id":"r1"}`))
		case r.Method == "GET" && r.URL.Path == "/v1/sessions/s1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"type\":\"turn.finished\",\"run_id\":\"r1\",\"data\":{}}\n\n"))
		case r.Method == "GET" && r.URL.Path == "/v1/sessions/s1/models":
			_, _ = w.Write([]byte(`{"models":["openai/gpt-x"],"model":"openai/gpt-x"}`))
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	for _, c := range commands.All {
		for _, name := range append([]string{c.Name}, c.Aliases...) {
			t.Run(name, func(t *testing.T) {
				mu.Lock()
				requests = nil
				mu.Unlock()
				// A command whose argument may be left out is given one, so
				// it does its work (a model to set, a thinking depth).
				line := "/" + name
				if sample, ok := map[string]string{"model": " openai/gpt-x", "think": " high", "voice": " on"}[c.Name]; ok {
					line += sample
				}
				var out strings.Builder
				if err := client.Chat(context.Background(), srv.URL, "tok", strings.NewReader(line+"\n"), &out); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(out.String(), "! ") {
					t.Fatalf("/%s failed: %q", name, out.String())
				}
				mu.Lock()
				defer mu.Unlock()
				if strings.HasPrefix(c.Arg, "<") {
					// /connect and /disconnect name their route: a token
					// is not typed into a terminal.
					if !strings.Contains(out.String(), strings.Fields(c.Route)[1]) {
						t.Fatalf("/%s printed %q, not its route", name, out.String())
					}
					return
				}
				if c.Route == "" {
					if !strings.Contains(out.String(), commands.Help()) {
						t.Fatalf("/%s printed %q, not the table's help", name, out.String())
					}
					return
				}
				f := strings.Fields(c.Route)
				want := f[0] + " " + strings.ReplaceAll(f[1], "{id}", "s1")
				for _, r := range requests {
					if r == want {
						return
					}
				}
				t.Fatalf("/%s made requests %q, not its route %q", name, requests, want)
			})
		}
	}
}

// A chat command sent to the API as a message is refused as invalid,
// naming the route that does its work; /help names every route.
