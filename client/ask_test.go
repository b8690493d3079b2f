package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/permissions"
)

// fakeRun serves one run's events over SSE and records the permission
// answers posted to it.
func fakeRun(t *testing.T, events []string) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var answers []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/events"):
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range events {
				fmt.Fprintf(w, "data: %s\n\n", e)
			}
		case r.Method == "POST" && strings.Contains(r.URL.Path, "/permissions/"):
			var body struct{ Answer string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			answers = append(answers, r.URL.Path+" "+body.Answer)
			mu.Unlock()
			_, _ = w.Write([]byte(`{"answer":"` + body.Answer + `"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), answers...)
	}
}

// The chat shows what a run does while its reply waits: the model tried
// again, the conversation compacted.
func TestChatShowsRunStatus(t *testing.T) {
	srv, _ := fakeRun(t, []string{
		`{"type":"turn.started","run_id":"r1","data":{}}`,
		`{"type":"status","run_id":"r1","data":{"state":"busy","message":"compacting the conversation"}}`,
		`{"type":"context.compacted","run_id":"r1","data":{"summarized":12}}`,
		`{"type":"status","run_id":"r1","data":{"state":"retrying","attempt":2,"message":"the provider is busy; trying again in 2s"}}`,
		`{"type":"message.delta","run_id":"r1","data":{"text":"hello"}}`,
		`{"type":"turn.finished","run_id":"r1","data":{}}`,
	})
	c := &Client{Base: srv.URL, Token: "t"}
	var out bytes.Buffer
	v := &runView{c: c, session: "s1", out: &out}
	if _, err := c.FollowWith(context.Background(), "s1", "r1", &out, v.on); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(compacting the conversation)", "(summarized 12 earlier messages to make room)",
		"(retrying, attempt 2: the provider is busy; trying again in 2s)", "hello"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// parley ask has nobody to ask: a question is denied at once, saying so,
// rather than waiting out its timeout.
func TestDenyQuestions(t *testing.T) {
	srv, answers := fakeRun(t, []string{
		`{"type":"permission.requested","run_id":"r1","data":{"request_id":"q1","tool":"gh__search","choices":["once","session","always","deny"]}}`,
		`{"type":"message.delta","run_id":"r1","data":{"text":"without it"}}`,
		`{"type":"turn.finished","run_id":"r1","data":{}}`,
	})
	c := &Client{Base: srv.URL, Token: "t"}
	var out, note bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.FollowWith(ctx, "s1", "r1", &out, c.DenyQuestions("s1", &note)); err != nil {
		t.Fatal(err)
	}
	if got := answers(); len(got) != 1 || got[0] != "/v1/sessions/s1/permissions/q1 deny" {
		t.Fatalf("answers posted: %q", got)
	}
	if !strings.Contains(note.String(), "not run: gh__search needs a person's approval") || out.String() != "without it" {
		t.Fatalf("note %q, reply %q", note.String(), out.String())
	}
}

func TestParseChoice(t *testing.T) {
	choices := []string{"once", "session", "always", "deny"}
	for _, tc := range []struct {
		line, want string
		ok         bool
	}{
		{"1", "once", true}, {" 2. ", "session", true}, {"4", "deny", true}, {"5", "", false}, {"0", "", false},
		{"Always in this chat", "session", true}, {"deny", "deny", true}, {"yes", "", false}, {"", "", false},
	} {
		t.Run(tc.line, func(t *testing.T) {
			var cs []permissions.Answer
			for _, c := range choices {
				cs = append(cs, permissions.Answer(c))
			}
			got, ok := parseChoice(tc.line, cs)
			if string(got) != tc.want || ok != tc.ok {
				t.Fatalf("parseChoice(%q) = %q %v, want %q %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}
